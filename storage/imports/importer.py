"""Import captions, references and ratings from CSV/JSONL in one all-or-nothing transaction,
streamed: rows are checked and spooled a chunk at a time, and written once every row has
passed its checks."""

from __future__ import annotations

import hashlib
import pickle
import secrets
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from contextlib import closing, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO

from sqlalchemy import Connection, Engine, Table, bindparam, func, select, update

from rubrics import Rubric
from rubrics.files import regular_file
from storage.db.engine import (
    INSERT_CHUNK,
    SQLITE_BUSY_TIMEOUT_MS,
    BulkInsert,
    large_cache,
    run_write,
)
from storage.errors import InputError, Problem, Problems
from storage.events import log_change
from storage.imports.import_files import iter_records
from storage.imports.import_rows import (
    JSON_SCHEMA,
    CaptionRow,
    FluencyRoundRow,
    ImageFlagRow,
    ImageRefusedBefore,
    RatingRow,
    RowError,
    RowReader,
    missing_columns,
    normalise_keys,
    unknown_columns,
)
from storage.imports.import_scan import NOTE as QUICK_NOTE
from storage.imports.import_scan import quick_problems
from storage.models import (
    RATING_VALUE_FIELDS,
    Annotator,
    Caption,
    FluencyCheck,
    Image,
    ImageFlag,
    ImageReference,
    Rating,
    Resolution,
    Stage,
    utcnow,
)
from storage.rating.image_flags import flag_image
from storage.rating.project_queues import disagree, primary_first_ratings
from storage.rating.protocol import (
    Breach,
    ImageState,
    Write,
    is_complete,
    may_check_fluency,
    read_states,
    refusals,
    resolution_refusal,
)
from storage.rubric_registry import (
    project_rubric,
    rating_value_triggers_suspended,
    register_rubric,
)

# Ratings from which an import judges their values once on SQLite instead of in triggers
# row by row (`rating_value_triggers_suspended`): below it, the triggers cost less than
# dropping and making them again.
BULK_RATINGS = 10_000

# Resolutions whose two stages are compared in one round of queries (each id a bound
# parameter: SQLite takes at most 32,766 in one statement).
RESOLUTIONS_AT_ONCE = 5_000

# Distinct image states whose refusals `_check_protocol` keeps (a file whose images are
# all held by different annotators would have one per image).
JUDGED_STATES = 65_536

# How far an import is: (phase, done, total), the phases in order
ImportProgress = Callable[[str, int, int], None]
QUICK_CHECK, CHECKING, WRITING = "checking values", "checking rows", "writing"

CaptionKey = tuple[str, str]  # (image key, system)
RatingKey = tuple[str, str, int]  # (system, annotator, stage) of one image's rating


