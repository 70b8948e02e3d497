"""Import captions, references and ratings from CSV/JSONL in one all-or-nothing transaction."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from itertools import chain
from pathlib import Path

from sqlalchemy import Connection, Engine, Table, bindparam, select, update

from rubrics import Rubric
from storage.db import (
    INSERT_CHUNK,
    SQLITE_BUSY_TIMEOUT_MS,
    BulkInsert,
    large_cache,
    run_write,
)
from storage.errors import Problems
from storage.events import log_change
from storage.import_files import iter_records
from storage.import_rows import (
    JSON_SCHEMA,
    CaptionRow,
    FluencyRoundRow,
    RatingRow,
    RowError,
    RowReader,
    missing_columns,
    normalise_keys,
    unknown_columns,
)
from storage.models import (
    RATING_VALUE_FIELDS,
    Annotator,
    Caption,
    FluencyCheck,
    Image,
    ImageReference,
    Rating,
    Resolution,
    Stage,
    utcnow,
)
from storage.protocol import (
    ImageState,
    Write,
    is_complete,
    may_check_fluency,
    read_states,
    refusals,
    resolution_refusal,
)
from storage.rubric_registry import project_rubric, register_rubric

CaptionKey = tuple[str, str]  # (image key, system)


def file_digest(path: Path) -> str | None:
    """The SHA-256 of a file's bytes (None if it cannot be read again): which file an
    import event records, beyond its name."""
    try:
        with path.open("rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError:
        return None


@dataclass
class ImportSummary:
    file: Path
    images: int = 0
    captions: int = 0
    references: int = 0
    annotators: int = 0
    ratings: int = 0
    resolutions: int = 0
    fluency_checks: int = 0
    double_images: int = 0

    def __str__(self) -> str:
        counts = [(self.images, "image"), (self.captions, "caption"),
                  (self.references, "reference"), (self.annotators, "annotator"),
                  (self.ratings, "rating")]
        counts += [(n, word) for n, word in ((self.resolutions, "resolution"),
                                             (self.fluency_checks, "fluency-round verdict"),
                                             (self.double_images, "double-rating mark"))
                   if n]
        listed = ", ".join(f"{n} {word}{'' if n == 1 else 's'}" for n, word in counts)
        return f"{self.file}: {listed} imported"


@dataclass
class ImportPlan:
    """What an import will add; built and checked completely before anything is written."""

    images: dict[str, str | None] = field(default_factory=dict)  # key -> path
    set_ids: dict[str, int | None] = field(default_factory=dict)
    references: dict[str, tuple[str, ...]] = field(default_factory=dict)
    captions: dict[CaptionKey, CaptionRow] = field(default_factory=dict)
    annotators: set[str] = field(default_factory=set)
    # (caption, annotator, stage) -> the row that rates it, in the file's order
    ratings: dict[tuple[CaptionKey, str, int], CaptionRow] = field(default_factory=dict)
    double_images: set[str] = field(default_factory=set)
    native: dict[str, bool] = field(default_factory=dict)
    resolutions: dict[CaptionKey, RatingRow] = field(default_factory=dict)
    fluency_checks: dict[CaptionKey, FluencyRoundRow] = field(default_factory=dict)


class _Existing:
    """The database rows an import must be consistent with. The images are locked first,
    until the import commits, so that no rating session changes what the protocol checks
    read (SQLite: the import's write transaction holds the database)."""

    def __init__(self, connection: Connection) -> None:
        self.states = {state.key: state for state in
                       read_states(connection, lock=True).values()}
        image, caption, ref = Image.__table__, Caption.__table__, ImageReference.__table__
        self.images: dict[str, tuple[int, str | None]] = {}
        self.double: set[str] = set()
        for row in connection.execute(
                select(image.c.id, image.c.key, image.c.path, image.c.double_rating)):
            self.images[row.key] = (row.id, row.path)
            if row.double_rating:
                self.double.add(row.key)
        key_of = {image_id: key for key, (image_id, _) in self.images.items()}
        self.captions: dict[CaptionKey, tuple[int, str, str | None]] = {}
        self.caption_ids: dict[str, CaptionKey] = {}
        for row in connection.execute(
            select(caption.c.id, caption.c.image_id, caption.c.system, caption.c.text,
                   caption.c.external_id)
        ):
            key = (key_of[row.image_id], row.system)
            self.captions[key] = (row.id, row.text, row.external_id)
            if row.external_id is not None:
                self.caption_ids[row.external_id] = key
        self.references: dict[str, list[str]] = {}
        for row in connection.execute(
            select(ref.c.image_id, ref.c.text).order_by(ref.c.image_id, ref.c.position)
        ):
            self.references.setdefault(key_of[row.image_id], []).append(row.text)
        annotator, rating = Annotator.__table__, Rating.__table__
        self.annotators: dict[str, int] = {}
        self.native: dict[str, bool | None] = {}
        for row in connection.execute(
                select(annotator.c.id, annotator.c.name, annotator.c.native_english)):
            self.annotators[row.name] = row.id
            self.native[row.name] = row.native_english
        caption_key = {cid: key for key, (cid, _, _) in self.captions.items()}
        name_of = {aid: name for name, aid in self.annotators.items()}
        self.ratings: set[tuple[CaptionKey, str, int]] = set()
        self.complete_first: set[tuple[CaptionKey, str]] = set()
        for row in connection.execute(select(rating.c.caption_id, rating.c.annotator_id,
                                             rating.c.stage, rating.c.precision,
                                             rating.c.recall)):
            key, name = caption_key[row.caption_id], name_of[row.annotator_id]
            self.ratings.add((key, name, row.stage))
            if row.stage == Stage.FIRST and is_complete(row._mapping):
                self.complete_first.add((key, name))
        self.resolved = {caption_key[c] for c in connection.execute(
            select(Resolution.__table__.c.caption_id)).scalars()}
        self.fluency_checked = {caption_key[c] for c in connection.execute(
            select(FluencyCheck.__table__.c.caption_id)).scalars()}


def _where(row: CaptionRow) -> str:
    return f"image {row.image_key!r}, system {row.system!r}"


def _who(rating: RatingRow) -> str:
    return f"{rating.annotator!r} at stage {rating.stage.label}"


def _plan(rows: Iterable[CaptionRow], existing: _Existing, problems: Problems, *,
          rejected_images: set[str] | None = None) -> ImportPlan:
    """Check the rows against each other and the database. `rejected_images` holds the image
    keys of the file's rows that failed their own checks (None: every row passed): those
    images are not reported as unknown, and the protocol is not judged on part of a file."""
    plan = ImportPlan()
    image_line: dict[str, tuple[int, str | None]] = {}
    reference_line: dict[str, int] = {}
    caption_id_line: dict[str, CaptionRow] = {}
    workflow = _WorkflowState(existing, problems)
    for row in rows:
        line, key = row.line, (row.image_key, row.system)
        # Images
        if row.image_key in existing.images:
            db_path = existing.images[row.image_key][1]
            if row.image_path and db_path and row.image_path != db_path:
                problems.add(line, f"image {row.image_key!r} is already in the database "
                                   f"with another file ({db_path})")
        elif row.image_key in image_line:
            first_line, first_path = image_line[row.image_key]
            if row.image_path and first_path and row.image_path != first_path:
                problems.add(line, f"image {row.image_key!r} has another file at line {first_line}")
        elif row.image_path is None:
            if row.image_key not in (rejected_images or ()):
                problems.add(line, f"unknown image_id {row.image_key!r}: not in the database "
                                   "and no image path given")
        else:
            image_line[row.image_key] = (line, row.image_path)
            plan.images[row.image_key] = row.image_path
        # References
        if row.references is not None:
            known = existing.references.get(row.image_key)
            if known is not None and tuple(known) != row.references:
                problems.add(line, f"references of image {row.image_key!r} differ from those "
                                   "already in the database")
            elif row.image_key in reference_line:
                if plan.references[row.image_key] != row.references:
                    problems.add(line, f"references of image {row.image_key!r} differ from "
                                       f"line {reference_line[row.image_key]}")
            elif known is None:
                reference_line[row.image_key] = line
                plan.references[row.image_key] = row.references
        # Captions
        if row.caption_id is not None:
            other = caption_id_line.get(row.caption_id)
            db_key = existing.caption_ids.get(row.caption_id)
            if other is not None and (other.image_key, other.system) != key:
                problems.add(line, f"duplicate caption_id {row.caption_id!r} "
                                   f"(line {other.line} is another caption)")
            elif db_key is not None and db_key != key:
                problems.add(line, f"duplicate caption_id {row.caption_id!r}: the database "
                                   "already uses it for another caption")
            caption_id_line.setdefault(row.caption_id, row)
        if key in existing.captions:
            _, db_text, _ = existing.captions[key]
            if db_text != row.caption:
                problems.add(line, f"duplicate caption for {_where(row)}: the database has "
                                   f"{db_text!r}")
            elif row.rating is None:
                problems.add(line, f"duplicate caption for {_where(row)}: already in the database")
        elif key in plan.captions:
            first = plan.captions[key]
            if first.caption != row.caption:
                problems.add(line, f"duplicate caption for {_where(row)}: line {first.line} "
                                   "has another caption")
            elif first.caption_id != row.caption_id and row.caption_id is not None:
                problems.add(line, f"caption_id {row.caption_id!r} differs from line {first.line}")
            elif row.rating is None or first.rating is None:
                problems.add(line, f"duplicate row for {_where(row)} (also line {first.line})")
        else:
            plan.captions[key] = row
        # Ratings
        if row.rating is not None:
            rating_key = (key, row.rating.annotator, int(row.rating.stage))
            if rating_key in existing.ratings:
                problems.add(line, f"duplicate rating: {_who(row.rating)} already rated this "
                                   "caption in the database")
            elif rating_key in plan.ratings:
                problems.add(line, f"duplicate rating: {_who(row.rating)} also rated this "
                                   f"caption at line {plan.ratings[rating_key].line}")
            else:
                plan.ratings[rating_key] = row
                if row.rating.annotator not in existing.annotators:
                    plan.annotators.add(row.rating.annotator)
        workflow.add(row, key, plan)
    workflow.check_checkers(plan)
    if rejected_images is None:
        _check_protocol(plan, existing, problems)
    return plan


def _check_protocol(plan: ImportPlan, existing: _Existing, problems: Problems) -> None:
    """Imported ratings follow THUMB's protocol (`storage.protocol`) as ratings made in the
    app do, judged on each image as it will be after the import; a breach is reported at
    the last line of the file that takes part in it. Final-stage ratings may come without
    a review (final scores from elsewhere); resolutions need both stages of their caption."""
    lines: dict[str, dict[Write, int]] = {}  # image key -> (name, stage) -> first line
    for (caption_key, name, stage), row in plan.ratings.items():  # in the file's order
        lines.setdefault(caption_key[0], {}).setdefault((name, Stage(stage)), row.line)
    captions: dict[str, list[CaptionKey]] = {}
    for key in chain(existing.captions, plan.captions):
        if key[0] in lines:
            captions.setdefault(key[0], []).append(key)

    def complete(key: CaptionKey, name: str) -> bool:
        return ((key, name, int(Stage.FIRST)) in plan.ratings
                or (key, name) in existing.complete_first)

    for image in sorted(lines):
        before = existing.states.get(image, ImageState(image, 1))
        raters = before.first | {name for name, stage in lines[image] if stage == Stage.FIRST}
        after = replace(
            before, takes=2 if image in plan.double_images else before.takes,
            complete=frozenset(name for name in raters
                               if all(complete(key, name) for key in captions[image])))
        for breach in refusals(after, list(lines[image]), resolutions=False):
            taking_part = [lines[image][w] for w in breach.writes if w in lines[image]]
            if taking_part:
                problems.add(max(taking_part), f"image {image!r}: {breach.detail}")
    stages: dict[CaptionKey, set[int]] = {key: set() for key in plan.resolutions}
    for key, _, stage in chain(existing.ratings, plan.ratings) if stages else ():
        if key in stages:
            stages[key].add(stage)
    for key, rating in plan.resolutions.items():
        refusal = resolution_refusal(stages[key])
        if refusal:
            problems.add(plan.ratings[(key, rating.annotator, int(Stage.FINAL))].line, refusal)


class _WorkflowState:
    """Checks the workflow columns of an import (double-rating marks, native-speaker
    flags, resolutions, fluency-round verdicts) against each other and the database."""

    def __init__(self, existing: _Existing, problems: Problems) -> None:
        self.existing, self.problems = existing, problems
        self.double_line: dict[str, tuple[int, bool]] = {}
        self.native_line: dict[str, tuple[int, bool]] = {}
        self.resolution_line: dict[CaptionKey, int] = {}
        self.fluency_line: dict[CaptionKey, tuple[int, FluencyRoundRow]] = {}

    def add(self, row: CaptionRow, key: CaptionKey, plan: ImportPlan) -> None:
        line, add = row.line, self.problems.add
        if row.double_rating is not None:
            first = self.double_line.setdefault(row.image_key, (line, row.double_rating))
            if first[1] != row.double_rating:
                add(line, f"double_rating of image {row.image_key!r} differs from line "
                          f"{first[0]}")
            elif row.double_rating and row.image_key not in self.existing.double:
                plan.double_images.add(row.image_key)
        rating = row.rating
        if rating is not None and rating.native_english is not None:
            name, value = rating.annotator, rating.native_english
            first = self.native_line.setdefault(name, (line, value))
            recorded = self.existing.native.get(name)
            if first[1] != value:
                add(line, f"native_english of {name!r} differs from line {first[0]}")
            elif recorded is not None and recorded != value:
                add(line, f"the database records {name!r} as "
                          f"{'a' if recorded else 'not a'} native English speaker")
            else:
                plan.native[name] = value
        if rating is not None and rating.resolution_reasons:
            if key in self.existing.resolved:
                add(line, "this caption already has a resolution in the database")
            elif key in self.resolution_line:
                add(line, f"a second resolution of this caption (also line "
                          f"{self.resolution_line[key]})")
            else:
                self.resolution_line[key] = line
                plan.resolutions[key] = rating
        verdict = row.fluency_round
        if verdict is not None:
            if key in self.fluency_line:
                if self.fluency_line[key][1] != verdict:
                    add(line, "the fluency-round verdict (fluency_round, fluency_round_type, "
                              f"fluency_round_by) differs from line {self.fluency_line[key][0]}")
            elif key in self.existing.fluency_checked:
                add(line, "this caption already has a fluency-round verdict in the database")
            else:
                self.fluency_line[key] = (line, verdict)
                plan.fluency_checks[key] = verdict
                if verdict.checker not in self.existing.annotators:
                    plan.annotators.add(verdict.checker)

    def check_checkers(self, plan: ImportPlan) -> None:
        """Only native speakers do the fluency round; an unknown checker is recorded as one."""
        for line, verdict in self.fluency_line.values():
            name = verdict.checker
            native = plan.native.get(name, self.existing.native.get(name))
            if native is None:
                plan.native[name] = True
            elif not may_check_fluency(native):
                self.problems.add(line, f"fluency_round_by {name!r} is not a native English "
                                        "speaker")


def _rating_values(rating: RatingRow) -> dict[str, object]:
    return {"stage": int(rating.stage), "note": rating.note, "seconds": rating.seconds,
            **{field: getattr(rating, field) for field in RATING_VALUE_FIELDS}}


def _by_caption(connection: Connection, table: Table, columns: Iterable[str]) -> BulkInsert:
    """A bulk insert of `columns` into `table` whose caption is named by the parameters
    `image_id` and `system` before them (one index look-up per row), so that no map of
    every caption id is held in memory."""
    caption = Caption.__table__
    caption_id = (select(caption.c.id).where(caption.c.image_id == bindparam("image_id"),
                                             caption.c.system == bindparam("system"))
                  .scalar_subquery())
    return BulkInsert(connection, table.insert().values(caption_id=caption_id),
                      ("image_id", "system", *columns))


def _apply_plan(
    connection: Connection, plan: ImportPlan, *, actor: str, source: Path, rubric: Rubric
) -> ImportSummary:
    """Write a checked plan inside the caller's transaction, in chunks of bulk inserts."""
    now = utcnow()
    image, caption, ref = Image.__table__, Caption.__table__, ImageReference.__table__
    annotator, rating = Annotator.__table__, Rating.__table__
    if plan.annotators:
        connection.execute(
            annotator.insert(), [{"name": n, "created_at": now} for n in sorted(plan.annotators)]
        )
    BulkInsert(connection, image.insert(), ("key", "path", "set_id", "double_rating"))(
        (k, p, plan.set_ids.get(k), k in plan.double_images) for k, p in plan.images.items())
    marked = [{"image_key": key} for key in sorted(plan.double_images - plan.images.keys())]
    if marked:
        connection.execute(update(image).where(image.c.key == bindparam("image_key"))
                           .values(double_rating=True), marked)
    image_ids = dict(connection.execute(select(image.c.key, image.c.id)).all())
    references = BulkInsert(connection, ref.insert(), ("image_id", "position", "text"))(
        (image_ids[key], position, text)
        for key, refs in plan.references.items() for position, text in enumerate(refs))
    BulkInsert(connection, caption.insert(), ("image_id", "system", "text", "external_id"))(
        (image_ids[row.image_key], row.system, row.caption, row.caption_id)
        for row in plan.captions.values())
    annotator_ids = dict(connection.execute(select(annotator.c.name, annotator.c.id)).all())
    ratings = _by_caption(connection, rating, [c.name for c in rating.columns
                                               if c.name not in ("id", "caption_id")])
    values: dict[int, tuple] = {}  # id of a RatingRow (rows share them) -> driver values

    def rating_values(r: RatingRow) -> tuple:
        if id(r) not in values:
            if len(values) == INSERT_CHUNK:  # timestamped ratings all differ
                values.clear()
            given = {"annotator_id": annotator_ids[r.annotator], "rubric": rubric.signature,
                     "created_at": r.created_at or now,
                     "updated_at": r.updated_at or r.created_at or now, **_rating_values(r)}
            values[id(r)] = ratings.driver_values(
                tuple(given[name] for name in ratings.names[2:]), first=2)
        return values[id(r)]

    ratings(((image_ids[key[0]], key[1], *rating_values(row.rating))
             for (key, _, _), row in plan.ratings.items() if row.rating), converted=True)
    for name, native in plan.native.items():
        connection.execute(update(annotator).where(annotator.c.name == name)
                           .values(native_english=native))
    _by_caption(connection, Resolution.__table__,
                ("resolver_id", "reasons", "note", "created_at"))(
        (image_ids[key[0]], key[1], annotator_ids[r.annotator], ",".join(r.resolution_reasons),
         r.resolution_note, now) for key, r in plan.resolutions.items())
    _by_caption(connection, FluencyCheck.__table__,
                ("checker_id", "fluency", "fluency_type", "created_at", "rubric"))(
        (image_ids[key[0]], key[1], annotator_ids[v.checker], v.fluency, v.fluency_type, now,
         rubric.signature) for key, v in plan.fluency_checks.items())
    summary = ImportSummary(
        file=source,
        images=len(plan.images),
        captions=len(plan.captions),
        references=references,
        annotators=len(plan.annotators),
        ratings=len(plan.ratings),
        resolutions=len(plan.resolutions),
        fluency_checks=len(plan.fluency_checks),
        double_images=len(plan.double_images),
    )
    # one event for the whole import: which file (its digest), what it added
    log_change(connection, actor=actor, action="import", table="import",
               new={str(source): {"sha256": file_digest(source),
                                  **{k: v for k, v in vars(summary).items() if k != "file"}}})
    return summary


def import_caption_rows(engine: Engine, rows: list[CaptionRow], problems: Problems, *,
                        actor: str, rubric: Rubric, set_ids: dict[str, int] | None = None,
                        rejected_images: set[str] | None = None,
                        choose_rubric: bool = False) -> ImportSummary:
    """Check parsed rows against the database and THUMB's protocol and write them, all in
    one write transaction that locks the images first: all or nothing. `problems` may hold
    the problems of rows already left out (`rejected_images`: their image keys); on any
    problem raise InputError listing every one and leave the database unchanged. With
    `choose_rubric`, `rubric` becomes the project's rubric in the same transaction."""

    def write(connection: Connection) -> ImportSummary:
        if choose_rubric:
            register_rubric(connection, rubric, choose=True)
        found = Problems(problems.file)  # afresh on each attempt
        found.items = list(problems.items)
        plan = _plan(rows, _Existing(connection), found,
                     rejected_images=rejected_images if problems.items else None)
        found.raise_if_any()
        plan.set_ids = set_ids or {}
        with large_cache(connection):
            return _apply_plan(connection, plan, actor=actor, source=problems.file,
                               rubric=rubric)

    return run_write(engine, write, lock_wait_ms=SQLITE_BUSY_TIMEOUT_MS)


def import_captions(
    engine: Engine, path: str | Path, *, actor: str, rubric: Rubric | None = None,
    allow_outside_images: bool = False,
) -> ImportSummary:
    """Import a CSV/JSONL file of captions (and optional ratings). On any problem raise
    InputError listing every `file:line: problem` — all of them, found in one pass — and
    leave the database unchanged. Image paths must stay inside the file's folder unless
    `allow_outside_images`. Ratings are read and stored under `rubric`, which becomes the
    project's rubric; by default, under the project's rubric. The file is streamed: only
    the validated rows (compact, sharing what they repeat) are held."""
    path = Path(path)
    chosen = rubric
    rubric = chosen or project_rubric(engine)
    problems = Problems(path)  # the records' own problems and the columns'
    row_problems = Problems(path)  # the fields' problems: moot when a column is wrong
    reader = RowReader(path.parent, rubric, allow_outside_images=allow_outside_images)
    first_seen: dict[str, int] = {}
    rows = []
    rejected: set[str] = set()
    for line, raw in iter_records(path, schema=JSON_SCHEMA, problems=problems):
        record = normalise_keys(raw)
        if not first_seen.keys() >= record.keys():
            for key in record:
                first_seen.setdefault(key, line)
        try:
            rows.append(reader.row(line, record))
        except RowError as exc:
            row_problems.add(line, str(exc))
            rejected.add(str(record.get("image_id") or record.get("image") or "").strip())
    # (when records were left out for their own problems, their columns are unknown here)
    records_left_out = bool(problems.items)
    unknown = unknown_columns(set(first_seen))
    if unknown and path.suffix.lower() == ".csv":
        problems.add(1, f"unknown column(s): {', '.join(unknown)}")
    else:  # JSON lines and Parquet: at the first record that has the key
        for key in unknown:
            problems.add(first_seen[key], f"unknown column(s): {key}")
    missing = [] if records_left_out else missing_columns(set(first_seen), unknown)
    for message in missing:
        problems.add(1, message)
    if unknown or missing:  # every row would repeat it
        problems.raise_if_any()
    problems.items += row_problems.items
    return import_caption_rows(engine, rows, problems, actor=actor, rubric=rubric,
                               rejected_images=rejected, choose_rubric=chosen is not None)
