"""THUMB's two-stage protocol, checked in one place by the rating sessions and by `thumb
import`: who may rate an image at stage 1, review it at stage 2 and resolve it.

The rules are invariants of an image's `ImageState` (who holds it at each stage). An
action is refused when it would break a rule that the image did not already break, so a
database that an older version let into a bad state still lets its holders go on. The
sessions check one annotator's write inside the write transaction that makes it, after
locking the image (`check_may_rate`); an import checks all of a file's ratings at once
(`refusals` with many writes). Captions of one image with the same text are one caption
to the annotators (`group_identical`)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    FromClause,
    Integer,
    Result,
    Select,
    String,
    Table,
    and_,
    bindparam,
    case,
    column,
    exists,
    false,
    func,
    or_,
    select,
    text,
    type_coerce,
    union,
    union_all,
)
from sqlalchemy.exc import DBAPIError

from rubrics import SCORE_KEYS
from storage.db.engine import LOCK_NOT_AVAILABLE, LockHeld
from storage.models import Annotator, Assignment, Caption, Image, ImageFlag, Rating, Stage
from storage.rating.image_flags import flagged_image_ids

STAGES = tuple(Stage)  # iterating the enum itself is slow, and states are built per image

if TYPE_CHECKING:  # pandas loads where a frame is built: the sessions need none
    import pandas as pd

R = TypeVar("R")
Write = tuple[str, Stage]  # an annotator's rating of the image at a stage


# -- what a rating is and who may do what: each rule's one expression -----------------------

def is_complete(values: Mapping[str, object]) -> bool:
    """A rating is complete when every score (each dimension of its rubric) is set;
    penalties and the note may stay at their defaults."""
    return all(values.get(key) is not None for key in SCORE_KEYS)


def is_started(values: Mapping[str, object]) -> bool:
    """A rating is started once any score is set (a half-scored caption)."""
    return any(values.get(key) is not None for key in SCORE_KEYS)


def complete_clause(rating: Table | None = None) -> ColumnElement[bool]:
    """`is_complete` in SQL, over the rating table (or an alias of it)."""
    rating = Rating.__table__ if rating is None else rating
    return and_(*(rating.c[key].is_not(None) for key in SCORE_KEYS))


def started_clause(rating: Table | None = None) -> ColumnElement[bool]:
    """`is_started` in SQL, over the rating table (or an alias of it)."""
    rating = Rating.__table__ if rating is None else rating
    return or_(*(rating.c[key].is_not(None) for key in SCORE_KEYS))


def holding_clause(claims: FromClause | None = None) -> ColumnElement[bool]:
    """An assignment row that holds its image (`_read_holders` in Python): a claim at
    stage 1 or 2 not given up, over the assignment table (or a query of its columns)."""
    claims = Assignment.__table__ if claims is None else claims
    return and_(claims.c.released_at.is_(None), claims.c.stage <= int(Stage.SECOND))


def complete_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """`is_complete` over a DataFrame of ratings (one column per score): its complete
    rows."""
    return frame.dropna(subset=list(SCORE_KEYS))


def may_check_fluency(native_english: bool | None) -> bool:
    """Only a native English speaker does the fluency round (an annotator whose native
    language is unknown is not one)."""
    return bool(native_english)


class ProtocolError(PermissionError):
    """An action the THUMB protocol does not allow this annotator."""


class ImageTaken(ProtocolError):
    """Another annotator holds the image at this stage: the screens move on to the next."""


@dataclass(frozen=True)
class Breach:
    """A rule an image breaks: `reason` speaks to the annotator whose action a session
    refuses, `detail` describes the image for an import's report, `writes` are the
    ratings that take part (an import reports at the last line holding one)."""

    rule: str
    writes: frozenset[Write]
    reason: str
    detail: str
    taken: bool = False

    def error(self) -> ProtocolError:
        return (ImageTaken if self.taken else ProtocolError)(self.reason)


@dataclass(frozen=True)
class ImageState:
    """Who holds an image at each stage. Holders at stages 1 and 2 are those who rated it
    there or claim it (opened it and have not left it untouched); `complete` are stage-1
    holders who scored every caption; `closed` once anyone opened it for review or rated
    it at stage 2 or final (its stage-1 scores have been seen)."""

    key: str
    takes: int
    first: frozenset[str] = frozenset()
    second: frozenset[str] = frozenset()
    final: frozenset[str] = frozenset()
    complete: frozenset[str] = frozenset()
    closed: bool = False
    captions: int = field(default=0, compare=False)

    @property
    def to_rate(self) -> bool:
        """The image has captions: an image that only BISON items name has none, and no
        stage has work on it."""
        return self.captions > 0

    @property
    def stage_one_over(self) -> bool:
        """As many annotators as the image takes have rated every caption of it."""
        return len(self.complete & self.first) >= self.takes

    def adding(self, writes: Iterable[Write]) -> ImageState:
        added: dict[Stage, set[str]] = {stage: set() for stage in STAGES}
        for name, stage in writes:
            added[stage].add(name)
        return ImageState(self.key, self.takes, self.first | added[Stage.FIRST],
                          self.second | added[Stage.SECOND], self.final | added[Stage.FINAL],
                          self.complete, self.closed, self.captions)


def _at(stage: Stage, names: Iterable[str]) -> frozenset[Write]:
    return frozenset((name, stage) for name in names)


def _breaches(state: ImageState) -> list[Breach]:
    """Every invariant the state breaks, in the order a refusal names them."""
    first, second, final = state.first, state.second, state.final
    found = [Breach("own review", _at(Stage.SECOND, [name]),
                    "you rated this image at stage 1: another annotator must review it",
                    f"{name!r} rated it at stage 1 and cannot review it")
             for name in sorted(first & second)]
    found += [Breach("own resolution", _at(Stage.FINAL, [name]),
                     "you rated or reviewed this image: someone else must resolve its "
                     "disagreements", f"{name!r} rated or reviewed it and cannot resolve it")
              for name in sorted(final & (first | second))]
    if len(first) > state.takes:
        found.append(Breach(
            "stage-1 capacity", _at(Stage.FIRST, first), "another annotator took this image",
            f"{len(first)} annotators rate it at stage 1 ({', '.join(sorted(first))}) but it "
            f"takes {state.takes}" + ("" if state.takes == 2 else
                                      " (double_rating=true takes two)"), taken=True))
    if len(second) > 1:
        found.append(Breach("one reviewer", _at(Stage.SECOND, second),
                            "another annotator took this image",
                            f"two reviewers at stage 2 ({', '.join(sorted(second))})",
                            taken=True))
    if second and not state.stage_one_over:
        found.append(Breach(
            "review after stage 1", _at(Stage.FIRST, first) | _at(Stage.SECOND, second),
            "this image's stage-1 rating is not complete yet",
            f"stage 2 before its stage 1 is over ({len(state.complete & first)} of "
            f"{state.takes} complete stage-1 ratings)"))
    return found


def refusals(state: ImageState, writes: Collection[Write], *,
             resolutions: bool = True) -> list[Breach]:
    """The rules that these ratings of the image would break and that it does not break
    already. Stage 1 is closed once the image was opened for review. With `resolutions`,
    final-stage ratings settle disagreements, so the image must have been reviewed (an
    import may also bring final scores from elsewhere, such as the THUMB release)."""
    known = {(breach.rule, breach.writes) for breach in _breaches(state)}
    after = state.adding(writes)
    found = [breach for breach in _breaches(after) if (breach.rule, breach.writes) not in known]
    stage_one = [name for name, stage in writes if stage == Stage.FIRST]
    if state.closed and stage_one:
        found.insert(0, Breach("closed stage 1", _at(Stage.FIRST, stage_one),
                               "this image has been opened for review: its stage 1 is closed",
                               "it has been opened for review: its stage 1 is closed"))
    if resolutions and not after.second and any(s == Stage.FINAL for _, s in writes):
        found.append(Breach("resolution after review", _at(Stage.FINAL, after.final),
                            "this image has not been reviewed: there is nothing to resolve",
                            "it has not been reviewed: there is nothing to resolve"))
    return found


def resolution_refusal(caption_stages: Collection[int]) -> str | None:
    """A resolution settles a caption's stage-1/stage-2 disagreement, so needs both."""
    if not {int(Stage.FIRST), int(Stage.SECOND)} <= set(caption_stages):
        return "a resolution needs stage-1 and stage-2 ratings of the caption"
    return None


