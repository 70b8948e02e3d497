"""Type a number the rubric allows: a score on a scale the digit keys cannot cover (0-10,
negative levels), or the amount of a penalty type that is a range (e.g. 0.5-1.5). What is
valid comes from the rubric (`Dimension.scale`, `ErrorType.check`, `PenaltyCategory.allows`);
an invalid entry is refused with the reason and the dialog stays open."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from rubrics import Dimension, ErrorType, PenaltyCategory, printable
from thumb_tui.widgets.keybar import KeyBar

# What a check returns: the value, or None and why the text is refused.
Checked = tuple[float | None, str | None]

_WHOLE = re.compile(r"[+-]?[0-9]{1,4}")
_MAX_ENTRY_CHARS = 24


def scale_text(dimension: Dimension) -> str:
    """`Scope takes 1-3` (an en dash): what a score outside the dimension's scale is told."""
    return (f"{printable(dimension.label, newlines=False)} takes "
            f"{dimension.min}–{dimension.max}")


def check_score(dimension: Dimension, text: str) -> Checked:
    """A typed score: a whole number on the dimension's scale."""
    text = text.strip()
    if not _WHOLE.fullmatch(text):
        return None, f"{printable(text, newlines=False)!r} is not a whole number; " \
                     f"{scale_text(dimension)}"
    value = int(text)
    if value not in dimension.scale:
        return None, f"{scale_text(dimension)}, not {value}"
    return value, None


def penalty_range_text(category: PenaltyCategory, error_type: ErrorType) -> str:
    """`Bias (Leans on a stereotype) takes 0.5-1.5` (an en dash)."""
    return (f"{printable(category.label, newlines=False)} "
            f"({printable(error_type.label, newlines=False)}) takes "
            f"{error_type.min:g}–{error_type.max:g}")


def check_penalty(category: PenaltyCategory, error_type: ErrorType, text: str) -> Checked:
    """A typed penalty amount for a ranged type, valid when the rubric says so (the type's
    own range and the penalty's allowed amounts)."""
    text = text.strip()
    try:
        value = float(text) if len(text) <= _MAX_ENTRY_CHARS else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        return None, (f"{printable(text[:_MAX_ENTRY_CHARS], newlines=False)!r} is not a "
                      f"number; {penalty_range_text(category, error_type)}")
    try:
        error_type.check(value)
    except ValueError:
        return None, f"{penalty_range_text(category, error_type)}, not {value:g}"
    if not category.allows(value):
        return None, f"{penalty_range_text(category, error_type)}, not {value:g}"
    return value, None


class EntryScreen(ModalScreen[float | None]):
    """Returns the checked value on Enter, or None on Esc. A refused entry shows why and
    leaves the dialog open (nothing is saved)."""

    BINDINGS = [Binding("escape", "cancel", "cancel", id="entry-cancel")]
    CSS_PATH = "entry.tcss"

    def __init__(self, title: str, prompt: str, check: Callable[[str], Checked],
                 initial: str = "") -> None:
        super().__init__()
        self.title_text, self.prompt, self.check = title, prompt, check
        self.initial = initial

    def compose(self) -> ComposeResult:
        with Vertical(id="entry-dialog"):
            yield Label(Text(self.title_text), id="entry-title")
            yield Label(Text(self.prompt), id="entry-prompt")
            yield Input(self.initial, id="entry-input", max_length=_MAX_ENTRY_CHARS)
            yield Label("", id="entry-error")
        yield KeyBar([Binding("enter", "", "save"), *self.BINDINGS])

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        value, problem = self.check(event.value)
        if problem is not None:
            self.query_one("#entry-error", Label).update(Text(f"not saved: {problem}"))
            return
        self.dismiss(value)

    def action_cancel(self) -> None:
        self.dismiss(None)
