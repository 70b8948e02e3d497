"""Rubric definitions (THUMB 1.0 as data), penalty catalogue, total formula, text clean-up."""

from rubrics.cleanup import clean_caption
from rubrics.model import (
    PENALTY_KEYS,
    SCORE_KEYS,
    THUMB_1_0,
    Dimension,
    ErrorType,
    Example,
    PenaltyCategory,
    Reason,
    Rubric,
    Rule,
    load_rubric,
    parse_rubric,
)

__all__ = [
    "PENALTY_KEYS",
    "SCORE_KEYS",
    "THUMB_1_0",
    "Dimension",
    "ErrorType",
    "Example",
    "PenaltyCategory",
    "Reason",
    "Rubric",
    "Rule",
    "clean_caption",
    "load_rubric",
    "parse_rubric",
]
