"""User keymaps by binding id (as in Posting): `$XDG_CONFIG_HOME/thumb-tui/keymap.toml`
(default `~/.config/thumb-tui/keymap.toml`) remaps the screens' keys, e.g.

    [keymap]
    fluency = "v"
    next-caption = "down,ctrl+n"

The help screen lists every binding id. The file is untrusted input: a bad one is refused
with every problem, one line each naming the file."""

from __future__ import annotations

import os
import string
import unicodedata
from functools import cache
from pathlib import Path

from textual.binding import Binding
from textual.keys import KEY_NAME_REPLACEMENTS, Keys

from rubrics import forbidden_character, refusal
from rubrics.schema import FileError, read_toml, shown
from thumb_tui.widgets.keybar import remapped

MAX_KEYMAP_BYTES = 64 * 1024
MAX_KEYS = 8  # keys of one binding
MAX_KEYS_CHARS = 200
MODIFIERS = ("ctrl", "shift", "alt", "meta", "super", "hyper")
EXAMPLE = 'e.g. "v" or "down,ctrl+n"'


class KeymapError(FileError):
    """The keymap file cannot be used; the message names the file and every problem, one
    `FILE: problem` line each."""


def keymap_path() -> Path:
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "thumb-tui" / "keymap.toml"


def screen_bindings() -> dict[str, list[Binding]]:
    """Every screen and dialog by name, with its bindings."""
    from thumb_tui.screens.annotate import AnnotateScreen, ReviewScreen
    from thumb_tui.screens.bison import BisonScreen
    from thumb_tui.screens.confirm_flag import ChooseBrokenScreen, ConfirmFlagScreen
    from thumb_tui.screens.entry import EntryScreen
    from thumb_tui.screens.fluency import FluencyScreen
    from thumb_tui.screens.fluency_round import FluencyRoundScreen
    from thumb_tui.screens.help import HelpScreen
    from thumb_tui.screens.match import MatchScreen
    from thumb_tui.screens.monitor import MonitorScreen
    from thumb_tui.screens.note import NoteScreen
    from thumb_tui.screens.resolve import ReasonScreen, ResolveScreen

    screens = {"annotate": AnnotateScreen, "review": ReviewScreen, "resolve": ResolveScreen,
               "reasons": ReasonScreen, "fluency round": FluencyRoundScreen,
               "BISON": BisonScreen, "fluency": FluencyScreen, "note": NoteScreen,
               "help": HelpScreen, "match": MatchScreen, "entry": EntryScreen,
               "flag": ConfirmFlagScreen, "flag image": ChooseBrokenScreen,
               "monitor": MonitorScreen}
    return {name: list(screen.BINDINGS) for name, screen in screens.items()}


def character_key(character: str) -> str:
    """The name Textual gives the key of one character: the character itself where it is
    a letter or digit, else its Unicode name in lower case with `_` for spaces and
    hyphens (`question_mark` for `?`), shortened as Textual shortens some (`slash`,
    `minus`). Textual's own conversion is private; `tests/test_keymap.py` pins this one
    to the names its bindings take."""
    if character.isalnum():
        return character
    try:
        name = unicodedata.name(character).lower().replace("-", "_").replace(" ", "_")
    except ValueError:  # a character without a name (a control character)
        return character
    return KEY_NAME_REPLACEMENTS.get(name, name)


@cache
def key_names() -> frozenset[str]:
    """The names of keys that are not one character, as Textual reports them: `down`,
    `f1`, `pagedown`, `question_mark` (for `?`), `space`."""
    named = {key.value.rsplit("+", 1)[-1] for key in Keys}
    named |= {character_key(c) for c in string.punctuation + " "}
    return frozenset(name for name in named if len(name) > 1 and name.replace("_", "").isalnum()
                     and name.isascii())


def parse_key(key: str) -> str | None:
    """One key as Textual names it (`ctrl+n`, `question_mark` for `?`), or None when `key`
    is none: modifiers (each once) before a key name or one visible character."""
    *modifiers, name = key.split("+")
    if any(m not in MODIFIERS for m in modifiers) or len(set(modifiers)) < len(modifiers):
        return None
    if len(name) == 1:
        if unicodedata.category(name)[0] not in "LNPS":  # no control, space, mark, format
            return None
        name = character_key(name)
    elif name not in key_names():
        return None
    return "+".join([*modifiers, name])


def parse_keys(binding_id: str, keys: object) -> tuple[str | None, list[str]]:
    """A binding's keys (comma-separated text) as Textual names them, and the problems."""
    if not isinstance(keys, str):
        return None, [f"{binding_id} must be keys as text, {EXAMPLE}"]
    if (character := forbidden_character(keys)) is not None:
        return None, [f"{binding_id}: {refusal(character)}"]
    if len(keys) > MAX_KEYS_CHARS:
        return None, [f"{binding_id}: {len(keys)} characters of keys (at most "
                      f"{MAX_KEYS_CHARS})"]
    items = [item.strip(" \t") for item in keys.split(",")]
    if len(items) > MAX_KEYS:
        return None, [f"{binding_id}: {len(items)} keys (at most {MAX_KEYS})"]
    if not any(items) or "" in items:
        return None, [f"{binding_id}: an empty key in {shown(keys)}; give keys as text, "
                      f"{EXAMPLE}"]
    names = {item: parse_key(item) for item in items}
    problems = [f"{binding_id}: {shown(item)} is not a key (one visible character such as "
                "\"v\", or a key name such as \"down\", \"f1\" or \"ctrl+n\")"
                for item, name in names.items() if name is None]
    return (None, problems) if problems else (",".join(map(str, names.values())), [])


def load_keymap(path: Path | None = None) -> dict[str, str]:
    """Binding id -> keys (comma-separated, as Textual names them) from the keymap file;
    {} when there is none. The file is checked whole (size, UTF-8, nesting, TOML), then
    every entry: a known binding id, keys as text, each a real key (one visible character
    or a Textual key name, with modifiers), and no two bindings of one screen on the same
    key. KeymapError lists every problem, each with the file's name."""
    path = keymap_path() if path is None else path
    if not path.exists():
        return {}  # (a FIFO, a device or a folder is refused by read_toml, not read)
    data = read_toml(path, max_bytes=MAX_KEYMAP_BYTES, error=KeymapError)
    problems = []
    if set(data) - {"keymap"} or not isinstance(data.get("keymap", {}), dict):
        problems.append("expected only a [keymap] table of binding id = \"keys\"")
    entries = data.get("keymap", {}) if isinstance(data.get("keymap", {}), dict) else {}
    screens = screen_bindings()
    known = {b.id for bindings in screens.values() for b in bindings if b.id}
    keymap: dict[str, str] = {}
    for binding_id, keys in entries.items():
        if binding_id not in known:
            problems.append(f"unknown binding id {shown(binding_id)} (the help screen, ?, "
                            "lists the ids)")
            continue
        parsed, wrong = parse_keys(binding_id, keys)
        problems += wrong
        if parsed is not None:
            keymap[binding_id] = parsed
    for name, bindings in screens.items():
        taken: dict[str, str] = {}
        for binding in remapped(bindings, keymap):
            for key in binding.key.split(","):
                other = taken.setdefault(key.strip(), str(binding.id))
                if other != binding.id:
                    problems.append(f"on the {name} screen the key {key.strip()!r} would do "
                                    f"both {other} and {binding.id}")
    if problems:
        raise KeymapError(str(path), list(dict.fromkeys(problems)))
    return keymap