# On a PostgreSQL team database (`storage.team`) row-level security shows an annotator
# only some ratings, so who holds an image comes from this function, which the team's
# owner role runs over every rating and which returns `rating_progress()`'s rows (names
# and counts, never a score) for the images in its array argument (NULL: all).
PROGRESS_FUNCTION = "thumb_rating_progress"


def rating_progress(images: ColumnElement[bool] | None = None) -> Select:
    """Per image, annotator and stage: how many of their ratings are complete (the
    protocol's view of the ratings), for the images where `images` holds."""
    caption, rating, annotator = Caption.__table__, Rating.__table__, Annotator.__table__
    complete = func.count(rating.c.id).filter(complete_clause(rating))
    query = (select(caption.c.image_id, annotator.c.name, rating.c.stage,
                    type_coerce(complete, BigInteger).label("complete"))
             .join(caption, rating.c.caption_id == caption.c.id)
             .join(annotator, rating.c.annotator_id == annotator.c.id)
             .group_by(caption.c.image_id, annotator.c.name, rating.c.stage))
    return query if images is None else query.where(images)


def served_by_team(connection: Connection, function: str) -> bool:
    """Whether this database has the team's function of that name (a PostgreSQL team
    database, `storage.team`), asked once per database connection."""
    if connection.dialect.name != "postgresql":
        return False
    info = connection.connection.info
    if function not in info:
        info[function] = connection.execute(
            text("SELECT to_regproc(:function) IS NOT NULL"), {"function": function}
        ).scalar_one()
    return info[function]


