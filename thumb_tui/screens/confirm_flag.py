"""Ask before flagging an image as broken: the flag takes the image out of the
annotator's way, of review and of the report, so one stray `x` must not set it."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label

from rubrics import printable
from thumb_tui.widgets.keybar import KeyBar


class ConfirmFlagScreen(ModalScreen[bool]):
    """Returns True on y or Enter (flag it), False on n or Escape (leave it)."""

    CSS_PATH = "confirm_flag.tcss"
    BINDINGS = [
        Binding("y,enter", "answer(True)", "flag it", key_display="y/Enter", id="flag-yes"),
        Binding("n,escape", "answer(False)", "cancel", key_display="n/Esc", id="flag-no"),
    ]

    def __init__(self, name: str, reason: str,
                 note: str = "It leaves your queue, review and the report; u undoes it."
                 ) -> None:
        super().__init__()
        self.image = name
        self.reason = reason
        self.note = note

    def compose(self) -> ComposeResult:
        with Vertical(id="flag-dialog"):
            yield Label(f"Flag {printable(self.image, newlines=False)} as broken?",
                        id="flag-question", markup=False)
            yield Label(f"Reason: {printable(self.reason, newlines=False)}",
                        id="flag-reason", markup=False)
            yield Label(self.note, id="flag-note")
        yield KeyBar(self.BINDINGS)

    def action_answer(self, flag: bool) -> None:
        self.dismiss(flag)
