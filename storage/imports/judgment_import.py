"""Import a judgment set: human judgments collected elsewhere (Likert scores by many judges,
or choices between two captions of an image), with optional references. No image file and
no system are needed. All or nothing, every problem at once as `file:line: problem`."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from sqlalchemy import Connection, Engine, select

from rubrics.escape import name_refusal, printable
from storage.db.engine import write_transaction
from storage.errors import InputError, Problem, Problems
from storage.events import log_change
from storage.imports.import_files import Record, iter_records, read_records
from storage.imports.import_rows import (
    METRIC_COLUMN_PREFIX,
    RowError,
    _Collected,
    _number,
    _text,
    image_file,
)
from storage.imports.untrusted import KEY, NUMBER, TEXT
from storage.models import (
    JUDGMENT_CHOICES,
    JUDGMENT_KINDS,
    JUDGMENT_SCALE_STEPS,
    JudgmentCaption,
    JudgmentImage,
    JudgmentPair,
    JudgmentReference,
    JudgmentScore,
    JudgmentSet,
    utcnow,
)

REQUIRED_COLUMNS = {
    "score": ("caption", "judge", "score"),
    "pairwise": ("caption_a", "caption_b", "judge", "choice"),
}
OPTIONAL_COLUMNS = {
    "score": ("image_id", "image", "caption_id", "system", "note"),
    "pairwise": ("image_id", "image", "category"),
}
# The type every field must have in a JSON-lines file (CSV cells are text, parsed strictly).
JUDGMENT_SCHEMA = {
    **dict.fromkeys(["image", "caption", "system", "note", "caption_a", "caption_b", "choice",
                     "category"], TEXT),
    **dict.fromkeys(["image_id", "caption_id", "judge"], KEY),
    "score": NUMBER,
}
REFERENCE_SCHEMA = {"image_id": KEY, "reference": TEXT, "reference_id": KEY}
REQUIRED_REFERENCE_COLUMNS = ("image_id", "reference")
_SCALE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*-\s*(-?\d+(?:\.\d+)?)\s*$")
CONTINUOUS = 0.0  # the step of a continuous scale: any real number in the range


@dataclass(frozen=True)
class Scale:
    """A score set's scale from low to high: whole numbers (step 1), halves (step 0.5) or
    continuous (step 0: any real number in the range, e.g. a proportion of a crowd)."""

    low: float
    high: float
    step: float = 1.0

    @classmethod
    def parse(cls, text: str, step: float = 1.0) -> Scale:
        match = _SCALE.match(text)
        if match is None:
            raise ValueError(f"a scale is MIN-MAX, e.g. 1-5, not {text!r}")
        if step not in JUDGMENT_SCALE_STEPS:
            raise ValueError(f"the scale step must be 1 (whole numbers), 0.5 (halves) or 0 "
                             f"(continuous), not {step:g}")
        low, high = float(match.group(1)), float(match.group(2))
        if not low < high:
            raise ValueError(f"the scale's minimum must be below its maximum: {text!r}")
        return cls(low, high, step)

    @property
    def continuous(self) -> bool:
        return self.step == CONTINUOUS

    def contains(self, value: float) -> bool:
        if not (math.isfinite(value) and self.low <= value <= self.high):
            return False
        if self.continuous:
            return True
        steps = (value - self.low) / self.step
        return steps == round(steps)

    def __str__(self) -> str:
        return f"{self.low:g}-{self.high:g} ({JUDGMENT_SCALE_STEPS[self.step]})"


@dataclass(frozen=True)
class JudgmentRow:
    """One judgment: a score of `captions[0]`, or a choice between `captions` a and b."""

    line: int
    image_key: str
    image_path: str | None
    captions: tuple[str, ...]
    judge: str
    score: float | None = None
    choice: str | None = None
    caption_id: str | None = None
    system: str | None = None
    note: str = ""
    category: str | None = None


@dataclass
class JudgmentImportSummary:
    file: Path
    name: str
    kind: str
    images: int = 0
    captions: int = 0
    references: int = 0
    judges: int = 0
    judgments: int = 0
    notes: list[str] = field(default_factory=list)  # what was imported but may be a slip

    def __str__(self) -> str:
        counts = ", ".join(f"{n} {word}{'' if n == 1 else 's'}" for n, word in (
            (self.images, "image"), (self.captions, "caption"),
            (self.references, "reference"), (self.judges, "judge"),
            (self.judgments, "judgment")))
        return "\n".join([f"{self.file}: judgment set {self.name!r} ({self.kind}): {counts} "
                          "imported", *(f"note: {note}" for note in self.notes)])


def _required(record: Record, name: str) -> str:
    value = _text(record, name)
    if value is None:
        raise RowError(f"{name} is missing")
    return value


def _image(record: Record, base_dir: Path, allow_outside: bool) -> tuple[str, str | None]:
    """The image's key (image_id, else its path) and its file, which is optional (checked
    as every import checks image files)."""
    image_path = _text(record, "image")
    key = _text(record, "image_id") or image_path
    if key is None:
        raise RowError("image_id is missing")
    if image_path is None:
        return key, None
    return key, image_file(base_dir, image_path, allow_outside)


def _score(record: Record, scale: Scale) -> float:
    value = _number(record, "score")
    if value is None:
        raise RowError("score is missing")
    if not scale.contains(value):
        raise RowError(f"score must be on the scale {scale}, not {record['score']!r}")
    return value


def _choice(record: Record) -> str:
    value = _required(record, "choice")
    if value not in JUDGMENT_CHOICES:  # case-exact: `A` is not silently taken as `a`
        hint = (f" (lower case: {value.lower()!r})" if value.lower() in JUDGMENT_CHOICES
                else "")
        raise RowError(f"choice must be a, b or tie, not {record['choice']!r}{hint}")
    return value


def score_row(line: int, record: Record, base_dir: Path, scale: Scale,
              allow_outside: bool = False) -> JudgmentRow:
    problems = _Collected()
    image = problems.check(_image, record, base_dir, allow_outside)
    caption = problems.check(_required, record, "caption")
    judge = problems.check(_required, record, "judge")
    score = problems.check(_score, record, scale)
    row = None if None in (image, caption, judge) else JudgmentRow(
        line, image[0], image[1], (caption,), judge, score=score,
        caption_id=_text(record, "caption_id"), system=_text(record, "system"),
        note=_text(record, "note") or "")
    _raise_if_any(problems, row)
    return row


def pairwise_row(line: int, record: Record, base_dir: Path, scale: Scale | None,
                 allow_outside: bool = False) -> JudgmentRow:
    problems = _Collected()
    image = problems.check(_image, record, base_dir, allow_outside)
    caption_a = problems.check(_required, record, "caption_a")
    caption_b = problems.check(_required, record, "caption_b")
    judge = problems.check(_required, record, "judge")
    choice = problems.check(_choice, record)
    if caption_a is not None and caption_a == caption_b:
        problems.append("caption_a and caption_b are the same caption")
    row = None if None in (image, caption_a, caption_b, judge) else JudgmentRow(
        line, image[0], image[1], (caption_a, caption_b), judge, choice=choice,
        category=_text(record, "category"))
    _raise_if_any(problems, row)
    return row


class PartialRow(RowError):
    """A judgment with a bad field (a score off the scale, a choice not a, b or tie): its
    `row` still names image, captions and judge, so that a second judgment of the same
    judge is reported in the same pass."""

    def __init__(self, message: str, row: JudgmentRow | None) -> None:
        super().__init__(message)
        self.row = row


def _raise_if_any(problems: _Collected, row: JudgmentRow | None) -> None:
    if problems:
        raise PartialRow("; ".join(problems), row)


ROW_PARSERS: dict[str, Callable[..., JudgmentRow]] = {"score": score_row,
                                                      "pairwise": pairwise_row}
# The columns that tell the kinds apart, and how to import a file of each kind.
KIND_COLUMNS = {"score": ("caption", "score"), "pairwise": ("caption_a", "caption_b", "choice")}
KIND_OPTIONS = {"score": "--kind score with --scale MIN-MAX (e.g. 1-5)",
                "pairwise": "--kind pairwise (and leave out --scale)"}


def columns_text(kind: str) -> str:
    """The columns of a `kind` set, for a message: required ones, then optional ones."""
    return (f"image_id, {', '.join(REQUIRED_COLUMNS[kind])} (optional: "
            f"{', '.join(c for c in OPTIONAL_COLUMNS[kind] if c != 'image_id')})")


def kind_of_columns(columns: set[str]) -> str | None:
    """The kind of set whose distinguishing columns a file has all of (and none of the
    other kind's); None when its columns say neither."""
    for kind, own in KIND_COLUMNS.items():
        others = {c for other, cs in KIND_COLUMNS.items() if other != kind for c in cs}
        if set(own) <= columns and not others & columns:
            return kind
    return None


def other_kind(kind: str, columns: set[str]) -> str | None:
    """One line naming the option to use when a file's columns are another kind's."""
    found = kind_of_columns(columns)
    if found is None or found == kind:
        return None
    return (f"the columns {', '.join(KIND_COLUMNS[found])} are those of a {found} set, not "
            f"a {kind} set: use {KIND_OPTIONS[found]}")


def kind_mismatch(path: Path, kind: str) -> str | None:
    """`file: the columns … use --kind …` when the file's columns are another kind's than
    `kind` (read before anything else is checked); None otherwise."""
    found = file_kind(path)
    if found is None or found == kind:
        return None
    return f"{path}: {other_kind(kind, set(KIND_COLUMNS[found]))}"


def file_kind(path: Path) -> str | None:
    """The kind of set that a file's columns say (its CSV header, or its first JSON
    record); None when they say neither or the file cannot be read (the import then says
    why)."""
    try:
        records = iter_records(path, schema=JUDGMENT_SCHEMA, problems=Problems(path))
        try:
            first = next(records, None)
        finally:
            records.close()
    except (InputError, OSError, ValueError):
        return None
    return None if first is None else kind_of_columns(set(first[1]))


def _check_columns(records: list[tuple[int, Record]], kind: str, path: Path,
                   problems: Problems) -> None:
    """Unknown columns at the first record that has them; required ones never given; one
    line only when the columns are another kind's."""
    first_seen: dict[str, int] = {}
    for line, record in records:
        for key in record:
            first_seen.setdefault(key, line)
    if (hint := other_kind(kind, set(first_seen))) is not None:
        problems.add(1, hint)
        return
    known = {*REQUIRED_COLUMNS[kind], *OPTIONAL_COLUMNS[kind]}
    for key in sorted(set(first_seen) - known):
        if key.startswith(METRIC_COLUMN_PREFIX):
            continue  # metric scores written by `thumb judgments export`
        hint = ""
        if key in {*REQUIRED_COLUMNS["pairwise"]} - known:
            hint = " (a pairwise set? use --kind pairwise)"
        elif key in {*REQUIRED_COLUMNS["score"]} - known:
            hint = " (a score set? use --kind score)"
        problems.add(1 if path.suffix.lower() == ".csv" else first_seen[key],
                     f"unknown column {key!r} for a {kind} set{hint}")
    for column in REQUIRED_COLUMNS[kind]:
        if column not in first_seen:
            problems.add(1, f"missing column {column!r}")
    if "image_id" not in first_seen and "image" not in first_seen:
        problems.add(1, "missing column 'image_id'")


class Reference(NamedTuple):
    """A reference of an image; `id` when its file gives one (`reference_id`, or a COCO
    annotation's `id`): a caption with that caption_id is this reference. `line`: where
    its file gives it."""

    text: str
    id: str | None
    line: int


def read_references(path: Path, problems: Problems) -> dict[str, tuple[Reference, ...]]:
    """image key -> references, in file order, from a CSV/JSONL of `image_id, reference`
    rows (optional `reference_id`) or a COCO captions JSON file (`annotations` with `id`,
    `image_id` and `caption`). A reference id appears once per image (references without
    ids that repeat a text: `_repeated_references`). The problems of rows go to
    `problems` (those rows left out); a file that cannot be read at all raises InputError."""
    references: dict[str, list[Reference]] = {}
    id_line: dict[tuple[str, str], int] = {}

    def add(line: int, key: str, text: str, reference_id: str | None) -> None:
        # a COCO file on one line has every annotation at line 1: compare ids, not lines
        if reference_id is not None:
            if (key, reference_id) in id_line:
                problems.add(line, f"reference_id {reference_id!r} of image {key!r} is "
                                   f"given already at line {id_line[key, reference_id]}")
                return
            id_line[key, reference_id] = line
        references.setdefault(key, []).append(Reference(text, reference_id, line))

    if path.suffix.lower() == ".json":
        from storage.bison import coco_caption_annotations

        for line, reference_id, key, text in coco_caption_annotations(path):
            add(line, key, text, reference_id)
        return {key: tuple(texts) for key, texts in references.items()}
    records = read_records(path, schema=REFERENCE_SCHEMA, problems=problems)
    columns = set().union(*(record.keys() for _, record in records))
    for column in sorted(columns - set(REFERENCE_SCHEMA)):
        problems.add(1, f"unknown column {column!r} (references are image_id, reference "
                        "and optionally reference_id)")
    for column in REQUIRED_REFERENCE_COLUMNS:
        if records and column not in columns:
            problems.add(1, f"missing column {column!r}")
    for line, record in records:
        found = _Collected()
        key = found.check(_required, record, "image_id")
        text = found.check(_required, record, "reference")
        for message in found:
            problems.add(line, message)
        if not found:
            add(line, key, text, _text(record, "reference_id"))
    return {key: tuple(texts) for key, texts in references.items()}


@dataclass
class _Plan:
    """What the import adds, checked completely before anything is written."""

    images: dict[str, tuple[int, str | None]] = field(default_factory=dict)  # line, path
    captions: dict[tuple, JudgmentRow] = field(default_factory=dict)  # caption key -> row
    judgments: list[tuple[JudgmentRow, tuple[tuple, ...]]] = field(default_factory=list)


def _caption_key(row: JudgmentRow, text: str) -> tuple:
    """A judged caption is an (image, caption) pair: told apart by image and caption_id
    when the file gives one (the same id may be judged under several images), else by
    image and text (pairwise sets, and score sets without ids)."""
    if row.caption_id is not None:
        return ("id", row.image_key, row.caption_id)
    return ("text", row.image_key, text)


def _category_text(category: str | None) -> str:
    return "(none given)" if category is None else repr(category)


def _plan(rows: list[JudgmentRow], problems: Problems) -> _Plan:
    plan = _Plan()
    judgment_line: dict[tuple, int] = {}
    category_line: dict[frozenset, tuple[int, str | None]] = {}
    for row in rows:
        add = problems.add
        first = plan.images.setdefault(row.image_key, (row.line, row.image_path))
        if first[1] != row.image_path and None not in (first[1], row.image_path):
            add(row.line, f"image {row.image_key!r} has another file at line {first[0]}")
        elif first[1] is None and row.image_path is not None:
            plan.images[row.image_key] = (first[0], row.image_path)
        keys = tuple(_caption_key(row, text) for text in row.captions)
        for key, text in zip(keys, row.captions, strict=True):
            seen = plan.captions.setdefault(key, row)
            if row.caption_id is not None and seen.captions[0] != text:
                add(row.line, f"caption_id {row.caption_id!r} is another caption of image "
                              f"{row.image_key!r} at line {seen.line}")
            elif seen.system != row.system:
                add(row.line, f"the system of this caption differs from line {seen.line} "
                              "(give caption_id to tell two captions apart)")
        pairwise = len(keys) == 2
        identity = (*sorted(keys), row.judge) if pairwise else (*keys, row.judge)
        if identity in judgment_line:
            add(row.line, f"judge {row.judge!r} already judged this "
                          f"{'pair' if pairwise else 'caption'} at line "
                          f"{judgment_line[identity]}")
            continue
        judgment_line[identity] = row.line
        if pairwise:
            pair = frozenset(keys)
            first_category = category_line.setdefault(pair, (row.line, row.category))
            if first_category[1] != row.category:
                add(row.line, f"category {_category_text(row.category)} differs from "
                              f"{_category_text(first_category[1])} at line "
                              f"{first_category[0]} for the same pair")
        plan.judgments.append((row, keys))
    return plan


def import_judgments(
    engine: Engine, path: str | Path, *, name: str, kind: str, actor: str,
    scale: Scale | None = None, references: str | Path | None = None,
    allow_outside_images: bool = False,
) -> JudgmentImportSummary:
    """Import a judgment set named `name`. On any problem raise InputError listing every
    `file:line: problem` and leave the database unchanged."""
    path = Path(path)
    if kind not in JUDGMENT_KINDS:
        raise ValueError(f"the kind of a judgment set is score or pairwise, not {kind!r}")
    if kind == "score" and scale is None:
        raise ValueError(kind_mismatch(path, kind)
                         or "a score set needs its scale (--scale MIN-MAX, e.g. 1-5)")
    if kind == "pairwise" and scale is not None:
        raise ValueError("a pairwise set has no scale; leave out --scale")
    if (problem := name_refusal(name, in_file_names=True)) is not None:  # like every set
        raise ValueError(f"the judgment set name '{printable(name[:60], newlines=False)}': "
                         f"{problem}")
    problems = Problems(path)
    try:
        records = read_records(path, schema=JUDGMENT_SCHEMA, problems=problems)
    except InputError as refused:  # no records at all: say what the file should hold
        if [p.message for p in refused.problems] != ["no records found"]:
            raise
        raise InputError([Problem(path, 1, _no_records(path, kind))]) from None
    if not records and any(p.message.startswith("empty file") for p in problems.items):
        # one line naming the columns, not one per missing column
        problems.items = [Problem(path, 1, f"empty file: expected a header with the columns "
                                           f"{columns_text(kind)}")]
    if not records:  # every record was refused: its columns cannot be told missing
        problems.raise_if_any()
    read_problems = len(problems.items)
    _check_columns(records, kind, path, problems)
    if len(problems.items) > read_problems:  # wrong columns: every row would repeat it
        problems.raise_if_any()
    rows = []
    for line, record in records:
        try:
            rows.append(ROW_PARSERS[kind](line, record, path.parent, scale,
                                          allow_outside_images))
        except PartialRow as exc:  # checked with the others for duplicate judgments
            problems.add(line, str(exc))
            if exc.row is not None:
                rows.append(exc.row)
        except RowError as exc:
            problems.add(line, str(exc))
    plan = _plan(rows, problems)
    refs: dict[str, tuple[Reference, ...]] = {}
    if references is not None:  # its problems are listed with the judgment file's own
        reference_problems = Problems(Path(references))
        try:
            refs = read_references(Path(references), reference_problems)
        except InputError as refused:
            problems.items += refused.problems
        else:
            _check_reference_images(refs, plan, reference_problems, problems)
            problems.items += reference_problems.items
    problems.raise_if_any()
    with write_transaction(engine) as connection:
        table = JudgmentSet.__table__
        if connection.execute(select(table.c.id).where(table.c.name == name)).first():
            raise InputError([Problem(path, 0, f"a judgment set named {name!r} exists "
                                               "already; choose another --name")])
        summary = JudgmentImportSummary(path, name, kind)
        if references is not None:
            summary.notes += [note for note in (
                _repeated_references(refs, Path(references)),
                _unjudged_images(refs, plan, Path(references))) if note]
        return _write(connection, plan, refs, summary, scale, actor=actor,
                      references=references)


def _repeated_references(refs: dict[str, tuple[Reference, ...]], path: Path) -> str | None:
    """A note on the references without a reference_id that repeat a text of their image:
    kept, since two annotators may write the same sentence (COCO has such) and BLEU and
    CIDEr-D count each annotator's reference, but said, since a row pasted twice would
    count twice. None when there are none."""
    repeats = []
    for given in refs.values():
        first_line: dict[str, int] = {}
        for reference in given:
            if reference.id is None and reference.text in first_line:
                repeats.append(f"line {reference.line} = line {first_line[reference.text]}")
            elif reference.id is None:
                first_line[reference.text] = reference.line
    if not repeats:
        return None
    shown = ", ".join(repeats[:5]) + (f" and {len(repeats) - 5} more" if len(repeats) > 5
                                      else "")
    return (f"{path}: {len(repeats)} reference{'s' if len(repeats) > 1 else ''} without a "
            f"reference_id repeat{'' if len(repeats) > 1 else 's'} another of the same image "
            f"({shown}): kept as another annotator's (give reference_id to say so, or "
            "remove a row given twice: it counts twice in BLEU and CIDEr-D)")


def _no_records(path: Path, kind: str) -> str:
    """What a file without a single record should hold, in its own format's words."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return (f"empty file: expected one JSON object per line with the keys "
                f"{columns_text(kind)}")
    where = " under the header" if suffix == ".csv" else ""
    return f"no rows{where}: expected one judgment per row with the columns {columns_text(kind)}"


def _check_reference_images(refs: dict[str, tuple[Reference, ...]], plan: _Plan,
                            reference_problems: Problems, problems: Problems) -> None:
    """Every judged image has references (said only when the references file read
    cleanly: a refused row would make its image look bare)."""
    if not reference_problems.items:
        for key, (line, _) in plan.images.items():
            if key not in refs:
                problems.add(line, f"image {key!r} has no references in "
                                   f"{reference_problems.file}")


def _unjudged_images(refs: dict[str, tuple[Reference, ...]], plan: _Plan, path: Path
                     ) -> str | None:
    """A note on the images of a CSV/JSONL references file that no judgment names: a
    references file may cover a whole data set (a COCO captions file always does, so it
    gets none), but a typo'd image_id would otherwise be left out without a word. None
    when every image is judged."""
    if path.suffix.lower() == ".json":
        return None
    unjudged = [(given[0].line, key) for key, given in refs.items() if key not in plan.images]
    if not unjudged:
        return None
    shown = ", ".join(f"{key!r} at line {line}" for line, key in unjudged[:5]) + (
        f" and {len(unjudged) - 5} more" if len(unjudged) > 5 else "")
    return (f"{path}: {len(unjudged)} image{'s' if len(unjudged) > 1 else ''} that no "
            f"judgment names ({shown}): {'their' if len(unjudged) > 1 else 'its'} "
            "references are left out (a typo in image_id?)")


def _write(connection: Connection, plan: _Plan, refs: dict[str, tuple[Reference, ...]],
           summary: JudgmentImportSummary, scale: Scale | None, *, actor: str,
           references: str | Path | None) -> JudgmentImportSummary:
    now = utcnow()
    set_id = connection.execute(JudgmentSet.__table__.insert().values(
        name=summary.name, kind=summary.kind, source=str(summary.file),
        references_source=None if references is None else str(references),
        scale_min=scale and scale.low, scale_max=scale and scale.high,
        scale_step=scale and scale.step, created_at=now)).inserted_primary_key[0]
    image_ids = {}
    for key, (_, image_path) in plan.images.items():
        image_ids[key] = connection.execute(JudgmentImage.__table__.insert().values(
            set_id=set_id, key=key, path=image_path)).inserted_primary_key[0]
    reference_rows = [{"image_id": image_ids[key], "position": position,
                       "text": reference.text, "external_id": reference.id}
                      for key in plan.images
                      for position, reference in enumerate(refs.get(key, ()))]
    if reference_rows:
        connection.execute(JudgmentReference.__table__.insert(), reference_rows)
    caption_ids = {}
    for key, row in plan.captions.items():
        text = key[2] if key[0] == "text" else row.captions[0]
        caption_ids[key] = connection.execute(JudgmentCaption.__table__.insert().values(
            set_id=set_id, image_id=image_ids[row.image_key], text=text,
            external_id=row.caption_id, system=row.system)).inserted_primary_key[0]
    if summary.kind == "score":
        connection.execute(JudgmentScore.__table__.insert(), [
            {"set_id": set_id, "caption_id": caption_ids[keys[0]], "judge": row.judge,
             "score": row.score, "scale_min": scale.low, "scale_max": scale.high,
             "scale_step": scale.step, "note": row.note}
            for row, keys in plan.judgments])
    else:
        connection.execute(JudgmentPair.__table__.insert(), [
            {"set_id": set_id, "image_id": image_ids[row.image_key],
             "caption_a_id": caption_ids[keys[0]], "caption_b_id": caption_ids[keys[1]],
             "judge": row.judge, "choice": row.choice, "category": row.category}
            for row, keys in plan.judgments])
    summary.images, summary.captions = len(image_ids), len(caption_ids)
    summary.references = len(reference_rows)
    summary.judges = len({row.judge for row, _ in plan.judgments})
    summary.judgments = len(plan.judgments)
    log_change(connection, actor=actor, action="import", table="judgment_set", row_id=set_id,
               new={str(summary.file): {k: v for k, v in vars(summary).items()
                                        if k != "file"}})
    return summary