@cache
def _queries(some: bool, served: bool) -> dict[str, Select]:
    """The statements that read image states (of all images, or of the ids bound to
    `ids`), built once: building them costs more than running them on one image. With
    `served`, the ratings are read through `PROGRESS_FUNCTION`."""
    image, caption = Image.__table__, Caption.__table__
    assignment, annotator = Assignment.__table__, Annotator.__table__
    ids = bindparam("ids", expanding=True)
    if served:
        from sqlalchemy.dialects import postgresql  # a team database's (SQLite needs none)

        progress = getattr(func, PROGRESS_FUNCTION)(
            bindparam("id_array", type_=postgresql.ARRAY(Integer)) if some else None
        ).table_valued(column("image_id", Integer), column("name", String),
                       column("stage", Integer), column("complete", Integer))
        ratings = select(progress.c.image_id, progress.c.name, progress.c.stage,
                         progress.c.complete)
    else:
        ratings = rating_progress(caption.c.image_id.in_(ids) if some else None)
    queries = {
        "lock": select(image.c.id).order_by(image.c.id).with_for_update(),
        "images": select(image.c.id, image.c.key, image.c.double_rating).order_by(image.c.id),
        "captions": select(caption.c.image_id, func.count().label("captions"))
        .group_by(caption.c.image_id),
        "claims": (select(assignment.c.image_id, annotator.c.name, assignment.c.stage,
                          assignment.c.released_at)
                   .join(annotator, assignment.c.annotator_id == annotator.c.id)),
    }
    if some:
        image_of = {"lock": image.c.id, "images": image.c.id, "captions": caption.c.image_id,
                    "claims": assignment.c.image_id}
        queries = {name: query.where(image_of[name].in_(ids))
                   for name, query in queries.items()}
    return {**queries, "ratings": ratings}


# On a team database row-level security shows an annotator's role only the images that
# this function returns for it (`holdable_images`), and the captions, claims and flags of
# those images; the team's owner role runs it over every row.
HOLDABLE_FUNCTION = "thumb_holdable_images"


