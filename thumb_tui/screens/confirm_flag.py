"""Ask before flagging an image as broken: the flag takes the image out of the
annotator's way, of review and of the report, so one stray `x` must not set it. Where a
task shows two images (BISON), the annotator says which one is broken."""

from __future__ import annotations

from dataclasses import replace

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


# What a BISON item calls its images, in the order the dialog lists them.
SIDES = ("left", "right")


class ChooseBrokenScreen(ModalScreen[tuple[str, ...] | None]):
    """Which of two images is broken: each is listed with what the file check found, and
    the annotator picks the left one, the right one or both (or, when the check found a
    fault, y or Enter takes what it found); returns the sides picked, None on n or Escape.
    The keys and ids are BISON's and the flag dialog's own (`bison-left`, `flag-yes`, …),
    so a keymap that moves them moves them here too."""

    CSS_PATH = "confirm_flag.tcss"
    BINDINGS = [
        Binding("y,enter", "flag_found", "flag what the check found", key_display="y/Enter",
                id="flag-yes"),
        Binding("l,left", "choose('left')", "left", key_display="l ←", id="bison-left"),
        Binding("r,right", "choose('right')", "right", key_display="r →", id="bison-right"),
        Binding("b", "choose('both')", "both", id="bison-both"),
        Binding("n,escape", "cancel", "cancel", key_display="n/Esc", id="flag-no"),
    ]

    def __init__(self, images: dict[str, tuple[str, str | None]], note: str) -> None:
        """`images`: side -> (the image's name, the problem the check found or None)."""
        super().__init__()
        self.images = images
        self.note = note

    def compose(self) -> ComposeResult:
        with Vertical(id="flag-dialog"):
            yield Label("Which image is broken?", id="flag-question")
            for side in SIDES:
                name, problem = self.images[side]
                found = f"the check found: {problem}" if problem else "no fault found"
                yield Label(printable(f"{side}: {name} ({found})", newlines=False),
                            classes="flag-side", markup=False)
            yield Label(self.note, id="flag-note", markup=False)
        yield KeyBar([replace(b, description=f"flag {' and '.join(self.found)}")
                      if b.action == "flag_found" else b
                      for b in self.BINDINGS if b.action != "flag_found" or self.found])

    @property
    def found(self) -> tuple[str, ...]:
        """The sides whose file the check found broken."""
        return tuple(side for side in SIDES if self.images[side][1])

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """y and Enter act only when the check found a fault."""
        return action != "flag_found" or bool(self.found)

    def action_flag_found(self) -> None:
        self.dismiss(self.found)

    def action_choose(self, side: str) -> None:
        self.dismiss(SIDES if side == "both" else (side,))

    def action_cancel(self) -> None:
        self.dismiss(None)