def file_digest(path: Path) -> str | None:
    """The SHA-256 of a file's bytes (None if it cannot be read again, or is not a regular
    file): which file an import event records, beyond its name. Through the readers' gate
    (`regular_file`): opening a FIFO for reading waits for a writer, which kept this
    thread for ever after the import had refused the FIFO."""
    try:
        with regular_file(path).open("rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except (OSError, ValueError):
        return None


def _digest_beside(path: Path) -> Future[str | None]:
    """`file_digest` of `path`, computed in a thread while the import checks the rows:
    reading and hashing release the GIL, so on a spare CPU it costs the checks nothing
    (about two seconds of one CPU for a file of a million rows). A daemon thread: a
    refused import's program need not wait for it to end."""
    digest: Future[str | None] = Future()

    def compute() -> None:
        try:
            digest.set_result(file_digest(path))
        except BaseException as exc:  # raised where the digest is asked for
            digest.set_exception(exc)

    threading.Thread(target=compute, name="thumb-import-digest", daemon=True).start()
    return digest


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
    image_flags: int = 0
    # when the import chose another rubric for the project (--rubric): the one before,
    # the one now, and the ratings made with the one before (they keep it)
    rubric_before: str | None = None
    rubric_now: str | None = None
    ratings_on_rubric_before: int = 0

    def __str__(self) -> str:
        counts = [(self.images, "image"), (self.captions, "caption"),
                  (self.references, "reference"), (self.annotators, "annotator"),
                  (self.ratings, "rating")]
        counts += [(n, word) for n, word in ((self.resolutions, "resolution"),
                                             (self.fluency_checks, "fluency-round verdict"),
                                             (self.double_images, "double-rating mark"),
                                             (self.image_flags, "broken-image flag"))
                   if n]
        listed = ", ".join(f"{n} {word}{'' if n == 1 else 's'}" for n, word in counts)
        summary = f"{self.file}: {listed} imported"
        if self.rubric_before is None:
            return summary
        kept = self.ratings_on_rubric_before
        return (f"{summary}\nnote: the project's rubric is now {self.rubric_now}, for every "
                f"new rating (it was {self.rubric_before}"
                + (f"; the {kept} rating{'' if kept == 1 else 's'} made with it keep it)"
                   if kept else ")"))


_LINE_BITS = 48  # a line number takes at most 48 bits (2**48 lines: beyond any file)
_HASH_MASK = 2**64 - 1


def _packed(line: int, text_hash: int, flag: bool = False) -> int:
    """A line of the file, a hash of what it says and a flag as one int (40 bytes; a
    tuple of the three took 150, a lot for a million rows). Texts are kept as hashes: a
    million captions' texts would double what an import holds, and two texts that differ
    yet hash alike (a chance of 2**-64) are the only ones the checks could take for the
    same."""
    return ((text_hash & _HASH_MASK) << _LINE_BITS | line) << 1 | flag


def _line(packed: int) -> int:
    return packed >> 1 & (1 << _LINE_BITS) - 1


def _same_text(packed: int, text_hash: int) -> bool:
    return packed >> _LINE_BITS + 1 == text_hash & _HASH_MASK


def _flagged(packed: int) -> bool:
    return bool(packed & 1)


@dataclass(slots=True)
class _ImageRows:
    """One image's captions and ratings in the file so far: keys and lines, not rows."""

    # by system: its first row's line and caption (`_packed`), flagged if it rates
    captions: dict[str, int] = field(default_factory=dict)
    # the `ImportPlan.rating_id` of (system, annotator, stage) -> the line that rates it,
    # in the file's order
    ratings: dict[int, int] = field(default_factory=dict)


@dataclass
class ImportPlan:
    """What an import has read so far, as compact as the checks allow: each image's
    caption keys and rating lines, texts as their hashes (the rows themselves are written
    a chunk at a time and let go), and the workflow records, which are few."""

    images: dict[str, _ImageRows] = field(default_factory=dict)  # every image with rows
    # key -> its first line and file (`_packed`); the file's path goes with the chunk
    new_images: dict[str, int] = field(default_factory=dict)
    set_ids: dict[str, int] = field(default_factory=dict)
    # key -> the line of its references and their hash (`_packed`)
    references: dict[str, int] = field(default_factory=dict)
    caption_ids: dict[str, tuple[int, CaptionKey]] = field(default_factory=dict)
    captions: int = 0  # new captions
    ratings: int = 0
    # (system, annotator, stage) -> its number: a million ratings keyed by these small
    # ints take a third of what they took keyed by the tuples; the file has few distinct
    rating_ids: dict[RatingKey, int] = field(default_factory=dict)
    rating_keys: list[RatingKey] = field(default_factory=list)  # by number
    annotators: set[str] = field(default_factory=set)
    double_images: set[str] = field(default_factory=set)
    native: dict[str, bool] = field(default_factory=dict)
    resolutions: dict[CaptionKey, RatingRow] = field(default_factory=dict)
    fluency_checks: dict[CaptionKey, FluencyRoundRow] = field(default_factory=dict)
    image_flags: list[tuple[str, ImageFlagRow]] = field(default_factory=list)  # image key

    def rating_id(self, key: RatingKey) -> int:
        """The number of (system, annotator, stage), given on first sight."""
        number = self.rating_ids.get(key)
        if number is None:
            number = self.rating_ids[key] = len(self.rating_keys)
            self.rating_keys.append(key)
        return number

    def image_ratings(self, rows: _ImageRows) -> Iterator[tuple[RatingKey, int]]:
        """The (system, annotator, stage) of each rating of an image, and its line."""
        keys = self.rating_keys
        return ((keys[number], line) for number, line in rows.ratings.items())


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
        flag = ImageFlag.__table__
        self.flags: dict[str, dict[str, str]] = {}  # image key -> annotator -> reason
        for image_id, annotator_id, reason in connection.execute(
                select(flag.c.image_id, flag.c.annotator_id, flag.c.reason)):
            self.flags.setdefault(key_of[image_id], {})[name_of[annotator_id]] = reason


def _where(row: CaptionRow) -> str:
    return f"image {row.image_key!r}, system {row.system!r}"


def _who(rating: RatingRow) -> str:
    return f"{rating.annotator!r} at stage {rating.stage.label}"


class _Batch:
    """The checked rows of one chunk, waiting to be written: what each adds, as plain
    tuples (cheap to spool)."""

    def __init__(self) -> None:
        self.rows = 0
        self.images: list[tuple[str, str]] = []  # key, path
        self.references: list[tuple[str, tuple[str, ...]]] = []
        self.captions: list[tuple[str, str, str, str | None]] = []  # key, system, text, id
        self.ratings: list[tuple[str, str, RatingRow]] = []  # image key, system, rating

    def queued(self) -> bool:
        return bool(self.images or self.references or self.captions or self.ratings)


class _Spool:
    """The checked chunks of an import, kept in `file` (a temporary one) until every row
    has passed its checks: a refused file is never written, so refusing it costs one pass
    of checks wherever its bad row is, and memory holds one chunk, not the file. Ratings
    that rows share stay shared within a chunk (pickle keeps one copy of an object)."""

    def __init__(self, file: IO[bytes]) -> None:
        self._file, self.chunks = file, 0

    def add(self, batch: _Batch) -> None:
        pickle.dump((batch.rows, batch.images, batch.references, batch.captions,
                     batch.ratings), self._file, protocol=pickle.HIGHEST_PROTOCOL)
        self.chunks += 1

    def __iter__(self) -> Iterator[_Batch]:
        self._file.seek(0)
        for _ in range(self.chunks):
            batch = _Batch()
            (batch.rows, batch.images, batch.references, batch.captions,
             batch.ratings) = pickle.load(self._file)
            yield batch


class _Pass:
    """One pass over an import's rows: each row is checked against the rows before it and
    the database, and while no problem has been found, the checked rows are spooled a
    chunk at a time (`_Spool`), to be written once every row has passed; after the first
    problem the rest is only checked, so that every problem is reported."""

    def __init__(self, existing: _Existing, problems: Problems, own_problems: Problems,
                 plan: ImportPlan, spool: _Spool, rejected_images: set[str]) -> None:
        self.existing, self.problems, self.own_problems = existing, problems, own_problems
        self.spool: _Spool | None = spool
        self.rejected_images = rejected_images
        self.plan = plan
        self.workflow = _WorkflowState(existing, problems)
        self.batch = _Batch()

    def add(self, row: CaptionRow) -> None:
        """Check one row (its own checks passed) and queue what it adds."""
        self._check(row)
        if self.spool is not None and (self.problems.items or self.own_problems.items):
            self.spool = None  # refused: from here the rows are only checked
        if self.spool is None:
            if self.batch.queued():
                self.batch = _Batch()
        else:
            self.batch.rows += 1
            if self.batch.rows == INSERT_CHUNK:
                self.flush()

    def flush(self) -> None:
        if self.spool is not None and self.batch.rows:
            self.spool.add(self.batch)
        self.batch = _Batch()

    def _check(self, row: CaptionRow) -> None:
        plan, existing, batch, add = self.plan, self.existing, self.batch, self.problems.add
        line, key = row.line, (row.image_key, row.system)
        image_rows = plan.images.get(row.image_key)
        if image_rows is None:
            image_rows = plan.images[row.image_key] = _ImageRows()
        # Images
        if row.image_key in existing.images:
            db_path = existing.images[row.image_key][1]
            if row.image_path and db_path and row.image_path != db_path:
                add(line, f"image {row.image_key!r} is already in the database with another "
                          f"file ({db_path})")
        elif row.image_key in plan.new_images:
            first = plan.new_images[row.image_key]
            if row.image_path and not _same_text(first, hash(row.image_path)):
                add(line, f"image {row.image_key!r} has another file at line {_line(first)}")
        elif row.image_path is None:
            if row.image_key not in self.rejected_images:
                add(line, f"unknown image_id {row.image_key!r}: not in the database and no "
                          "image path given")
        else:
            plan.new_images[row.image_key] = _packed(line, hash(row.image_path))
            batch.images.append((row.image_key, row.image_path))
        # References
        if row.references is not None:
            known = existing.references.get(row.image_key)
            first = plan.references.get(row.image_key)
            if known is not None and tuple(known) != row.references:
                add(line, f"references of image {row.image_key!r} differ from those already "
                          "in the database")
            elif first is not None:
                if not _same_text(first, hash(row.references)):
                    add(line, f"references of image {row.image_key!r} differ from line "
                              f"{_line(first)}")
            elif known is None:
                plan.references[row.image_key] = _packed(line, hash(row.references))
                batch.references.append((row.image_key, row.references))
        # Captions
        if row.caption_id is not None:
            other = plan.caption_ids.get(row.caption_id)
            db_key = existing.caption_ids.get(row.caption_id)
            if other is not None and other[1] != key:
                add(line, f"duplicate caption_id {row.caption_id!r} (line {other[0]} is "
                          "another caption)")
            elif db_key is not None and db_key != key:
                add(line, f"duplicate caption_id {row.caption_id!r}: the database already "
                          "uses it for another caption")
            plan.caption_ids.setdefault(row.caption_id, (line, key))
        first_row = image_rows.captions.get(row.system)
        if key in existing.captions:
            _, db_text, _ = existing.captions[key]
            if db_text != row.caption:
                add(line, f"duplicate caption for {_where(row)}: the database has "
                          f"{db_text!r}")
            elif row.rating is None:
                add(line, f"duplicate caption for {_where(row)}: already in the database")
        elif first_row is not None:
            first_line = _line(first_row)
            if not _same_text(first_row, hash(row.caption)):
                add(line, f"duplicate caption for {_where(row)}: line {first_line} has "
                          "another caption")
            elif (row.caption_id is not None
                  and plan.caption_ids[row.caption_id] != (first_line, key)):
                # (the first row that gives a caption_id claims it for its caption)
                add(line, f"caption_id {row.caption_id!r} differs from line {first_line}")
            elif row.rating is None or not _flagged(first_row):
                add(line, f"duplicate row for {_where(row)} (also line {first_line})")
        else:
            image_rows.captions[row.system] = _packed(line, hash(row.caption),
                                                      row.rating is not None)
            plan.captions += 1
            batch.captions.append((row.image_key, row.system, row.caption, row.caption_id))
        # Ratings
        if row.rating is not None:
            name, stage = row.rating.annotator, int(row.rating.stage)
            rating_id = plan.rating_id((row.system, name, stage))
            earlier = image_rows.ratings.get(rating_id)
            if (key, name, stage) in existing.ratings:
                add(line, f"duplicate rating: {_who(row.rating)} already rated this caption "
                          "in the database")
            elif earlier is not None:
                add(line, f"duplicate rating: {_who(row.rating)} also rated this caption at "
                          f"line {earlier}")
            else:
                image_rows.ratings[rating_id] = line
                plan.ratings += 1
                batch.ratings.append((row.image_key, row.system, row.rating))
                if name not in existing.annotators:
                    plan.annotators.add(name)
        self.workflow.add(row, key, plan)

    def finish(self) -> None:
        """The checks that need every row: who did the fluency round, and THUMB's protocol
        (not judged on part of a file: only when every row passed its own checks)."""
        self.workflow.check_checkers(self.plan)
        if not self.own_problems.items:
            _check_protocol(self.plan, self.existing, self.problems,
                            self.workflow.resolution_line)


def _check_protocol(plan: ImportPlan, existing: _Existing, problems: Problems,
                    resolution_lines: dict[CaptionKey, int]) -> None:
    """Imported ratings follow THUMB's protocol (`storage.rating.protocol`) as ratings made in the
    app do, judged on each image as it will be after the import; a breach is reported at
    the last line of the file that takes part in it. Final-stage ratings may come without
    a review (final scores from elsewhere); resolutions need both stages of their caption."""
    rated = {image: rows for image, rows in plan.images.items() if rows.ratings}
    systems: dict[str, list[str]] = {}  # image key -> its captions' systems, after the import
    for image, system in existing.captions:
        if image in rated:
            systems.setdefault(image, []).append(system)
    new_image = ImageState("", 1)
    # the write (annotator, stage) of each rating number, made once (a file has few)
    writes_of = [(name, Stage(stage)) for _, name, stage in plan.rating_keys]
    # the refusals of a state and writes, made once for the images alike (most images of
    # a large file): they judge who holds what, not which image, so the states are keyed
    # without their image's key; at most JUDGED_STATES kept
    judged: dict[tuple[ImageState, tuple[Write, ...]], list[Breach]] = {}
    for image in sorted(rated):
        rows = rated[image]
        lines: dict[Write, int] = {}  # (name, stage) -> its first line
        for number, line in rows.ratings.items():  # in the file's order
            lines.setdefault(writes_of[number], line)
        captions = [*systems.get(image, ()), *rows.captions]

        def complete(system: str, name: str, image: str = image,
                     rows: _ImageRows = rows) -> bool:
            return (plan.rating_ids.get((system, name, int(Stage.FIRST))) in rows.ratings
                    or ((image, system), name) in existing.complete_first)

        before = existing.states.get(image, new_image)
        raters = before.first | {name for name, stage in lines if stage == Stage.FIRST}
        after = replace(
            before, key="", takes=2 if image in plan.double_images else before.takes,
            complete=frozenset(name for name in raters
                               if all(complete(system, name) for system in captions)))
        writes = tuple(lines)
        breaches = judged.get((after, writes))
        if breaches is None:
            if len(judged) >= JUDGED_STATES:
                judged.clear()
            breaches = judged[after, writes] = refusals(after, writes, resolutions=False)
        for breach in breaches:
            taking_part = [lines[w] for w in breach.writes if w in lines]
            if taking_part:
                problems.add(max(taking_part), f"image {image!r}: {breach.detail}")
    stages: dict[CaptionKey, set[int]] = {key: set() for key in plan.resolutions}
    for key, _, stage in existing.ratings if stages else ():
        if key in stages:
            stages[key].add(stage)
    for key in plan.resolutions:
        found = stages[key] | {stage for (system, _, stage), _ in
                               plan.image_ratings(plan.images[key[0]])
                               if system == key[1]}
        refusal = resolution_refusal(found)
        if refusal:
            problems.add(resolution_lines[key], refusal)


class _WorkflowState:
    """Checks the workflow columns of an import (double-rating marks, broken-image flags,
    native-speaker flags, resolutions, fluency-round verdicts) against each other and the
    database."""

    def __init__(self, existing: _Existing, problems: Problems) -> None:
        self.existing, self.problems = existing, problems
        self.double_line: dict[str, tuple[int, bool]] = {}
        self.flags_line: dict[str, tuple[int, tuple[ImageFlagRow, ...]]] = {}
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
        if row.image_flags is not None:
            self._add_flags(row.image_key, line, row.image_flags, plan)
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
                              "fluency_round_by, fluency_round_at) differs from line "
                              f"{self.fluency_line[key][0]}")
            elif key in self.existing.fluency_checked:
                add(line, "this caption already has a fluency-round verdict in the database")
            else:
                self.fluency_line[key] = (line, verdict)
                plan.fluency_checks[key] = verdict
                if verdict.checker not in self.existing.annotators:
                    plan.annotators.add(verdict.checker)

    def _add_flags(self, image: str, line: int, flags: tuple[ImageFlagRow, ...],
                   plan: ImportPlan) -> None:
        """An image's flags, the same on each of its rows; a flag the database has already
        (same annotator, same reason) is kept as it is, one with another reason refused."""
        first = self.flags_line.setdefault(image, (line, flags))
        if first[0] != line:
            if first[1] != flags:
                self.problems.add(line, f"image_flags of image {image!r} differ from line "
                                        f"{first[0]}")
            return
        recorded = self.existing.flags.get(image, {})
        for flag in flags:
            reason = recorded.get(flag.annotator)
            if reason is None:
                plan.image_flags.append((image, flag))
                if flag.annotator not in self.existing.annotators:
                    plan.annotators.add(flag.annotator)
            elif reason != flag.reason:
                self.problems.add(line, f"image {image!r}: the database has a broken-image "
                                        f"flag by {flag.annotator!r} with another reason "
                                        f"({reason!r})")

    def check_checkers(self, plan: ImportPlan) -> None:
        """Only native speakers do the fluency round (`protocol.may_check_fluency`): a
        verdict by a checker that the file or the database records as not native is
        refused. The import records only what the file says, so a checker whom nothing
        records keeps an unknown native language (which that rule counts as no for new
        work); the verdict itself is the file's record of work done."""
        for line, verdict in self.fluency_line.values():
            name = verdict.checker
            native = plan.native.get(name, self.existing.native.get(name))
            if native is not None and not may_check_fluency(native):
                self.problems.add(line, f"fluency_round_by {name!r} is not a native English "
                                        "speaker")