def holdable_images(name: ColumnElement[str]) -> Select:
    """The ids of the images the annotator `name` may hold now or has held: those they
    rated, claim or claimed, or flagged; those still open at stage 1 (not closed, fewer
    holders than it takes); those waiting for a reviewer (stage 1 over, no reviewer);
    those reviewed (open to resolution and the fluency round). It reads the image states
    from the queries `read_states` reads, and it is the server's coarse bound of
    `open_images`: what `refusals` lets an annotator open at stage 1 or 2 is among them
    (their own capacity breaches and reviews they hold are theirs already)."""
    image, flag = Image.__table__, ImageFlag.__table__
    queries = _queries(False, False)
    # each read once (a CTE that the parts share), not once per part
    ratings, claims = queries["ratings"].cte("ratings"), queries["claims"].cte("claims")
    captions = queries["captions"].subquery()
    holders = union(  # each (image, name, stage) once
        select(ratings.c.image_id, ratings.c.name, ratings.c.stage),
        select(claims.c.image_id, claims.c.name, claims.c.stage)
        .where(holding_clause(claims))
    ).subquery()
    counts = (select(holders.c.image_id,
                     func.count().filter(holders.c.stage == int(Stage.FIRST)).label("first"),
                     func.count().filter(holders.c.stage == int(Stage.SECOND)).label("second"))
              .group_by(holders.c.image_id).subquery())
    complete = (select(ratings.c.image_id, func.count().label("complete"))
                .join(captions, captions.c.image_id == ratings.c.image_id)
                .where(ratings.c.stage == int(Stage.FIRST),
                       ratings.c.complete == captions.c.captions)
                .group_by(ratings.c.image_id).subquery())
    closed = union_all(select(ratings.c.image_id).where(ratings.c.stage >= int(Stage.SECOND)),
                       select(claims.c.image_id).where(claims.c.stage >= int(Stage.SECOND)))
    theirs = union_all(select(holders.c.image_id).where(holders.c.name == name),
                       select(claims.c.image_id).where(claims.c.name == name),
                       select(flag.c.image_id).join(Annotator.__table__)
                       .where(Annotator.__table__.c.name == name))
    takes = takes_clause(image)
    first, second = func.coalesce(counts.c.first, 0), func.coalesce(counts.c.second, 0)
    return (select(image.c.id.label("image_id"))
            .outerjoin(counts, counts.c.image_id == image.c.id)
            .outerjoin(complete, complete.c.image_id == image.c.id)
            .where(or_(image.c.id.in_(theirs),
                       and_(image.c.id.not_in(closed), first < takes),
                       and_(func.coalesce(complete.c.complete, 0) >= takes, second == 0),
                       image.c.id.in_(select(ratings.c.image_id)
                                      .where(ratings.c.stage == int(Stage.SECOND))))))


def _run(connection: Connection, name: str, image_ids: Collection[int] | None) -> Result:
    queries = _queries(image_ids is not None, served_by_team(connection, PROGRESS_FUNCTION))
    if image_ids is None:
        return connection.execute(queries[name])
    ids = sorted(image_ids)
    return connection.execute(queries[name], {"ids": ids, "id_array": ids})


# The login roles of the other sessions whose open transactions hold row locks on the
# images given (NULL: any): a row lock writes its transaction's id into the row's xmax, and
# that session also holds a lock on the image table. Any role may read pg_locks and the
# role names in pg_stat_activity, and an image row that a role waits for is one it reads,
# so the waiting annotator's own role runs it.
_IMAGE_LOCK_HOLDERS = text(
    "SELECT DISTINCT activity.usename::text FROM image "
    "JOIN pg_locks AS xact ON xact.locktype = 'transactionid' AND xact.granted "
    "AND xact.transactionid = image.xmax "
    "JOIN pg_locks AS on_table ON on_table.pid = xact.pid AND on_table.granted "
    "AND on_table.locktype = 'relation' AND on_table.relation = 'image'::regclass "
    "AND on_table.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "JOIN pg_stat_activity AS activity ON activity.pid = xact.pid "
    "WHERE xact.pid <> pg_backend_pid() AND (CAST(:ids AS integer[]) IS NULL "
    "OR image.id = ANY(CAST(:ids AS integer[]))) ORDER BY 1")


