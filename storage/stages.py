"""THUMB's rating stages and the rating columns a rubric fills: what a file's rows are read
into, apart from the tables (`storage.models` re-exports both), so that reading a file
needs no database library (an import's quick check runs in a process of its own)."""

from __future__ import annotations

from enum import IntEnum

from rubrics import PENALTY_KEYS, SCORE_KEYS

# The rating columns a rubric fills: the scores, and each penalty with its error type(s).
RATING_VALUE_FIELDS = (*SCORE_KEYS, *(f for key in PENALTY_KEYS for f in (key, f"{key}_type")))


class Stage(IntEnum):
    """Rating stages of THUMB: first annotator, second (checking) annotator, final."""

    FIRST = 1
    SECOND = 2
    FINAL = 3

    @property
    def label(self) -> str:
        return "final" if self is Stage.FINAL else str(int(self))

    @classmethod
    def parse(cls, value: object) -> Stage:
        text = str(value).strip().lower()
        aliases = {"1": cls.FIRST, "2": cls.SECOND, "final": cls.FINAL}
        if text not in aliases:
            raise ValueError(f"stage must be 1, 2 or final, not {value!r}")
        return aliases[text]