def _settling_no_disagreement(connection: Connection, plan: ImportPlan,
                              image_ids: dict[str, int]) -> list[CaptionKey]:
    """The resolutions of the import whose caption's stage-1 values (the primary rater's,
    as `project_queues.primary_first_ratings` picks them) equal its stage-2 values: nothing
    to settle. Read once the rows are written, in the import's transaction, so that the
    ratings of the file and of the database are compared alike."""
    caption, rating = Caption.__table__, Rating.__table__
    keys, agreed = list(plan.resolutions), []
    for start in range(0, len(keys), RESOLUTIONS_AT_ONCE):
        part = keys[start:start + RESOLUTIONS_AT_ONCE]
        wanted = {(image_ids[image], system): (image, system) for image, system in part}
        ids = {wanted[row.image_id, row.system]: row.id for row in connection.execute(
            select(caption.c.id, caption.c.image_id, caption.c.system).where(
                caption.c.image_id.in_({image_id for image_id, _ in wanted})))
            if (row.image_id, row.system) in wanted}
        first = primary_first_ratings(connection, list(ids.values()))
        second = {row.caption_id: row._mapping for row in connection.execute(
            select(rating).where(rating.c.stage == int(Stage.SECOND),
                                 rating.c.caption_id.in_(ids.values())))}
        agreed += [key for key, caption_id in ids.items()
                   if caption_id in first and caption_id in second
                   and not disagree(first[caption_id], second[caption_id])]
    return agreed