def lock_images(connection: Connection, image_ids: Collection[int] | None = None) -> None:
    """Lock the image rows (all, or those given) until the transaction ends, in id order so
    that two lockers never deadlock: SELECT … FOR UPDATE on PostgreSQL; on SQLite the write
    transaction (BEGIN IMMEDIATE) already holds the whole database. A PostgreSQL lock not
    had within the lock wait raises LockHeld naming who holds the rows, read on a
    connection of its own (this transaction is aborted)."""
    if connection.dialect.name == "sqlite":
        return
    try:
        _run(connection, "lock", image_ids).all()
    except DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) != LOCK_NOT_AVAILABLE:
            raise
        ids = None if image_ids is None else sorted(image_ids)
        with connection.engine.connect() as reader:
            holders = reader.execute(_IMAGE_LOCK_HOLDERS, {"ids": ids}).scalars().all()
        raise LockHeld(holders) from exc


def _takes(double_rating: bool) -> int:
    """How many annotators rate the image at stage 1: two where it is marked for double
    rating."""
    return 2 if double_rating else 1


def takes_clause(image: FromClause | None = None) -> ColumnElement[int]:
    """`_takes` in SQL, of the rows of `image` (the image table by default)."""
    image = Image.__table__ if image is None else image
    return case((image.c.double_rating, 2), else_=1)


# An image state's holders, the fields of `ImageState` from `first` to `closed`: all that
# `refusals` reads of a state besides `takes` (not the key nor the captions).
Holders = tuple[frozenset[str], frozenset[str], frozenset[str], frozenset[str], bool]
NO_ONE: frozenset[str] = frozenset()
NOBODY: Holders = (NO_ONE, NO_ONE, NO_ONE, NO_ONE, False)


def _read_holders(connection: Connection, image_ids: Collection[int] | None,
                  sizes: Mapping[int, int]) -> dict[int, Holders]:
    """image id -> its holders, for the images (all, or those given) that anyone holds or
    that are closed; most images are held by nobody (`NOBODY`). `sizes`: image id -> its
    number of captions, which a complete stage-1 rating covers."""
    held: dict[tuple[int, int], frozenset[str]] = {}
    complete: dict[int, frozenset[str]] = {}
    closed: set[int] = set()
    grown: dict[tuple[frozenset[str], str], frozenset[str]] = {}

    def add(into: dict, key: object, name: str) -> None:
        """`name` added to the holders at `key`; most images share a few sets of holders
        (one annotator each), so each set is built once and shared."""
        before = into.get(key, NO_ONE)
        after = grown.get((before, name))
        if after is None:
            after = grown[before, name] = before | {name}
        into[key] = after

    # fetched whole: row by row costs more than the reading on a large project
    for image_id, name, stage, done in _run(connection, "ratings", image_ids).all():
        add(held, (image_id, stage), name)
        if stage == Stage.FIRST and done == sizes.get(image_id):
            add(complete, image_id, name)
        if stage >= Stage.SECOND:
            closed.add(image_id)
    for image_id, name, stage, released_at in _run(connection, "claims", image_ids).all():
        if stage >= Stage.SECOND:
            closed.add(image_id)  # the reviewer saw the stage-1 scores
        if released_at is None and stage <= Stage.SECOND:
            add(held, (image_id, stage), name)
    first, second, final = map(int, STAGES)  # (an enum member's lookup is slow)
    touched = {image_id for image_id, _ in held} | closed
    return {image_id: (held.get((image_id, first), NO_ONE),
                       held.get((image_id, second), NO_ONE),
                       held.get((image_id, final), NO_ONE),
                       complete.get(image_id, NO_ONE), image_id in closed)
            for image_id in touched}


