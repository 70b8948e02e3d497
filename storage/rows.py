"""Validate one input record into typed caption and rating rows (no database access)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from rubrics import Rubric
from storage.models import Stage
from storage.records import Record

CAPTION_COLUMNS = {"image", "image_id", "system", "caption", "caption_id", "references"}
RATING_COLUMNS = {
    "annotator",
    "stage",
    "precision",
    "recall",
    "fluency",
    "fluency_type",
    "conciseness",
    "conciseness_type",
    "inclusive",
    "inclusive_type",
    "note",
    "seconds",
}
# Columns our own export writes that carry no input: accepted and ignored on import.
DERIVED_COLUMNS = {"total", "rubric", "created_at", "updated_at", "image_seconds"}
ALIASES = {"p": "precision", "r": "recall", "sys": "system", "hyp": "caption"}
REFERENCE_COLUMN = re.compile(r"^reference_(\d+)$")
T = TypeVar("T")


@dataclass(frozen=True)
class RatingRow:
    annotator: str
    stage: Stage
    precision: int
    recall: int
    fluency: float
    fluency_type: str | None
    conciseness: float
    conciseness_type: str | None
    inclusive: float
    inclusive_type: str | None
    note: str
    seconds: float


@dataclass(frozen=True)
class CaptionRow:
    line: int
    image_key: str
    image_path: str | None
    system: str
    caption: str
    caption_id: str | None
    references: tuple[str, ...] | None
    rating: RatingRow | None


class RowError(ValueError):
    """A problem with one record; the caller adds file and line."""


def _text(record: Record, name: str) -> str | None:
    value = record.get(name)
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        raise RowError(f"{name} must be text, not a JSON {type(value).__name__}")
    text = str(value).strip()
    return text or None


def _number(record: Record, name: str) -> float | None:
    value = record.get(name)
    if value is None:
        return None
    if isinstance(value, bool):
        raise RowError(f"{name} must be a number, not {value!r}")
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise RowError(f"{name} must be a number, not {value!r}") from None
    if not math.isfinite(number):
        raise RowError(f"{name} must be a finite number, not {value!r}")
    return number


def score(record: Record, name: str, rubric: Rubric) -> int:
    dimension = rubric.dimension(name)
    number = _number(record, name)
    if number is None:
        raise RowError(f"{name} is missing (a rating needs both precision and recall)")
    if number != int(number) or not dimension.min <= number <= dimension.max:
        raise RowError(
            f"{name} must be a whole number from {dimension.min} to {dimension.max}, "
            f"not {record[name]!r}"
        )
    return int(number)


def penalty(record: Record, key: str, rubric: Rubric) -> tuple[float, str | None]:
    """A penalty amount and its error type(s). Negative amounts (the THUMB release's
    convention) mean the same penalty as positive ones. A type alone implies its value."""
    category = rubric.penalty(key)
    amount = _number(record, key)
    type_text = _text(record, f"{key}_type")
    codes = [code.strip() for code in type_text.split(",")] if type_text else []
    try:
        types = [category.type(code) for code in codes if code]
    except ValueError as exc:
        raise RowError(str(exc)) from None
    if amount is None:
        if any(not t.fixed for t in types):
            raise RowError(f"{key}: a value is needed for {type_text!r}")
        amount = round(sum(t.min for t in types), 6)
    amount = abs(amount)
    allowed = {0.0} | {t.min for t in category.types if t.fixed}
    if key != "fluency" and not any(math.isclose(amount, a) for a in allowed):
        choices = ", ".join(f"{a:g}" for a in sorted(allowed))
        raise RowError(f"{key} penalty must be one of {choices}, not {record.get(key)!r}")
    if not 0 <= amount <= category.max_total:
        raise RowError(
            f"{key} penalty must be between 0 and {category.max_total:g}, not {record.get(key)!r}"
        )
    if types:
        low, high = sum(t.min for t in types), sum(t.max for t in types)
        if not low - 1e-9 <= amount <= high + 1e-9:
            raise RowError(f"{key} penalty {amount:g} does not match error type {type_text!r}")
    elif amount > 0 and key != "fluency":
        # Conciseness and inclusive values identify their type; fluency sums are ambiguous.
        matches = [t.code for t in category.types if t.fixed and math.isclose(t.min, amount)]
        codes = matches[:1] if len(matches) == 1 else []
    return amount, ",".join(codes) or None


def references(record: Record) -> tuple[str, ...] | None:
    """References from a JSON list `references` or CSV columns `reference_1`, `reference_2`…"""
    value = record.get("references")
    if value is not None:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise RowError("references must be a JSON list of strings")
        refs = [v.strip() for v in value]
    else:
        numbered = sorted(
            (int(match.group(1)), item)
            for name, item in record.items()
            if (match := REFERENCE_COLUMN.match(name))
        )
        if not numbered:
            return None
        refs = [str(item).strip() if item is not None else "" for _, item in numbered]
        while refs and not refs[-1]:
            refs.pop()
    if any(not ref for ref in refs):
        raise RowError("references must not be empty strings")
    return tuple(refs) if refs else None


def rating(record: Record, rubric: Rubric) -> RatingRow | None:
    annotator = _text(record, "annotator")
    present = [c for c in RATING_COLUMNS - {"annotator"} if record.get(c) is not None]
    if annotator is None:
        if present:
            raise RowError(f"rating columns ({', '.join(sorted(present))}) need an annotator")
        return None
    problems: list[str] = []

    def check(parse: Callable[..., T], *args: object) -> T | None:
        """Run one field's parser, collecting its problem so all are reported at once."""
        try:
            return parse(*args)
        except RowError as exc:
            problems.append(str(exc))
            return None

    stage = check(_stage, record)
    seconds = check(_seconds, record)
    precision = check(score, record, "precision", rubric)
    recall = check(score, record, "recall", rubric)
    fluency = check(penalty, record, "fluency", rubric)
    conciseness = check(penalty, record, "conciseness", rubric)
    inclusive = check(penalty, record, "inclusive", rubric)
    if problems:
        raise RowError("; ".join(problems))
    return RatingRow(
        annotator=annotator,
        stage=stage,
        precision=precision,
        recall=recall,
        fluency=fluency[0],
        fluency_type=fluency[1],
        conciseness=conciseness[0],
        conciseness_type=conciseness[1],
        inclusive=inclusive[0],
        inclusive_type=inclusive[1],
        note=_text(record, "note") or "",
        seconds=seconds,
    )


