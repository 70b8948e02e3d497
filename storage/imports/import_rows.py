"""Validate one input record into typed caption and rating rows (no database access)."""

from __future__ import annotations

import math
import re
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

from rubrics import PENALTY_KEYS, SCORE_KEYS, Rubric
from rubrics.model import error_codes
from storage.imports.images import ImageChecker, ImageFolder, Verdict, checked_image, spare_cpus
from storage.imports.import_files import Record
from storage.imports.untrusted import (
    FLAG,
    KEY,
    NUMBER,
    OBJECTS,
    TEXT,
    TEXTS,
    JsonProblem,
    load_json,
    text_problems,
)
from storage.stages import RATING_VALUE_FIELDS, Stage

CAPTION_COLUMNS = {"image", "image_id", "system", "caption", "caption_id", "references"}
RATING_COLUMNS = {
    "annotator", "stage", *RATING_VALUE_FIELDS, "note", "seconds", "created_at", "updated_at",
}
# Workflow state our own export writes so that a project survives export and import:
# the image's blind double-rating mark and broken-image flags, the annotator's native-speaker
# flag, a resolver's reasons (on final-stage rows) and a native speaker's fluency-round
# verdict on the caption, each with its time.
WORKFLOW_COLUMNS = {
    "double_rating",
    "image_flags",
    "native_english",
    "resolution_reasons",
    "resolution_note",
    "resolved_at",
    "fluency_round",
    "fluency_round_type",
    "fluency_round_by",
    "fluency_round_at",
}
RATING_ONLY_COLUMNS = {"native_english", "resolution_reasons", "resolution_note",
                       "resolved_at"}
# Columns our own export writes that carry no input: accepted and ignored on import, but
# for a rating's `rubric`, which must be the import's (RUBRIC_COLUMN).
DERIVED_COLUMNS = {"total", "rubric", "image_seconds"}
RUBRIC_COLUMN = "rubric"
# Per-caption metric scores an export may carry (`metric:cider-d (pooled)`): ignored too.
METRIC_COLUMN_PREFIX = "metric:"
ALIASES = {"p": "precision", "r": "recall", "sys": "system", "hyp": "caption"}
# The type every field must have in a JSON-lines file (CSV cells are text, parsed strictly).
JSON_SCHEMA = {
    **dict.fromkeys(["image", "system", "sys", "caption", "hyp", "annotator", "note",
                     *(f"{key}_type" for key in PENALTY_KEYS), "created_at",
                     "updated_at", "resolution_reasons", "resolution_note", "resolved_at",
                     "fluency_round_type", "fluency_round_by", "fluency_round_at", "rubric"],
                    TEXT),
    **dict.fromkeys(["image_id", "caption_id", "stage"], KEY),
    **dict.fromkeys([*SCORE_KEYS, "p", "r", *PENALTY_KEYS, "seconds", "fluency_round",
                     "total", "image_seconds"], NUMBER),
    **dict.fromkeys(["double_rating", "native_english"], FLAG),
    "references": TEXTS,
    "image_flags": OBJECTS,
}
REFERENCE_COLUMN = re.compile(r"^reference_([0-9]+)$")
# what `rating` reads
_RATING_FIELDS = tuple(sorted(RATING_COLUMNS | RATING_ONLY_COLUMNS | {RUBRIC_COLUMN}))
_TEXT_OR_EMPTY = {str, type(None)}  # the types of a reference_N cell
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
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
    native_english: bool | None = None
    resolution_reasons: tuple[str, ...] = ()
    resolution_note: str = ""
    resolved_at: datetime | None = None  # kept from our own exports: when it was resolved
    created_at: datetime | None = None  # kept from our own exports: when it was rated
    updated_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class FluencyRoundRow:
    """A native speaker's fluency verdict on a caption (fluency 0 means fluent), and when
    they gave it (kept from our own exports)."""

    checker: str
    fluency: float
    fluency_type: str | None
    checked_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ImageFlagRow:
    """An annotator's report that the image cannot be rated, as an export keeps it."""

    annotator: str
    reason: str
    flagged_at: datetime | None


