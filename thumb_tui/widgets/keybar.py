"""A footer that lists every key of the screen, wrapping onto more lines when narrow."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from rich.text import Text
from textual.binding import Binding
from textual.dom import DOMNode
from textual.events import Key, Resize
from textual.keys import format_key
from textual.screen import Screen
from textual.widgets import Static

from rubrics import printable

# The arrow keys of a list dialog, shown in its footer (the list itself handles them).
MOVE_KEYS = Binding("up,down", "", "move", key_display="↑↓")


def key_label(binding: Binding) -> str:
    return binding.key_display or binding.key


def display_keys(keys: str) -> str:
    """How a user's keys read in the key bar: `ctrl+n,down` -> `^n ↓`."""
    shown = []
    for key in keys.split(","):
        *modifiers, name = key.strip().split("+")
        name = format_key(name)
        if "ctrl" in modifiers:
            modifiers.remove("ctrl")
            name = f"^{name}"
        shown.append("+".join([*modifiers, name]))
    return " ".join(shown)


# Hidden bindings whose keys a shown one's key_display stands for too ("↑↓": next and
# previous caption; "[ ]": next and previous image), by id: hidden -> shown.
SHOWN_WITH = {
    "previous-caption": "next-caption", "scroll-text-up": "scroll-text-down",
    "previous-image": "next-image", "previous-disagreement": "next-disagreement",
    "match-previous": "match-next", "monitor-up": "monitor-down",
    "monitor-page-up": "monitor-page-down", "bison-previous": "bison-next",
    "round-previous": "round-next", "note-scroll-up": "note-scroll-down",
}
SCORE_PREFIX = "score-"  # the digit keys, shown as one range (`1-5`)


def remapped(bindings: list[Binding], keymap: Mapping[str, str]) -> list[Binding]:
    """The bindings with the user's keys (by binding id) in place of the defaults. A
    combined entry whose keys the keymap changes no longer stands for its pair: where
    either of a pair is remapped, both are shown, each with its own keys (`↓ j caption`,
    `^p previous caption`); where a score key is, the range shows every score key in
    order (`1 2 e 4 5`)."""
    with_keys = [replace(b, key=keymap[b.id], key_display=display_keys(keymap[b.id]))
                 if b.id in keymap else b for b in bindings]
    ids = {b.id for b in with_keys if b.id}
    apart = {both for hidden, shown in SHOWN_WITH.items() if {hidden, shown} <= ids
             and (hidden in keymap or shown in keymap) for both in (hidden, shown)}
    scores = [b for b in with_keys if b.id and b.id.startswith(SCORE_PREFIX)]
    score_keys = (" ".join(display_keys(b.key) for b in scores)
                  if any(b.id in keymap for b in scores) else None)
    return [replace(b, show=True, key_display=display_keys(b.key)) if b.id in apart else
            replace(b, key_display=score_keys) if score_keys and b in scores and b.show
            else b for b in with_keys]


def user_keymap(node: DOMNode) -> Mapping[str, str]:
    """The keymap of the app `node` belongs to ({} outside a ThumbApp)."""
    return getattr(node.app, "keymap", {})


class KeyBar(Static):
    """Shows the screen's visible bindings: unlike Textual's one-line Footer, none is cut off
    at 80 columns; a key and its description always stay on one line."""

    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: auto;
        background: $panel;
        color: $text;
        padding: 0 1;
    }
    KeyBar.-suspended {
        display: none;
    }
    """

    def __init__(self, bindings: list[Binding], **kwargs: object) -> None:
        super().__init__(**kwargs)
        self._bindings = bindings
        self._items: list[tuple[str, str]] = []

    def on_mount(self) -> None:
        # keys from the user's keymap, descriptions with a rubric's labels: shown literally
        self._items = [(f" {printable(key_label(b), newlines=False)} ",
                        f" {printable(b.description, newlines=False)}")
                       for b in remapped(self._bindings, user_keymap(self)) if b.show]
        self._layout(self.content_size.width or 78)

    def on_resize(self, event: Resize) -> None:
        self._layout(self.content_size.width)

    def _layout(self, width: int) -> None:
        text, used = Text(), 0
        for key, description in self._items:
            length = len(key) + len(description) + 1
            if used and used + length > width:
                text.append("\n")
                used = 0
            elif used:
                text.append(" ")
            text.append(key, style="bold reverse")
            text.append(description)
            used += length
        self.update(text)


MINIMUM_SIZE = (80, 24)
USABLE_WHEN_SMALL = frozenset({"quit_app", "help"})


class KeyBarScreen(Screen[None]):
    """A work screen whose KeyBar hides while a dialog covers it, so the footer lists only
    the keys that act (the dialog's own). Below 80x24 the focused caption can be out of
    view, so a notice covers the screen and only help and quit act until it fits. A key
    that does nothing says so."""

    DEFAULT_CSS = """
    KeyBarScreen.-too-small > * {
        display: none;
    }
    KeyBarScreen > #too-small {
        display: none;
        width: 100%;
        height: 100%;
        content-align: center middle;
        text-align: center;
        background: $error-darken-3;
        color: $text;
        text-style: bold;
    }
    KeyBarScreen.-too-small > #too-small {
        display: block;
    }
    """

    def say(self, message: str) -> None:
        """Show a one-line message (each screen has its own message line)."""
        raise NotImplementedError

    @property
    def shown_bindings(self) -> list[Binding]:
        """The screen's bindings with the user's keys, as the key bar and help show them."""
        return remapped(self.BINDINGS, user_keymap(self))

    def on_mount(self) -> None:
        self.mount(Static(id="too-small"))
        self.check_size()

    def on_resize(self, event: Resize) -> None:
        self.check_size()

    @property
    def too_small(self) -> bool:
        width, height = self.app.size
        return width < MINIMUM_SIZE[0] or height < MINIMUM_SIZE[1]

    def check_size(self) -> None:
        width, height = self.app.size
        self.set_class(self.too_small, "-too-small")
        if self.too_small:
            self.query_one("#too-small", Static).update(
                f"terminal too small (need {MINIMUM_SIZE[0]}×{MINIMUM_SIZE[1]}, "
                f"now {width}×{height})\nenlarge it to go on; q quits")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Every key but help and quit waits while the terminal is too small."""
        return not self.too_small or action in USABLE_WHEN_SMALL

    def on_key(self, event: Key) -> None:
        if event.is_printable and event.key not in self.active_bindings and not self.too_small:
            self.say(f"the key {event.character} does nothing here; ? lists the keys")

    def on_screen_suspend(self) -> None:
        self.query(KeyBar).set_class(True, "-suspended")

    def on_screen_resume(self) -> None:
        self.query(KeyBar).set_class(False, "-suspended")
