"""Edit the free-text note of the current caption."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from thumb_tui.widgets.caption_text import CaptionText
from thumb_tui.widgets.keybar import KeyBar


class NoteScreen(ModalScreen[str | None]):
    """Returns the new note on Enter, None on Escape."""

    CSS_PATH = "note.tcss"
    BINDINGS = [Binding("escape", "cancel", "cancel", id="note-cancel")]

    def __init__(self, caption: str, note: str) -> None:
        super().__init__()
        self.caption = caption
        self.note = note

    def compose(self) -> ComposeResult:
        with Vertical(id="note-dialog"):
            yield CaptionText(self.caption, id="note-caption")
            yield Label("Note for this caption (Enter saves, Esc cancels):")
            yield Input(value=self.note, id="note-input")
        yield KeyBar([Binding("enter", "save", "save"), *self.BINDINGS])

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)