@dataclass(slots=True)
class CaptionRow:
    """One record's checked values. Not frozen, unlike the rows it holds: a frozen
    dataclass sets each field through `object.__setattr__`, and making a million of them
    took 1.5 s of CPU against 0.6 s."""

    line: int
    image_key: str
    image_path: str | None
    system: str
    caption: str
    caption_id: str | None
    references: tuple[str, ...] | None
    rating: RatingRow | None
    double_rating: bool | None = None
    fluency_round: FluencyRoundRow | None = None
    image_flags: tuple[ImageFlagRow, ...] | None = None


class RowError(ValueError):
    """A problem with one record; the caller adds file and line."""


class ImageRefusedBefore(RowError):
    """A record whose only problem is an image refused at an earlier record: counted at
    that record's problem, not listed again (a file names an image on every row of its
    captions and ratings, and one fix of the path mends them all)."""

    def __init__(self, name: str, first_line: int) -> None:
        super().__init__(f"image {name!r}, refused at line {first_line}")
        self.first_line = first_line


class _Collected(list[str]):
    """The problems of one record's fields, so that all of them are reported at once."""

    def check(self, parse: Callable[..., T], *args: object) -> T | None:
        """Run one field's parser; collect its problem, if any, and return None then."""
        try:
            return parse(*args)
        except RowError as exc:
            self.append(str(exc))
            return None

    def raise_if_any(self) -> None:
        if self:
            raise RowError("; ".join(self))


def _text(record: Record, name: str) -> str | None:
    value = record.get(name)
    if value is None:
        return None
    if type(value) is str:  # the common case, first
        return value.strip() or None
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


def flag(record: Record, name: str) -> bool | None:
    """true/false, yes/no or 1/0 (any case), a JSON boolean, or empty for unknown."""
    value = record.get(name)
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0"):
        return False
    raise RowError(f"{name} must be true or false, not {value!r}")


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
    """A penalty amount and its error type(s), checked by the rubric's one rule
    (`Rubric.penalty_problem`). Negative amounts (the THUMB release's convention) mean the
    same penalty as positive ones. A type alone implies its value (a ranged type needs
    one); an amount alone names its type where one type holds it. A penalty the rubric does
    not have must be absent (or 0)."""
    amount = _number(record, key)
    type_text = _text(record, f"{key}_type")
    codes = error_codes(type_text)
    if not rubric.has_penalty(key):
        problem = rubric.penalty_problem(key, amount or 0.0, codes)
        if problem is not None:
            raise RowError(problem)
        return 0.0, None
    category = rubric.penalty(key)
    if amount is None:
        try:
            amount = category.implied_amount(codes)
        except ValueError as exc:  # an unknown code
            raise RowError(str(exc)) from None
        if amount is None:
            raise RowError(f"{key}: a value is needed for {type_text!r}")
    amount = abs(amount)
    problem = category.problem(amount, codes)
    if problem is not None:
        raise RowError(problem)
    if not codes:
        named = category.named_type(amount)
        codes = [named] if named else []
    return amount, ",".join(codes) or None


def references(record: Record) -> tuple[str, ...] | None:
    """References from a JSON list `references` or CSV columns `reference_1`, `reference_2`…"""
    value = record.get("references")
    if value is not None:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise RowError("references must be a JSON list of strings")
        refs = [v.strip() for v in value]
    else:
        numbered = [record[name] for name in _reference_columns(tuple(record))]
        if not numbered:
            return None
        if not _TEXT_OR_EMPTY.issuperset(map(type, numbered)):
            raise RowError("reference_N columns must be text")
        refs = [item.strip() if item is not None else "" for item in numbered]
        while refs and not refs[-1]:
            refs.pop()
    if not all(refs):
        raise RowError("references must not be empty strings")
    return tuple(refs) if refs else None


