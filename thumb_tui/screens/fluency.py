"""Pick an error of a penalty whose errors add up (THUMB's fluency) from the rubric's
catalogue; the penalty follows from the type, or for a ranged type from the amount picked.
Every word it shows is the rubric's."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from rubrics import ErrorType, Rubric, printable
from thumb_tui.widgets.caption_text import CaptionText
from thumb_tui.widgets.keybar import MOVE_KEYS, KeyBar

CLEAR = "__clear__"
RANGE_STEPS = {"broken": tuple(step / 2 for step in range(1, 11))}  # 0.5, 1.0 … 5.0


def range_values(error_type: ErrorType) -> tuple[float, ...]:
    """Choices offered for a ranged type: steps of 0.1 from its minimum, and its maximum
    (THUMB's broken sentence: steps of 0.5); each one the type allows (`ErrorType.check`)."""
    if error_type.code in RANGE_STEPS:
        steps = list(RANGE_STEPS[error_type.code])
    else:
        count = int((error_type.max - error_type.min) / 0.1 + 1e-6)
        steps = [round(error_type.min + n * 0.1, 6) for n in range(count + 1)]
        steps.append(error_type.max)
    allowed = []
    for value in dict.fromkeys(steps):
        try:
            error_type.check(value)
        except ValueError:
            continue
        allowed.append(value)
    return tuple(allowed)


class FluencyScreen(ModalScreen[tuple[str, float] | None]):
    """Returns (error type code, penalty) to add, ("__clear__", 0) to clear, or None."""

    CSS_PATH = "fluency.tcss"
    BINDINGS = [Binding("escape", "cancel", "cancel", id="fluency-cancel")]

    def __init__(self, rubric: Rubric, caption: str, current: str) -> None:
        super().__init__()
        self.category = rubric.penalty("fluency")
        self.word = printable(self.category.label.lower(), newlines=False)
        self.caption = caption
        self.current = current
        self.pending: ErrorType | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="fluency-dialog"):
            yield CaptionText(self.caption, id="fluency-caption")
            yield Label(Text(f"{printable(self.category.label, newlines=False)} errors now: "
                             f"{printable(self.current, newlines=False)}"),
                        id="fluency-current")
            yield Label(Text(f"Add a {self.word} error (Enter), or clear them:"),
                        id="fluency-prompt")
            # the rubric's labels as literal text: an Option's plain string is markup
            options = [
                Option(Text(f"{self._value_label(t):>8}  {printable(t.label, newlines=False)}"),
                       id=t.code)
                for t in self.category.types
            ]
            options.append(Option(Text(f"          clear all {self.word} errors"), id=CLEAR))
            yield OptionList(*options, id="fluency-options")
        yield KeyBar([MOVE_KEYS, Binding("enter", "select", "choose"), *self.BINDINGS])

    def on_mount(self) -> None:
        self.query_one(OptionList).highlighted = 0

    @staticmethod
    def _value_label(error_type: ErrorType) -> str:
        if error_type.fixed:
            return f"{error_type.min:g}"
        return f"{error_type.min:g}-{error_type.max:g}"

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        option_id = event.option.id or ""
        if self.pending is not None:
            self.dismiss((self.pending.code, float(option_id)))
        elif option_id == CLEAR:
            self.dismiss((CLEAR, 0.0))
        else:
            error_type = self.category.type(option_id)
            if error_type.fixed:
                self.dismiss((error_type.code, error_type.min))
            else:
                self._ask_value(error_type)

    def _ask_value(self, error_type: ErrorType) -> None:
        self.pending = error_type
        self.query_one("#fluency-prompt", Label).update(
            Text(f"Penalty for: {printable(error_type.label, newlines=False)}"))
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_options([Option(f"{v:g}", id=f"{v:g}") for v in range_values(error_type)])
        options.highlighted = 0

    def action_cancel(self) -> None:
        self.dismiss(None)
