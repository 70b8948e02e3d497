"""A compact reminder of the rubric beside the captions; `?` opens the full help."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.events import Resize
from textual.widgets import Static

from rubrics import Rubric, printable


def rubric_summary(rubric: Rubric, *, fit: tuple[Console, int, int] | None = None) -> Text:
    """The rubric's title, questions and rules as literal text (a Text, never markup; its
    control characters shown as escapes: the rubric came from someone's file). With `fit`
    (a console, a width and a height), only the rules that fit whole are listed, then a
    line saying how many more `?` shows: a panel never ends mid-sentence."""
    text = Text()
    text.append(printable(rubric.title, newlines=False), style="bold")
    text.append(" (? full rubric)\n", style="dim")
    for dimension in rubric.dimensions:
        text.append(f"{printable(dimension.short, newlines=False)} "
                    f"{dimension.min}-{dimension.max}: ", style="bold")
        text.append(f"{printable(dimension.question)}\n")
    # the heading shares a line with the first rule: a panel cut short never ends on it
    rules = []
    for number, rule in enumerate(rubric.rules):
        line = Text("Rules: " if number == 0 else "", style="bold")
        line.append(f"• {printable(rule.text)}\n", style="not bold")
        rules.append(line)
    if fit is None:
        return Text.assemble(text, *rules)
    console, width, height = fit

    def lines(part: Text) -> int:
        return len(part.wrap(console, width)) - 1  # (each part ends with a newline)

    used = lines(text)
    for shown, rule in enumerate(rules):
        left = len(rules) - shown
        more_line = 0 if left == 1 else 1  # room to say what is left after this one
        if used + lines(rule) + more_line > height:
            if used < height:
                text.append(f"Rules: ? lists all {left}" if shown == 0 else
                            f"… {left} more: ? lists {'it' if left == 1 else 'them'}",
                            style="dim")
            break
        text.append_text(rule)
        used += lines(rule)
    text.rstrip()  # no empty last line to scroll to
    return text


class RubricPanel(VerticalScroll, can_focus=False):
    """Not focusable: the screen's arrow keys move between captions, never scroll this.
    It lists what fits of the rubric (`rubric_summary`), fitted again on each resize."""

    def __init__(self, rubric: Rubric, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.rubric = rubric
        self.summary = Static(rubric_summary(rubric))

    def compose(self) -> ComposeResult:
        yield self.summary

    def on_resize(self, event: Resize) -> None:
        region = self.scrollable_content_region
        self.summary.update(rubric_summary(
            self.rubric, fit=(self.app.console, region.width, region.height)))