def _rating_values(rating: RatingRow) -> dict[str, object]:
    return {"stage": int(rating.stage), "note": rating.note, "seconds": rating.seconds,
            **{field: getattr(rating, field) for field in RATING_VALUE_FIELDS}}


CAPTION_IDS = 2**31 - 1  # caption ids are drawn from 1..CAPTION_IDS (PostgreSQL's integer)
_ID_LOOKUP = 5_000  # drawn ids looked up in the caption table at a time


def unused_caption_ids(connection: Connection, count: int) -> list[int]:
    """`count` new caption ids, each drawn at random (`secrets`) from 1..CAPTION_IDS and
    none in use, in the caller's transaction: a team's annotators read caption ids, so an
    id must say nothing of when its caption was imported (the order of an image's ids
    would be the order of its systems in the file). An id the table or an earlier draw
    holds is drawn again."""
    caption = Caption.__table__
    drawn: list[int] = []
    seen: set[int] = set()
    while len(drawn) < count:
        fresh = [secrets.randbelow(CAPTION_IDS) + 1 for _ in range(count - len(drawn))]
        for start in range(0, len(fresh), _ID_LOOKUP):
            part = fresh[start:start + _ID_LOOKUP]
            seen.update(connection.execute(select(caption.c.id)
                                           .where(caption.c.id.in_(part))).scalars())
            for caption_id in part:
                if caption_id not in seen:
                    seen.add(caption_id)
                    drawn.append(caption_id)
    return drawn


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


