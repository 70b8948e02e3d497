"""What differs between the rating stages, as small policy objects the rating screens hold:
where the focus goes after a score, what a first edit starts from, the title's status words
and the stage's own keys. The screens' behaviour is otherwise one and the same
(`thumb_tui.screens.rating.RatingScreen`, `thumb_tui.screens.annotate.AnnotateScreen`).

Plain data and pure functions (the keys are Textual `Binding`s, only data here), so the
policies are tested without a running screen (tests/test_screen_state.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from textual.binding import Binding

from storage.rating.protocol import is_started
from thumb_tui.screens.cursor import CaptionCursor, Scored


class Reviewed(Scored, Protocol):
    """A caption group as a stage policy reads it: its values, and at review the stage-1
    values under review (`reference`, None elsewhere)."""

    @property
    def reference(self) -> Mapping[str, object] | None: ...


def reviewed_values(group: Reviewed) -> dict[str, object]:
    """The stage-1 scores and penalties to confirm (the note stays the reviewer's own)."""
    assert group.reference is not None
    return {key: value for key, value in group.reference.items() if key != "note"}


@dataclass(frozen=True)
class RatingStage:
    """One stage's differences.

    `status_words`: the title's word for a finished item, and for one still to do.
    `in_order`: after a score the focus goes P, then R, then the next caption whatever is
    filled (review: the stage-1 values fill both); otherwise it goes to what is missing.
    `from_reference`: a first edit of a caption starts from the stage-1 values, penalties
    included, so that changing P does not silently drop them (review).
    `keys`: the stage's own bindings, listed before help and quit."""

    name: str
    status_words: tuple[str, str]
    in_order: bool = False
    from_reference: bool = False
    keys: tuple[Binding, ...] = ()

    def after_score(self, cursor: CaptionCursor, groups: Sequence[Scored], *,
                    correcting: bool = False) -> int | None:
        """Move the cursor on after the focused dimension was saved (`correcting`: on a
        caption complete before it); the caption done when the focus moved on to the
        next (the screen says so), else None."""
        if self.in_order:
            return cursor.scored_in_order()
        return cursor.scored(groups, correcting=correcting)

    def starts_from_reference(self, group: Reviewed) -> bool:
        """Whether the group's values are still the stage-1 ones (review, nothing changed)."""
        return self.from_reference and group.reference is not None and not is_started(
            group.values)

    def current_values(self, group: Reviewed) -> Mapping[str, object]:
        """The values a key acts on, as the screen shows them: at review, a caption not
        started yet has the stage-1 values (the reviewer's note stays their own), so the
        first penalty key adds to or takes from those, as a later one would."""
        if self.starts_from_reference(group):
            return {**group.values, **reviewed_values(group)}
        return group.values

    def first_values(self, group: Reviewed, values: dict[str, object]) -> dict[str, object]:
        """The values to save for a change of `group`: at review, a caption not started
        yet gets the stage-1 values under the change."""
        if self.starts_from_reference(group):
            return {**reviewed_values(group), **values}
        return values


FIRST_STAGE = RatingStage("stage 1", ("complete", "to rate"))

REVIEW = RatingStage(
    "review", ("reviewed", "to review"), in_order=True, from_reference=True,
    keys=(Binding("a", "accept", "accept stage 1", id="accept"),
          Binding("A", "accept_all", "accept all", key_display="A", id="accept-all")))

# Resolving: one caption at a time; a score goes on to what its final values lack (the
# stage-1 rule over one caption). Its own keys are the resolve screen's (take, reasons,
# the queue), whose actions only that screen has.
RESOLVE = RatingStage("resolve", ("resolved", "to resolve"))