@lru_cache(maxsize=256)
def _reference_columns(columns: tuple[str, ...]) -> tuple[str, ...]:
    """The `reference_N` columns among `columns`, by N (the same for every row of a
    CSV file)."""
    numbered = []
    for column in columns:
        if match := REFERENCE_COLUMN.match(column):
            digits = match.group(1).lstrip("0")
            # ordered as numbers without making ints of them: a header's N may have
            # thousands of digits, more than int() converts
            numbered.append((len(digits), digits, column))
    return tuple(column for _, _, column in sorted(numbered))


def rating(record: Record, rubric: Rubric) -> RatingRow | None:
    annotator = _text(record, "annotator")
    present = [c for c in (RATING_COLUMNS | RATING_ONLY_COLUMNS) - {"annotator"}
               if record.get(c) is not None]
    if annotator is None:
        if present:
            raise RowError(f"rating columns ({', '.join(sorted(present))}) need an annotator")
        return None
    problems = _Collected()
    check = problems.check
    stage = check(_stage, record)
    seconds = check(rating_seconds, record)
    precision = check(score, record, "precision", rubric)
    recall = check(score, record, "recall", rubric)
    fluency = check(penalty, record, "fluency", rubric)
    conciseness = check(penalty, record, "conciseness", rubric)
    inclusive = check(penalty, record, "inclusive", rubric)
    native_english = check(flag, record, "native_english")
    created_at = check(timestamp, record, "created_at")
    updated_at = check(timestamp, record, "updated_at")
    reasons = check(resolution_reasons, record, stage, rubric)
    resolved_at = check(timestamp, record, "resolved_at") if reasons else None
    check(_same_rubric, record, rubric)
    problems.raise_if_any()
    return RatingRow(
        annotator=sys.intern(annotator),
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
        native_english=native_english,
        resolution_reasons=reasons,
        resolution_note=_text(record, "resolution_note") or "",
        resolved_at=resolved_at,
        created_at=created_at,
        updated_at=updated_at,
    )


def timestamp(record: Record, name: str) -> datetime | None:
    """An ISO 8601 time; one without a time zone is taken as UTC."""
    text = _text(record, name)
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise RowError(f"{name} must be an ISO 8601 time, not {text!r}") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def resolution_reasons(record: Record, stage: Stage | None, rubric: Rubric
                       ) -> tuple[str, ...]:
    """A resolver's reason codes (comma-separated), allowed on final-stage rows only."""
    text = _text(record, "resolution_reasons")
    if text is None:
        for column in ("resolution_note", "resolved_at"):
            if _text(record, column) is not None:
                raise RowError(f"{column} needs resolution_reasons")
        return ()
    if stage is not None and stage != Stage.FINAL:
        raise RowError("resolution_reasons belong on a rating at stage final")
    codes = tuple(code.strip() for code in text.split(",") if code.strip())
    known = {reason.code for reason in rubric.resolution_reasons}
    unknown = [code for code in codes if code not in known]
    if unknown or not codes:
        raise RowError(f"unknown resolution reason(s) {', '.join(unknown) or text}; "
                       f"expected {', '.join(sorted(known))}")
    return codes


def fluency_round(record: Record, rubric: Rubric) -> FluencyRoundRow | None:
    """The caption's fluency-round verdict: who checked it, the penalty they set, and when."""
    checker = _text(record, "fluency_round_by")
    if checker is None:
        given = [c for c in ("fluency_round", "fluency_round_type", "fluency_round_at")
                 if record.get(c) is not None]
        if given:
            verb = "needs" if len(given) == 1 else "need"
            raise RowError(f"{', '.join(given)} {verb} fluency_round_by (the native speaker)")
        return None
    try:
        amount, types = penalty({"fluency": record.get("fluency_round"),
                                 "fluency_type": record.get("fluency_round_type")},
                                "fluency", rubric)
    except RowError as exc:
        raise RowError(f"fluency_round: {exc}") from None
    return FluencyRoundRow(checker, amount, types, timestamp(record, "fluency_round_at"))