class _Writer:
    """Writes an import's checked rows, a chunk at a time, inside its transaction; the
    ids it needs (images, annotators) are read back as they are made."""

    def __init__(self, connection: Connection, existing: _Existing, plan: ImportPlan, *,
                 rubric: Rubric) -> None:
        self.connection, self.plan, self.rubric = connection, plan, rubric
        self.now = utcnow()
        image, ref, caption = Image.__table__, ImageReference.__table__, Caption.__table__
        rating = Rating.__table__
        self.image_ids = {key: image_id for key, (image_id, _) in existing.images.items()}
        self.annotator_ids = dict(existing.annotators)
        self.marked: set[str] = set()  # new images written with their double-rating mark
        self.references = 0
        self._images = BulkInsert(connection, image.insert(),
                                  ("key", "path", "set_id", "double_rating"))
        self._references = BulkInsert(connection, ref.insert(), ("image_id", "position", "text"))
        self._captions = BulkInsert(connection, caption.insert(), (
            "id", "import_order", "image_id", "system", "text", "external_id"))
        # the captions' places in import order go on from the last import's
        self.import_order = connection.execute(
            select(func.coalesce(func.max(caption.c.import_order), 0))).scalar_one()
        self._ratings = _by_caption(connection, rating, [c.name for c in rating.columns
                                                         if c.name not in ("id", "caption_id")])
        self._rating_values: dict[int, tuple[RatingRow, tuple]] = {}

    def write(self, batch: _Batch) -> None:
        connection, plan = self.connection, self.plan
        image, annotator = Image.__table__, Annotator.__table__
        names = sorted(plan.annotators - self.annotator_ids.keys())
        if names:
            connection.execute(annotator.insert(),
                               [{"name": name, "created_at": self.now} for name in names])
            self.annotator_ids.update(connection.execute(
                select(annotator.c.name, annotator.c.id).where(annotator.c.name.in_(names))
            ).all())
        if batch.images:
            keys = [key for key, _ in batch.images]
            marked = plan.double_images.intersection(keys)
            self.marked |= marked
            self._images((key, path, plan.set_ids.get(key), key in marked)
                         for key, path in batch.images)
            made = dict(connection.execute(
                select(image.c.key, image.c.id).where(image.c.key.in_(keys))).all())
            # keyed by the rows' own keys, not the driver's copies of them (held till the end)
            self.image_ids.update((key, made[key]) for key in keys)
        image_ids = self.image_ids
        self.references += self._references(
            (image_ids[key], position, text)
            for key, texts in batch.references for position, text in enumerate(texts))
        # written in the order of their random ids: PostgreSQL returns rows read without
        # ORDER BY in the order they were written, which would be the file's
        first = self.import_order + 1
        self._captions(sorted(
            (new_id, place, image_ids[key], system, text, caption_id)
            for place, new_id, (key, system, text, caption_id) in zip(
                range(first, first + len(batch.captions)),
                unused_caption_ids(connection, len(batch.captions)),
                batch.captions, strict=True)))
        self.import_order += len(batch.captions)
        self._ratings(((image_ids[key], system, *self._values(rating))
                       for key, system, rating in batch.ratings), converted=True)

    def _values(self, rating: RatingRow) -> tuple:
        """A rating's driver values, made once for the rows that share a RatingRow (the
        reader shares equal ones). Kept by the object's id, with the object, so that no id
        is reused while it is kept; at most a chunk's worth (timestamped ones all differ)."""
        kept = self._rating_values.get(id(rating))
        if kept is None:
            if len(self._rating_values) == INSERT_CHUNK:
                self._rating_values.clear()
            given = {"annotator_id": self.annotator_ids[rating.annotator],
                     "rubric": self.rubric.signature,
                     "created_at": rating.created_at or self.now,
                     "updated_at": rating.updated_at or rating.created_at or self.now,
                     **_rating_values(rating)}
            kept = self._rating_values[id(rating)] = (rating, self._ratings.driver_values(
                tuple(given[name] for name in self._ratings.names[2:]), first=2))
        return kept[1]

    def finish(self, source: Path, digest: Future[str | None], actor: str,
               rubric_before: str | None = None) -> ImportSummary:
        """What needs every row (double-rating marks of images already in the database,
        native-speaker flags, resolutions, fluency-round verdicts), then the import's
        one event: which file (its digest), what it added, and the project's rubric it
        replaced (`rubric_before`), if any."""
        connection, plan = self.connection, self.plan
        image, annotator = Image.__table__, Annotator.__table__
        marked = [{"image_key": key} for key in sorted(plan.double_images - self.marked)]
        if marked:
            connection.execute(update(image).where(image.c.key == bindparam("image_key"))
                               .values(double_rating=True), marked)
        for name, native in plan.native.items():
            connection.execute(update(annotator).where(annotator.c.name == name)
                               .values(native_english=native))
        ids = self.annotator_ids
        _by_caption(connection, Resolution.__table__,
                    ("resolver_id", "reasons", "note", "created_at"))(
            (self.image_ids[key[0]], key[1], ids[r.annotator], ",".join(r.resolution_reasons),
             r.resolution_note, r.resolved_at or self.now)
            for key, r in plan.resolutions.items())
        _by_caption(connection, FluencyCheck.__table__,
                    ("checker_id", "fluency", "fluency_type", "created_at", "rubric"))(
            (self.image_ids[key[0]], key[1], ids[v.checker], v.fluency, v.fluency_type,
             v.checked_at or self.now, self.rubric.signature)
            for key, v in plan.fluency_checks.items())
        for key, flag in plan.image_flags:
            flag_image(connection, self.image_ids[key], ids[flag.annotator], actor,
                       flag.reason, flagged_at=flag.flagged_at)
        rating = Rating.__table__
        kept = 0 if rubric_before is None else connection.execute(
            select(func.count()).where(rating.c.rubric == rubric_before)).scalar_one()
        summary = ImportSummary(
            file=source, images=len(plan.new_images), captions=plan.captions,
            references=self.references, annotators=len(plan.annotators),
            ratings=plan.ratings, resolutions=len(plan.resolutions),
            fluency_checks=len(plan.fluency_checks), double_images=len(plan.double_images),
            image_flags=len(plan.image_flags), rubric_before=rubric_before,
            rubric_now=None if rubric_before is None else self.rubric.signature,
            ratings_on_rubric_before=kept)
        log_change(connection, actor=actor, action="import", table="import",
                   new={str(source): {"sha256": digest.result(),
                                      **{k: v for k, v in vars(summary).items()
                                         if k != "file"}}})
        return summary


