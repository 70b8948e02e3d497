"""A footer that lists every key of the screen, wrapping onto more lines when narrow."""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Static

# The arrow keys of a list dialog, shown in its footer (the list itself handles them).
MOVE_KEYS = Binding("up,down", "", "move", key_display="↑↓")


def key_label(binding: Binding) -> str:
    return binding.key_display or binding.key


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
    """

    def __init__(self, bindings: list[Binding], **kwargs: object) -> None:
        super().__init__(**kwargs)
        self._items = [(f" {key_label(b)} ", f" {b.description}") for b in bindings if b.show]

    def on_mount(self) -> None:
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


class KeyBarScreen(Screen[None]):
    """A work screen whose KeyBar hides while a dialog covers it, so the footer lists only
    the keys that act (the dialog's own)."""

    def on_screen_suspend(self) -> None:
        self.query(KeyBar).set(display=False)

    def on_screen_resume(self) -> None:
        self.query(KeyBar).set(display=True)