FLAG_FIELDS = ("annotator", "reason", "flagged_at")


def image_flags(record: Record) -> tuple[ImageFlagRow, ...] | None:
    """The image's broken-image flags, by annotator: a JSON list of objects with
    `annotator`, `reason` and optionally `flagged_at` (an ISO 8601 time), or its JSON text
    (a CSV cell). Texts inside the JSON text are checked as every text of a file is."""
    value = record.get("image_flags")
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            value = load_json(value)
        except JsonProblem as exc:
            raise RowError(f"image_flags: {exc}") from None
        problems = text_problems(value, "image_flags")
        if problems:
            raise RowError("; ".join(problems))
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise RowError("image_flags must be a JSON list of objects "
                       f"({', '.join(FLAG_FIELDS)})")
    flags: dict[str, ImageFlagRow] = {}
    for item in value:
        unknown = sorted(set(item) - set(FLAG_FIELDS))
        if unknown:
            raise RowError(f"image_flags: unknown field(s) {', '.join(unknown)}; a flag has "
                           f"{', '.join(FLAG_FIELDS)}")
        name, reason = item.get("annotator"), item.get("reason")
        if not (isinstance(name, str) and name.strip() and isinstance(reason, str)
                and reason.strip()):
            raise RowError("image_flags: each flag needs an annotator and a reason (texts)")
        name = name.strip()
        if name in flags:
            raise RowError(f"image_flags: {name!r} flags the image twice")
        flagged_at = timestamp({"image_flags.flagged_at": item.get("flagged_at")},
                               "image_flags.flagged_at")
        flags[name] = ImageFlagRow(sys.intern(name), reason.strip(), flagged_at)
    return tuple(flags[name] for name in sorted(flags)) or None


def _same_rubric(record: Record, rubric: Rubric) -> None:
    """A rating whose `rubric` column (an export writes it) names another rubric than the
    import's would be read on the wrong scales: 2 on a 1-4 scale is not 2 on THUMB's 1-5."""
    named = _text(record, RUBRIC_COLUMN)
    if named is not None and named != rubric.signature:
        raise RowError(f"this rating is on rubric {named!r}, but the import reads ratings "
                       f"on {rubric.signature!r}: import the file with --rubric and "
                       f"{named!r}'s rubric file")


def _stage(record: Record) -> Stage:
    if record.get("stage") is None:
        raise RowError("stage is missing (1, 2 or final)")
    try:
        return Stage.parse(record["stage"])
    except ValueError as exc:
        raise RowError(str(exc)) from None


def rating_seconds(record: Record) -> float:
    seconds = _number(record, "seconds") or 0.0
    if seconds < 0:
        raise RowError(f"seconds must not be negative, not {record['seconds']!r}")
    return seconds


def unknown_columns(columns: set[str]) -> list[str]:
    known = CAPTION_COLUMNS | RATING_COLUMNS | WORKFLOW_COLUMNS | DERIVED_COLUMNS
    return sorted(c for c in columns if c not in known and not REFERENCE_COLUMN.match(c)
                  and not c.startswith(METRIC_COLUMN_PREFIX))


# Names people give the required columns, suggested when the column is missing.
LIKELY_NAMES = {
    "image": ("img", "image_path", "image_file", "file", "filename", "file_name", "path"),
    "system": ("model", "method", "source", "system_name"),
    "caption": ("text", "sentence", "description", "candidate", "prediction", "output"),
}


def _close_column(required: str, unknown: list[str]) -> str | None:
    """The unknown column that is most likely `required` misnamed, if any (taken from
    `unknown`, so that each is suggested once)."""
    import difflib

    guess = next((c for c in unknown if c in LIKELY_NAMES.get(required, ())), None)
    if guess is None:
        close = difflib.get_close_matches(required, unknown, n=1, cutoff=0.6)
        guess = close[0] if close else None
    if guess is not None:
        unknown.remove(guess)
    return guess


