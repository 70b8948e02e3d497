"""A footer that lists every key of the screen, wrapping onto more lines when narrow."""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.widgets import Static


def key_label(binding: Binding) -> str:
    return binding.key_display or binding.key


class KeyBar(Static):
    """Shows the screen's visible bindings: unlike Textual's one-line Footer, none is cut off
    at 80 columns."""

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
        self._bindings = [b for b in bindings if b.show]

    def on_mount(self) -> None:
        text = Text()
        for index, binding in enumerate(self._bindings):
            if index:
                text.append("  ")
            text.append(key_label(binding), style="bold reverse")
            text.append(f" {binding.description}")
        self.update(text)
