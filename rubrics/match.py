"""The four-point answer scale of match verification (ECCV Caption, Chun et al. 2022) and
the rules that turn answers into positives."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Answer:
    value: int
    label: str
    definition: str
    example: str


ANSWERS = (
    Answer(1, "100% yes", "The caption describes the image with no mistake: every object, "
           "attribute, number and action it mentions is in the image.",
           "'Two red balls on green grass' for a picture of two red balls on a lawn."),
    Answer(2, "partially yes", "The caption fits the image apart from minor details (a "
           "colour, a count, a small object) that do not change what the picture is of.",
           "'Three red balls on the grass' for a picture of two red balls on a lawn."),
    Answer(3, "mostly no", "Only some of the caption fits: the main subject or scene "
           "differs, though a few words are true of the image.",
           "'A red car parked on the grass' for a picture of two red balls on a lawn."),
    Answer(4, "100% no", "The caption describes a different image altogether.",
           "'A snowman in a winter garden' for a picture of two red balls on a lawn."),
)
ANSWER_VALUES = tuple(a.value for a in ANSWERS)
# Which answers count as a positive vote under each aggregation rule.
RULES = {"yes": (1,), "yes+partial": (1, 2)}
DEFAULT_RULE = "yes+partial"
# A gold item is answered right with these answers.
GOLD_RIGHT = {"positive": (1, 2), "negative": (3, 4)}


def answer_label(value: int | None) -> str:
    return "-" if value is None else ANSWERS[value - 1].label