def missing_columns(columns: set[str], unknown: Sequence[str] = ()) -> list[str]:
    """Problems with the columns a file has in all: required ones it never gives, each with
    the unknown column that is likely it misnamed (`img` for `image`, `text` for
    `caption`)."""
    left = list(unknown)
    problems = []
    for required, label in (("system", "'system'"), ("caption", "'caption'"),
                            ("image", "'image' (or 'image_id')")):
        if required in columns or (required == "image" and "image_id" in columns):
            continue
        guess = _close_column(required, left)
        problems.append(f"missing column {label}" + (
            "" if guess is None else f": rename {guess!r} to {required!r}?"))
    return problems


def normalise_keys(record: Record) -> Record:
    """The record with aliases (`p`, `hyp`…) renamed; itself when it uses none."""
    if ALIASES.keys().isdisjoint(record):
        return record
    return {ALIASES.get(key, key): value for key, value in record.items()}


def image_file(base_dir: Path, name: str, allow_outside: bool = False) -> str:
    """The checked image file `name` names: inside `base_dir` (unless `allow_outside`), and
    an image Pillow decodes (see storage.imports.images)."""
    return _image_file(ImageFolder(base_dir, allow_outside=allow_outside), name)


def _image_file(folder: ImageFolder, name: str) -> str:
    path, problem = checked_image(folder, name)
    if problem is not None:
        raise RowError(problem)
    return path  # type: ignore[return-value]


