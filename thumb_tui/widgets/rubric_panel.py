"""A compact reminder of the rubric beside the captions; `?` opens the full help."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from rubrics import Rubric, printable


def rubric_summary(rubric: Rubric) -> Text:
    """The rubric's title, questions and rules as literal text (a Text, never markup; its
    control characters shown as escapes: the rubric came from someone's file)."""
    text = Text()
    text.append(printable(rubric.title, newlines=False), style="bold")
    text.append(" (? full rubric)\n", style="dim")
    for dimension in rubric.dimensions:
        text.append(f"{printable(dimension.short, newlines=False)} "
                    f"{dimension.min}-{dimension.max}: ", style="bold")
        text.append(f"{printable(dimension.question)}\n")
    # the heading shares a line with the first rule: a panel cut short never ends on it
    for number, rule in enumerate(rubric.rules):
        if number == 0:
            text.append("Rules: ", style="bold")
        text.append(f"• {printable(rule.text)}\n")
    return text


class RubricPanel(VerticalScroll, can_focus=False):
    """Not focusable: the screen's arrow keys move between captions, never scroll this."""

    def __init__(self, rubric: Rubric, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.rubric = rubric

    def compose(self) -> ComposeResult:
        yield Static(rubric_summary(self.rubric))
