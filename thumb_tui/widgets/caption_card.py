"""One caption (or a set of identical captions) with its live scores. No system names."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static

from rubrics import Rubric
from storage.annotation import CaptionGroup


def _score(value: object) -> str:
    return "-" if value is None else str(value)


def _amount(amount: object) -> str:
    return f"{amount:g}" if amount else "-"


def score_line(values: dict[str, object]) -> str:
    """P, R and penalties in one short line, e.g. `P 4  R 3  F 0.1  C -  I -`."""
    parts = [f"P {_score(values['precision'])}", f"R {_score(values['recall'])}"]
    parts += [f"{label} {_amount(values[key])}" for key, label in
              (("fluency", "F"), ("conciseness", "C"), ("inclusive", "I"))]
    return "  ".join(parts)


class CaptionCard(Horizontal):
    """Renders a caption group: its number in a narrow column, text and scores beside it
    (so wrapped lines hang under the text); the focused dimension is highlighted."""

    def __init__(self, number: int, count: int, group: CaptionGroup, rubric: Rubric) -> None:
        super().__init__(classes="caption-card")
        self.number, self.count, self.group, self.rubric = number, count, group, rubric
        self.focused_dimension: str | None = None
        self._number = Static(classes="caption-number")
        self._body = Static(classes="caption-body")

    def compose(self) -> ComposeResult:
        yield self._number
        yield self._body

    def on_mount(self) -> None:
        self.refresh_card()

    def set_group(self, group: CaptionGroup) -> None:
        self.group = group
        self.refresh_card()

    def set_focus(self, dimension: str | None) -> None:
        self.focused_dimension = dimension
        self.set_class(dimension is not None, "current")
        self.refresh_card()

    def refresh_card(self) -> None:
        values = self.group.values
        mark = ">" if self.focused_dimension else " "
        self._number.update(
            Text(f"{mark}{self.number}/{self.count}", style="bold"))
        body = Text(self.group.text)
        if len(self.group.caption_ids) > 1:
            body.append(f"  (×{len(self.group.caption_ids)})", style="dim")
        body.append("\n")
        for key, label in (("precision", "P"), ("recall", "R")):
            style = "bold reverse" if self.focused_dimension == key else "bold"
            body.append(f" {label} {_score(values[key])} ", style=style)
        for key, label in (("fluency", "F"), ("conciseness", "C"), ("inclusive", "I")):
            body.append(f" {label} {_amount(values[key])}")
        total = self.group.total(self.rubric)
        body.append("  = " + (f"{total:.1f}" if total is not None else "-"), style="bold")
        kinds = [f"{key}: {str(values[f'{key}_type']).replace(',', ', ')}"
                 for key in ("fluency", "conciseness", "inclusive")
                 if values[key] and values[f"{key}_type"]]
        if kinds:
            body.append("\n" + "; ".join(kinds), style="dim")
        if values["note"]:
            body.append(f"\nnote: {values['note']}", style="italic")
        if self.group.reference is not None:
            body.append("\nstage 1: " + score_line(self.group.reference), style="dim")
        self._body.update(body)