def read_states(connection: Connection, image_ids: Collection[int] | None = None, *,
                lock: bool = False) -> dict[int, ImageState]:
    """image id -> its state, for all images or those given. With `lock`, the images are
    locked first (`lock_images`), so the state stays true until the write it guards
    commits."""
    if lock:
        lock_images(connection, image_ids)
    base = {row.id: row for row in _run(connection, "images", image_ids).all()}
    sizes = dict(_run(connection, "captions", image_ids).all())
    holders = _read_holders(connection, image_ids, sizes)
    return {image_id: ImageState(row.key, _takes(row.double_rating),
                                 *holders.get(image_id, NOBODY), sizes.get(image_id, 0))
            for image_id, row in base.items()}


def has_rated(connection: Connection, annotator_id: int, image_id: int, stage: int) -> bool:
    """Whether the annotator has any rating of the image's captions at `stage`: a claim on
    an image with none is untouched, and may be given up."""
    rating, caption = Rating.__table__, Caption.__table__
    return connection.execute(
        select(rating.c.id).join(caption, rating.c.caption_id == caption.c.id)
        .where(caption.c.image_id == image_id, rating.c.annotator_id == annotator_id,
               rating.c.stage == int(stage)).limit(1)).first() is not None


def is_retired(connection: Connection, annotator: str) -> bool:
    """Whether the lead retired the annotator (`thumb annotator retire`): they take no new
    claim, and their work and history stay."""
    table = Annotator.__table__
    return connection.execute(select(table.c.retired_at).where(
        table.c.name == annotator)).scalar() is not None


def check_may_rate(connection: Connection, annotator: str, stage: Stage, image_id: int, *,
                   lock: bool = True) -> None:
    """Raise ProtocolError (ImageTaken when another annotator holds the image) unless the
    annotator may rate this image at `stage` now: not retired, and the image's state
    allows it. It locks the image first: call it in the write transaction of the write it
    guards, before that write (without `lock` it only reads: a refusal is final, a pass
    must be checked again under the lock)."""
    state = read_states(connection, [image_id], lock=lock).get(image_id)
    if is_retired(connection, annotator):
        raise ProtocolError(f"{annotator} is retired: a retired annotator takes no new "
                            "image")
    if state is None:  # on a team database: an image the annotator's role may not hold
        raise ImageTaken("another annotator took this image")
    found = refusals(state, [(annotator, stage)])
    if found:
        raise found[0].error()