def import_caption_rows(engine: Engine, rows: Iterable[CaptionRow], problems: Problems, *,
                        actor: str, rubric: Rubric, set_ids: dict[str, int] | None = None,
                        rejected_images: set[str] | None = None,
                        choose_rubric: bool = False,
                        progress: ImportProgress | None = None) -> ImportSummary:
    """Check rows that passed their own checks against each other, the database and
    THUMB's protocol, and once every row has passed, write them, all in one write
    transaction that locks the images first: all or nothing. `rows` is iterated once on
    each attempt of the transaction (a list, or `_FileRows`, which reads its file afresh);
    while it is read, `problems` gets the problems of the rows it leaves out and
    `rejected_images` their image keys (those images are not reported as unknown). On any
    problem raise InputError listing every one and leave the database unchanged. With
    `choose_rubric`, `rubric` becomes the project's rubric in the same transaction.
    `progress` hears of the writing, a chunk of rows at a time (WRITING)."""
    rejected = rejected_images if rejected_images is not None else set()
    digest = _digest_beside(problems.file)  # once: a retried transaction reads no file twice

    def write(connection: Connection) -> ImportSummary:
        before = project_rubric(connection).signature if choose_rubric else None
        if choose_rubric:
            register_rubric(connection, rubric, choose=True)
        existing = _Existing(connection)
        if not existing.images:  # a new project: its rubric was nobody's choice yet
            before = None
        plan = ImportPlan(set_ids=set_ids or {})
        found = Problems(problems.file)  # afresh on each attempt
        with tempfile.TemporaryFile(prefix="thumb-import-") as spooled:
            spool = _Spool(spooled)
            checks = _Pass(existing, found, problems, plan, spool, rejected)
            for row in rows:
                checks.add(row)
            checks.finish()
            if problems.items or found.items:
                raise InputError([*problems.items, *found.items])
            checks.flush()
            writer = _Writer(connection, existing, plan, rubric=rubric)
            bulk = plan.ratings >= BULK_RATINGS
            with (large_cache(connection),
                  rating_value_triggers_suspended(connection) if bulk else nullcontext()):
                for written, batch in enumerate(spool, start=1):
                    writer.write(batch)
                    if progress is not None:
                        progress(WRITING, written, spool.chunks)
            for key in _settling_no_disagreement(connection, plan, writer.image_ids):
                found.add(checks.workflow.resolution_line[key],
                          "a resolution settles a disagreement, but this caption's stage-1 "
                          "and stage-2 values are the same")
            if found.items:  # (the transaction rolls back: nothing stays written)
                raise InputError(sorted(found.items, key=lambda problem: problem.line))
            return writer.finish(problems.file, digest, actor,
                                 rubric_before=None if before in (None, rubric.signature)
                                 else before)

    return run_write(engine, write, lock_wait_ms=SQLITE_BUSY_TIMEOUT_MS)


