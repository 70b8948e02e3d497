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
    """Returns the new note on Enter, None on Escape. A caption longer than its box
    scrolls by key (the typing goes to the note)."""

    CSS_PATH = "note.tcss"
    BINDINGS = [
        Binding("escape", "cancel", "cancel", id="note-cancel"),
        Binding("shift+down,pagedown", "scroll_caption(1)", "scroll caption",
                key_display="⇧↑↓", id="note-scroll-down"),
        Binding("shift+up,pageup", "scroll_caption(-1)", "scroll caption up", show=False,
                id="note-scroll-up"),
    ]

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

    def action_scroll_caption(self, step: int) -> None:
        self.query_one("#note-caption", CaptionText).scroll_text(step)
