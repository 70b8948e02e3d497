"""User keymaps by binding id (as in Posting): `$XDG_CONFIG_HOME/thumb-tui/keymap.toml`
(default `~/.config/thumb-tui/keymap.toml`) remaps the screens' keys, e.g.

    [keymap]
    fluency = "v"
    next-caption = "down,ctrl+n"

The help screen lists every binding id. A bad file is refused with one line naming it."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from textual.binding import Binding
from textual.keys import _normalize_key_list

from thumb_tui.widgets.keybar import remapped


class KeymapError(ValueError):
    """The keymap file cannot be used; the message names the file and the problem."""


def keymap_path() -> Path:
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "thumb-tui" / "keymap.toml"


def screen_bindings() -> dict[str, list[Binding]]:
    """Every screen and dialog by name, with its bindings."""
    from thumb_tui.screens.annotate import AnnotateScreen, ReviewScreen
    from thumb_tui.screens.bison import BisonScreen
    from thumb_tui.screens.fluency import FluencyScreen
    from thumb_tui.screens.fluency_round import FluencyRoundScreen
    from thumb_tui.screens.help import HelpScreen
    from thumb_tui.screens.match import MatchScreen
    from thumb_tui.screens.note import NoteScreen
    from thumb_tui.screens.resolve import ReasonScreen, ResolveScreen

    screens = {"annotate": AnnotateScreen, "review": ReviewScreen, "resolve": ResolveScreen,
               "reasons": ReasonScreen, "fluency round": FluencyRoundScreen,
               "BISON": BisonScreen, "fluency": FluencyScreen, "note": NoteScreen,
               "help": HelpScreen, "match": MatchScreen}
    return {name: list(screen.BINDINGS) for name, screen in screens.items()}


def load_keymap(path: Path | None = None) -> dict[str, str]:
    """Binding id -> keys (comma-separated) from the keymap file; {} when there is none.
    Unknown ids, keys that are not text and two bindings of one screen on the same key
    are refused."""
    path = keymap_path() if path is None else path
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise KeymapError(f"{path}: not a readable TOML file: {exc}") from exc
    if set(data) - {"keymap"} or not isinstance(data.get("keymap", {}), dict):
        raise KeymapError(f"{path}: expected only a [keymap] table of binding id = \"keys\"")
    keymap = data.get("keymap", {})
    screens = screen_bindings()
    known = {b.id for bindings in screens.values() for b in bindings if b.id}
    for binding_id, keys in keymap.items():
        if binding_id not in known:
            raise KeymapError(f"{path}: unknown binding id {binding_id!r} (the help screen, "
                              "?, lists the ids)")
        if not isinstance(keys, str) or not keys.strip(","):
            raise KeymapError(f"{path}: {binding_id} must be keys as text, e.g. \"v\" or "
                              "\"down,ctrl+n\"")
    keymap = {binding_id: _normalize_key_list(keys) for binding_id, keys in keymap.items()}
    for name, bindings in screens.items():
        taken: dict[str, str] = {}
        for binding in remapped(bindings, keymap):
            for key in binding.key.split(","):
                other = taken.setdefault(key.strip(), str(binding.id))
                if other != binding.id:
                    raise KeymapError(f"{path}: on the {name} screen the key {key.strip()!r} "
                                      f"would do both {other} and {binding.id}")
    return keymap