class _FileRows:
    """The rows of a CSV/JSONL file, read afresh each time they are iterated (once per
    attempt of the import's transaction) and streamed: each record gets its own checks
    (`RowReader`); the problems of those left out go to `problems`, their image keys to
    `rejected`. At the end, a file whose columns are wrong raises InputError naming them
    (and the records' own problems: the fields' would only repeat the columns')."""

    def __init__(self, path: Path, reader: RowReader,
                 progress: ImportProgress | None = None) -> None:
        self.path, self.reader = path, reader
        self.progress = progress
        self.problems = Problems(path)
        self.rejected: set[str] = set()

    def __iter__(self) -> Iterator[CaptionRow]:
        path, problems = self.path, self.problems
        problems.items.clear()
        self.rejected.clear()
        self.reader.refused_images.clear()
        repeats: dict[int, tuple[int, int]] = {}  # an image's first line -> rows, last line
        field_problems: list[Problem] = []
        first_seen: dict[str, int] = {}
        progress = self.progress
        records = ((line, normalise_keys(raw)) for line, raw in iter_records(
            path, schema=JSON_SCHEMA, problems=problems,
            progress=None if progress is None else (
                lambda done, total: progress(CHECKING, done, total))))
        # (closed, and its image workers ended, even if the rows are not read to the end)
        with closing(self.reader.images_checked_ahead(records)) as checked_ahead:
            for line, record in checked_ahead:
                if not first_seen.keys() >= record.keys():
                    for key in record:
                        first_seen.setdefault(key, line)
                try:
                    yield self.reader.row(line, record)
                except ImageRefusedBefore as repeat:
                    rows, _ = repeats.get(repeat.first_line, (0, line))
                    repeats[repeat.first_line] = (rows + 1, line)
                    self.rejected.add(str(record.get("image_id") or record.get("image")
                                          or "").strip())
                except RowError as exc:
                    problems.add(line, str(exc))
                    field_problems.append(problems.items[-1])
                    self.rejected.add(str(record.get("image_id") or record.get("image") or "")
                                      .strip())
        _count_repeats(problems, field_problems, repeats)
        # (when records were left out for their own problems, their columns are unknown)
        records_left_out = len(problems.items) > len(field_problems)
        columns = Problems(path)
        unknown = unknown_columns(set(first_seen))
        if unknown and path.suffix.lower() == ".csv":
            columns.add(1, f"unknown column(s): {', '.join(unknown)}")
        else:  # JSON lines and Parquet: at the first record that has the key
            for key in unknown:
                columns.add(first_seen[key], f"unknown column(s): {key}")
        for message in [] if records_left_out else missing_columns(set(first_seen), unknown):
            columns.add(1, message)
        if columns.items:  # every row would repeat it
            fields = set(field_problems)
            raise InputError([*(p for p in problems.items if p not in fields),
                              *columns.items])


