"""Where the rating keys act: the one focus state of the rating screens, and the rules that
move it. Plain Python (no Textual), so the rules are tested on their own
(tests/test_screen_state.py); a screen changes the cursor, then redraws from it.

The state: the open image, the focused caption (group) on it, the highlighted dimension
(P or R), and the caption just scored, which the penalty and note keys still act on after
the focus has moved on (`target_index`), until the user moves."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from rubrics import SCORE_KEYS

FIRST, SECOND = SCORE_KEYS  # the two dimensions in their order: precision, recall


class Scored(Protocol):
    """What the cursor reads of a caption group: its values by field."""

    @property
    def values(self) -> Mapping[str, object]: ...


def next_missing(group: Scored) -> str | None:
    """The first of P, R that is still unscored in the group."""
    return next((d for d in SCORE_KEYS if group.values[d] is None), None)


@dataclass
class CaptionCursor:
    """The focus of a rating screen over the caption groups of its open image.

    `count` is how many groups the open image shows; every move stays within them. The
    methods are the events that move the focus; each returns what a screen needs to say
    about it (none return the new state: read the attributes)."""

    image_index: int = 0
    focus_index: int = 0
    dimension: str = FIRST
    scored_index: int | None = None
    count: int = 0

    @property
    def target_index(self) -> int:
        """The caption the penalty and note keys act on: the one just scored while the
        focus has moved on, else the focused one."""
        return self.focus_index if self.scored_index is None else self.scored_index

    @property
    def is_last(self) -> bool:
        return self.focus_index >= self.count - 1

    def opened(self, image_index: int, groups: Sequence[Scored], focus: int = 0, *,
               dimension: str | None = None) -> None:
        """An image opened with `groups`: focus caption `focus` (kept within them) on
        `dimension`, by default the first dimension it still lacks."""
        self.image_index = image_index
        self.count = len(groups)
        self.focus_index = min(max(focus, 0), max(self.count - 1, 0))
        self.scored_index = None
        missing = next_missing(groups[self.focus_index]) if groups else None
        self.dimension = dimension or missing or FIRST

    def closed(self) -> None:
        """Nothing is open any more (no image is left to the annotator)."""
        self.count, self.scored_index = 0, None

    def moved(self, step: int) -> None:
        """The previous or next caption, on the first dimension. It stops at the first and
        the last caption: wrapping round sent scores to the wrong one."""
        if self.count:
            self.focus_index = min(max(self.focus_index + step, 0), self.count - 1)
        self.scored_index = None
        self.dimension = FIRST

    def focused(self, index: int) -> None:
        """Put the focus on caption `index` (the penalty keys follow it)."""
        self.focus_index = index
        self.scored_index = None

    def toggled(self) -> None:
        """The other dimension of the focused caption."""
        self.dimension = SECOND if self.dimension == FIRST else FIRST
        self.scored_index = None

    def settled(self) -> None:
        """The user acted on the focused caption: the penalty keys act on it again."""
        self.scored_index = None

    def advanced(self) -> int | None:
        """The focused caption is done: focus the next, while the penalty keys stay on the
        one just done until the user moves. Returns the index of the caption done, or None
        at the last caption (the focus stays)."""
        if self.is_last:
            return None
        done = self.focus_index
        self.focus_index, self.scored_index = done + 1, done
        return done

    def scored(self, groups: Sequence[Scored], *, correcting: bool = False) -> int | None:
        """Stage 1, after the focused dimension was saved: the other dimension when it is
        still missing, else the next caption on the first dimension it lacks. A caption
        that was complete before the score is being corrected: that goes P, R, then the
        next caption (`scored_in_order`), so two digits correct its P and R wherever it
        stands. Returns the caption done when the focus moved on to the next."""
        if correcting:
            return self.scored_in_order()
        self.scored_index = None
        missing = next_missing(groups[self.focus_index])
        if missing is not None:
            self.dimension = missing
            return None
        done = self.advanced()
        self.dimension = next_missing(groups[self.focus_index]) or FIRST
        return done

    def scored_in_order(self) -> int | None:
        """Reviewing, after the focused dimension was saved: P, then R of the same caption,
        then the next caption (the stage-1 values fill both, so what is missing cannot
        drive the order). Returns the caption done when the focus moved on."""
        self.scored_index = None
        if self.dimension == FIRST:
            self.dimension = SECOND
            return None
        done = self.advanced()
        self.dimension = FIRST
        return done

    def undone(self, position: int | None, fields: Collection[str]) -> None:
        """After an undo (the image reopened): focus the caption it reverted, on the
        dimension it reverted when it reverted a score."""
        if position is not None:
            self.focus_index = position
        if SECOND in fields or FIRST in fields:
            self.dimension = SECOND if SECOND in fields else FIRST