def _stage(record: Record) -> Stage:
    if record.get("stage") is None:
        raise RowError("stage is missing (1, 2 or final)")
    try:
        return Stage.parse(record["stage"])
    except ValueError as exc:
        raise RowError(str(exc)) from None


def _seconds(record: Record) -> float:
    seconds = _number(record, "seconds") or 0.0
    if seconds < 0:
        raise RowError(f"seconds must not be negative, not {record['seconds']!r}")
    return seconds


def check_columns(columns: set[str]) -> list[str]:
    """Problems with a file's column set: unknown names and missing required ones."""
    problems = []
    known = CAPTION_COLUMNS | RATING_COLUMNS | DERIVED_COLUMNS
    unknown = sorted(c for c in columns if c not in known and not REFERENCE_COLUMN.match(c))
    if unknown:
        problems.append(f"unknown column(s): {', '.join(unknown)}")
    for required in ("system", "caption"):
        if required not in columns:
            problems.append(f"missing column {required!r}")
    if "image" not in columns and "image_id" not in columns:
        problems.append("missing column 'image' (or 'image_id')")
    return problems


def normalise_keys(record: Record) -> Record:
    return {ALIASES.get(key, key): value for key, value in record.items()}


def caption_row(line: int, record: Record, base_dir: Path, rubric: Rubric) -> CaptionRow:
    """Validate one record; image paths are resolved against `base_dir` and must exist."""
    image_path = _text(record, "image")
    image_key = _text(record, "image_id") or image_path
    if image_key is None:
        raise RowError("image (a path) or image_id is required")
    resolved = None
    if image_path is not None:
        candidate = (base_dir / image_path).resolve()
        if not candidate.is_file():
            raise RowError(f"image file not found: {image_path}")
        resolved = str(candidate)
    system = _text(record, "system")
    caption = _text(record, "caption")
    if system is None:
        raise RowError("system is missing")
    if caption is None:
        raise RowError("caption is missing")
    return CaptionRow(
        line=line,
        image_key=image_key,
        image_path=resolved,
        system=system,
        caption=caption,
        caption_id=_text(record, "caption_id"),
        references=references(record),
        rating=rating(record, rubric),
    )