def _count_repeats(problems: Problems, field_problems: list[Problem],
                   repeats: dict[int, tuple[int, int]]) -> None:
    """Each refused image's problem, at the first row naming it, says how many more rows
    name it (they are left out, not listed: `ImageRefusedBefore`). A record's problems are
    one Problem at its line, the same object in both lists: found by line and identity,
    not searched for (a file of 200,000 refused images has as many)."""
    if not repeats:
        return
    listed_at = {id(problem): index for index, problem in enumerate(problems.items)}
    for field_index, problem in enumerate(field_problems):
        if problem.line not in repeats:
            continue
        rows, last = repeats.pop(problem.line)
        counted = replace(problem, message=f"{problem.message}; {rows} more row"
                          f"{'s name' if rows > 1 else ' names'} this image, the last "
                          f"at line {last}")
        problems.items[listed_at[id(problem)]] = field_problems[field_index] = counted


def import_captions(
    engine: Engine, path: str | Path, *, actor: str, rubric: Rubric | None = None,
    allow_outside_images: bool = False, progress: ImportProgress | None = None,
) -> ImportSummary:
    """Import a CSV/JSONL file of captions (and optional ratings). On any problem raise
    InputError listing every `file:line: problem` — all of them, found in one pass — and
    leave the database unchanged. Image paths must stay inside the file's folder unless
    `allow_outside_images`. Ratings are read and stored under `rubric`, which becomes the
    project's rubric; by default, under the project's rubric. The file is streamed in one
    pass of checks that spools its rows a chunk at a time; they are written in the same
    transaction once every row has passed, so a refused file writes nothing: what is held
    is one chunk of rows, and the keys and lines of those before it that the checks
    compare with. A CSV file of `import_scan.QUICK_BYTES` or more first gets the quick
    check of its values (`storage.imports.import_scan`): if it finds problems, InputError lists
    those (with the note that the other checks come once they are fixed), in seconds.
    `progress(phase, done, total)` hears how far each phase is: QUICK_CHECK (bytes of the
    file parsed), CHECKING (bytes of the file read; rows of a Parquet file), then WRITING
    (chunks of rows)."""
    path = Path(path)
    chosen = rubric
    rubric = chosen or project_rubric(engine)
    found = quick_problems(path, rubric, progress=None if progress is None else (
        lambda done, total: progress(QUICK_CHECK, done, total)))
    if found:
        raise InputError(found, note=QUICK_NOTE)
    rows = _FileRows(path, RowReader(path.parent, rubric,
                                     allow_outside_images=allow_outside_images), progress)
    return import_caption_rows(engine, rows, rows.problems, actor=actor, rubric=rubric,
                               rejected_images=rows.rejected, choose_rubric=chosen is not None,
                               progress=progress)