class RowReader:
    """Validates an import's records into CaptionRows, reporting every problem of a record
    at once; image paths are resolved against `base_dir` and must name images (see
    `image_file`). Made for files of millions of rows: an image file is checked once while
    it is among the last CACHED_IMAGES named (the rows of an image mostly come together),
    identical ratings are parsed once and shared between rows (they are immutable), and
    the texts that rows repeat (image keys, systems, names) are kept once. What it
    remembers is bounded, not the file's size."""

    CACHED_RATINGS = 65_536  # distinct ratings remembered (timestamped exports: all differ)
    CACHED_IMAGES = 65_536  # image files' verdicts remembered
    # An import whose rows name more images than this has the rest checked in worker
    # processes (`ImageChecker`), LOOKAHEAD records ahead of the row being read; a smaller
    # one starts no process.
    IMAGES_IN_PROCESS = 2_000
    LOOKAHEAD = 4_096
    IMAGE_WORKERS = 4  # at most, and no more than the spare CPUs

    def __init__(self, base_dir: Path, rubric: Rubric, *,
                 allow_outside_images: bool = False) -> None:
        self.rubric = rubric
        self.folder = ImageFolder(base_dir, allow_outside=allow_outside_images)
        self._images: dict[str, Verdict] = {}  # name -> path, problem
        self.refused_images: dict[str, int] = {}  # name -> the line that reported it
        self._checker: ImageChecker | None = None
        # values -> their types (None: text or None only), the rating they parse to
        self._ratings: dict[tuple, tuple[tuple[type, ...] | None, RatingRow | None]] = {}

    def image_file(self, name: str) -> str:
        """`image_file` of `name`, checked on its first row only."""
        checked = self._images.get(name)
        if checked is None:
            checked = self._checker and self._checker.verdict(name)
            if checked is None:
                checked = checked_image(self.folder, name)
            if checked[0] is not None:
                checked = (sys.intern(checked[0]), None)
            if len(self._images) >= self.CACHED_IMAGES:
                self._images.clear()
            self._images[name] = checked
        path, problem = checked
        if problem is not None:
            raise RowError(problem)
        return path  # type: ignore[return-value]

    def images_checked_ahead(self, records: Iterable[tuple[int, Record]]
                             ) -> Iterator[tuple[int, Record]]:
        """`records` (line, record) as they come; past IMAGES_IN_PROCESS images, the files
        that the next LOOKAHEAD records name are sent ahead to worker processes, whose
        verdicts `image_file` then takes (where there is a spare CPU)."""
        workers = min(self.IMAGE_WORKERS, spare_cpus())
        window: deque[tuple[int, Record]] = deque()
        last, names = None, 0
        try:
            for item in records:
                given = item[1].get("image")
                if given != last:  # (the rows of an image mostly come together)
                    last, names = given, names + 1
                    if self._checker is None and names > self.IMAGES_IN_PROCESS and workers:
                        try:
                            self._checker = ImageChecker(self.folder, workers)
                        except OSError:  # then this process checks every image
                            workers = 0
                    if self._checker is not None:
                        self._send_ahead(self._checker, item[1])
                if self._checker is None:
                    yield item
                    continue
                window.append(item)
                if len(window) > self.LOOKAHEAD:
                    yield window.popleft()
            yield from window
        finally:
            if self._checker is not None:
                self._checker.close()
                self._checker = None

    def _send_ahead(self, checker: ImageChecker, record: Record) -> None:
        try:
            name = _text(record, "image")
        except RowError:  # its row reports it
            return
        if name and name not in self._images and name not in checker:
            checker.ahead(name)

    def rating(self, record: Record) -> RatingRow | None:
        """`rating` of the record, parsed once for each distinct set of values and types
        (JSON's 1 and true are equal values, not the same score). Values that are all
        text or None are equal to text and None only, so the types of equal ones need no
        comparing (every CSV row)."""
        values = tuple(map(record.get, _RATING_FIELDS))
        remembered = self._ratings.get(values)
        if remembered is not None:
            types, found = remembered
            if types is None or types == tuple(map(type, values)):
                return found
        types = tuple(map(type, values))
        found = rating(record, self.rubric)
        if len(self._ratings) >= self.CACHED_RATINGS:
            self._ratings.clear()
        self._ratings[values] = (None if _TEXT_OR_EMPTY.issuperset(types) else types, found)
        return found

    def row(self, line: int, record: Record, *, images: bool = True) -> CaptionRow:
        """One record's CaptionRow; RowError names every problem the record has. Without
        `images`, its image file is neither checked nor decoded (the quick check of a
        file's values, `storage.imports.import_scan`): the row keeps the path as given."""
        problems = _Collected()
        image_path = _text(record, "image")
        image_key = _text(record, "image_id") or image_path
        if image_key is None:
            problems.append("image (a path) or image_id is required")
        resolved, refused_before = None, None
        if image_path is not None and not images:
            resolved = image_path
        elif image_path is not None:
            refused_before = self.refused_images.get(image_path)
            if refused_before is None:
                resolved = problems.check(self.image_file, image_path)
                if resolved is None:
                    self.refused_images[image_path] = line
        system = _text(record, "system")
        caption = _text(record, "caption")
        if system is None:
            problems.append("system is missing")
        if caption is None:
            problems.append("caption is missing")
        parsed_references = problems.check(references, record)
        parsed_rating = problems.check(self.rating, record)
        double_rating = problems.check(flag, record, "double_rating")
        flags = problems.check(image_flags, record)
        verdict = problems.check(fluency_round, record, self.rubric)
        problems.raise_if_any()
        if refused_before is not None:
            raise ImageRefusedBefore(image_path, refused_before)  # type: ignore[arg-type]
        return CaptionRow(
            line=line,
            image_key=sys.intern(image_key),  # type: ignore[arg-type]
            image_path=resolved,
            system=sys.intern(system),  # type: ignore[arg-type]
            caption=caption,  # type: ignore[arg-type]
            caption_id=_text(record, "caption_id"),
            references=parsed_references,
            rating=parsed_rating,
            double_rating=double_rating,
            fluency_round=verdict,
            image_flags=flags,
        )