def may_rate_clause(name: ColumnElement[str], image_id: ColumnElement[int],
                    stage: ColumnElement[int]) -> ColumnElement[bool]:
    """`check_may_rate` in SQL: true where the annotator `name` may write at `stage` on
    the image now (not retired, and `refusals` finds no rule that the write would newly
    break). A team's server asks it of every rating and claim an annotator's role writes
    (`storage.team`), so that `psql` cannot do what a session may not;
    `tests/test_protocol_sql.py` holds it to `check_may_rate` over many image states.

    Only `name` can join a set of holders, so each rule of `_breaches` is new exactly
    where `name` joins the set that breaks it: a second stage-1 holder more than the image
    takes, a second reviewer, one who rated at both stages 1 and 2, or rated or reviewed
    and resolves; a review before stage 1 is over (also a stage-1 holder joining an image
    already under such a review); then stage 1 once closed, and a resolution before any
    review."""
    caption, image = Caption.__table__, Image.__table__
    assignment, annotator = Assignment.__table__, Annotator.__table__
    # each read once (CTEs that the rules share), not once per rule
    ratings = rating_progress(caption.c.image_id == image_id).cte("image_ratings")
    claims = (select(annotator.c.name, assignment.c.stage, assignment.c.released_at)
              .join(annotator, assignment.c.annotator_id == annotator.c.id)
              .where(assignment.c.image_id == image_id).cte("image_claims"))
    holders = union(select(ratings.c.name, ratings.c.stage),
                    select(claims.c.name, claims.c.stage).where(holding_clause(claims))
                    ).cte("image_holders")

    def held(at: Stage, *where: ColumnElement[bool]) -> ColumnElement[int]:
        return (select(func.count()).select_from(holders)
                .where(holders.c.stage == int(at), *where).scalar_subquery())

    def holds(at: Stage) -> ColumnElement[bool]:
        return held(at, holders.c.name == name) > 0

    first, second, final = (holds(at) for at in STAGES)
    writes = {at: stage == int(at) for at in STAGES}
    joins_first, joins_second = writes[Stage.FIRST] & ~first, writes[Stage.SECOND] & ~second
    after_first, after_second = first | writes[Stage.FIRST], second | writes[Stage.SECOND]
    after_final = final | writes[Stage.FINAL]
    captions = select(func.count()).where(caption.c.image_id == image_id).scalar_subquery()
    complete = (select(func.count()).select_from(ratings)
                .where(ratings.c.stage == int(Stage.FIRST), ratings.c.complete == captions)
                .scalar_subquery())
    takes = select(takes_clause()).where(image.c.id == image_id).scalar_subquery()
    closed = or_(exists().where(ratings.c.stage >= int(Stage.SECOND)),
                 exists().where(claims.c.stage >= int(Stage.SECOND)))
    retired = exists().where(annotator.c.name == name, annotator.c.retired_at.is_not(None))
    breaks = or_(
        after_first & after_second & ~(first & second),  # own review
        after_final & (after_first | after_second) & ~(final & (first | second)),
        joins_first & (held(Stage.FIRST) + 1 > takes),  # stage-1 capacity
        joins_second & (held(Stage.SECOND) > 0),  # one reviewer
        (complete < takes) & (joins_second | (joins_first & (held(Stage.SECOND) > 0))),
        writes[Stage.FIRST] & closed,
        writes[Stage.FINAL] & (held(Stage.SECOND) == 0),  # resolution after review
    )
    return and_(exists().where(image.c.id == image_id), ~retired, ~breaks)


def may_check_fluency_clause(annotator: FromClause | None = None) -> ColumnElement[bool]:
    """`may_check_fluency` in SQL, over the annotator table (or an alias of it)."""
    annotator = Annotator.__table__ if annotator is None else annotator
    return func.coalesce(annotator.c.native_english, false())


def open_images(connection: Connection, annotator: str, stage: Stage,
                states: Mapping[int, ImageState] | None = None) -> set[int]:
    """Images the annotator may work on at stage 1 or 2: those with captions where
    `check_may_rate` would let them rate now; at review, none that someone flagged as
    broken (the review queue leaves them out until the lead unflags them); none for a
    retired annotator. `refusals` is asked once per distinct state of holders (most
    images share one). `states`: every image's `read_states`, where the caller has read
    them for several annotators (`thumb status`: read once, not twice per annotator)."""
    if stage not in (Stage.FIRST, Stage.SECOND):
        raise ValueError("open images are defined for stages 1 and 2")
    if is_retired(connection, annotator):
        return set()
    out = flagged_image_ids(connection) if stage == Stage.SECOND else set()
    if states is None:
        states = read_states(connection)
    verdicts: dict[tuple[int, Holders], bool] = {}
    opened = set()
    for image_id, state in states.items():
        if not state.to_rate:
            continue
        held = (state.takes, (state.first, state.second, state.final, state.complete,
                              state.closed))
        if held not in verdicts:
            verdicts[held] = not refusals(state, [(annotator, stage)])
        if verdicts[held] and image_id not in out:
            opened.add(image_id)
    return opened


def group_identical(rows: Iterable[R], image_id: Callable[[R], int],
                    text: Callable[[R], str]) -> dict[tuple[int, str], list[R]]:
    """(image id, text) -> the rows of that image's captions with this text, in the order
    given: identical captions (surrounding spaces aside) are shown once and rated
    together, so the protocol counts them as one caption."""
    groups: dict[tuple[int, str], list[R]] = {}
    for row in rows:
        groups.setdefault((image_id(row), text(row).strip()), []).append(row)
    return groups
