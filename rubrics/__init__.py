"""Rubric definitions (THUMB 1.0 as data), penalty catalogue, total formula, text clean-up
and the escaping of untrusted text for every output."""

from rubrics.cleanup import clean_caption
from rubrics.escape import (
    codepoint,
    for_html,
    for_markdown,
    for_markup,
    forbidden_character,
    printable,
    refusal,
    text_refusal,
)
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
from rubrics.schema import FileError, RubricError

__all__ = [
    "PENALTY_KEYS",
    "SCORE_KEYS",
    "THUMB_1_0",
    "Dimension",
    "ErrorType",
    "Example",
    "FileError",
    "PenaltyCategory",
    "Reason",
    "Rubric",
    "RubricError",
    "Rule",
    "clean_caption",
    "codepoint",
    "for_html",
    "for_markdown",
    "for_markup",
    "forbidden_character",
    "load_rubric",
    "parse_rubric",
    "printable",
    "refusal",
    "text_refusal",
]
