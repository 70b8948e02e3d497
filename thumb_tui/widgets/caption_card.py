"""One caption (or a set of identical captions) with its live scores. No system names."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from rubrics import Rubric, printable
from storage.rating.rating_sessions import CaptionGroup
from thumb_tui.widgets.caption_text import CaptionText


def _score(value: object) -> str:
    return "-" if value is None else str(value)


def _amount(amount: object) -> str:
    return f"{amount:g}" if amount else "-"


def short(label: str) -> str:
    """A rubric's short label as the screens show it: one line, control characters as
    escapes (the rubric came from a file; put it in a Text, never in markup)."""
    return printable(label, newlines=False)


def score_line(values: dict[str, object], rubric: Rubric) -> str:
    """The rubric's scores and penalties in one short line, by their short labels, e.g.
    `P 4  R 3  F 0.1  C -  I -` for THUMB."""
    parts = [f"{short(d.short)} {_score(values[d.key])}" for d in rubric.dimensions]
    parts += [f"{short(p.short)} {_amount(values[p.key])}" for p in rubric.penalties]
    return "  ".join(parts)


def penalty_kinds(values: dict[str, object], rubric: Rubric) -> str:
    """The error types behind the penalties by the rubric's labels, e.g. `fluency:
    spelling, grammar` for THUMB."""
    return "; ".join(
        f"{short(p.label.lower())}: {short(str(values[f'{p.key}_type'])).replace(',', ', ')}"
        for p in rubric.penalties if values[p.key] and values[f"{p.key}_type"])


def note_text(note: object, longest: int | None = None) -> Text:
    """A stored note as literal text; with `longest`, cut to that many cells with an
    ellipsis (where the whole note is shown elsewhere)."""
    text = Text(printable(str(note)), style="italic")
    if longest is not None:
        text.truncate(longest, overflow="ellipsis")
    return text


def rating_context(label: str, values: dict[str, object], rubric: Rubric, *,
                   longest_note: int | None = None) -> Text:
    """Another stage's rating as a reviewer or resolver needs it: the scores, the error
    types and the note (cut to `longest_note` cells, if given), e.g. `stage 1: P 4  R 3
    F 0.1 ... (fluency: spelling) note: …`."""
    text = Text(f"{label}: {score_line(values, rubric)}")
    kinds = penalty_kinds(values, rubric)
    if kinds:
        text.append(f" ({kinds})")
    if values.get("note"):
        text.append(" note: ")
        text.append_text(note_text(values["note"], longest_note))
    return text


class CaptionCard(Horizontal):
    """Renders a caption group: its number in a narrow column, text and scores beside it
    (so wrapped lines hang under the text); the focused dimension is highlighted. A long
    text scrolls inside its own box so the score line under it stays on screen."""

    def __init__(self, number: int, count: int, group: CaptionGroup, rubric: Rubric) -> None:
        super().__init__(classes="caption-card")
        self.number, self.count, self.group, self.rubric = number, count, group, rubric
        self.focused_dimension: str | None = None
        self.penalty_target = False
        self._number = Static(classes="caption-number")
        self.text = CaptionText(classes="caption-text")
        self.scores = Static(classes="caption-scores")

    def compose(self) -> ComposeResult:
        yield self._number
        with Vertical(classes="caption-body"):
            yield self.text
            yield self.scores

    def on_mount(self) -> None:
        self.refresh_card()

    def set_group(self, group: CaptionGroup) -> None:
        self.group = group
        self.refresh_card()

    def set_focus(self, dimension: str | None, *, penalty_target: bool = False) -> None:
        """Highlight `dimension` (None: not focused). A penalty target (marked `*`) is the
        caption the penalty keys still act on while the focus has already moved on."""
        self.focused_dimension = dimension
        self.penalty_target = penalty_target
        self.set_class(dimension is not None, "current")
        self.set_class(penalty_target, "penalty-target")
        if self.is_mounted:  # else on_mount draws it
            self.refresh_card()

    def refresh_card(self) -> None:
        values = self.group.values
        mark = ">" if self.focused_dimension else "*" if self.penalty_target else " "
        self._number.update(
            Text(f"{mark}{self.number}/{self.count}", style="bold"))
        caption = Text(printable(self.group.text))
        if len(self.group.caption_ids) > 1:
            caption.append(f"  (×{len(self.group.caption_ids)})", style="dim")
        self.text.update(caption)
        body = Text()
        for dimension in self.rubric.dimensions:
            style = "bold reverse" if self.focused_dimension == dimension.key else "bold"
            body.append(f" {short(dimension.short)} {_score(values[dimension.key])} ",
                        style=style)
        for penalty in self.rubric.penalties:
            body.append(f" {short(penalty.short)} {_amount(values[penalty.key])}")
        total = self.group.total(self.rubric)
        body.append("  = " + (f"{total:.1f}" if total is not None else "-"), style="bold")
        kinds = penalty_kinds(values, self.rubric)
        if kinds:
            body.append("\n" + kinds, style="dim")
        if values["note"]:
            body.append(f"\nnote: {printable(str(values['note']))}", style="italic")
        if self.group.reference is not None:
            reference = rating_context("stage 1", self.group.reference, self.rubric)
            reference.stylize("dim")
            body.append("\n")
            body.append_text(reference)
        self.scores.update(body)
