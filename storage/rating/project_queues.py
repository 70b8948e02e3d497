"""The project-wide queues of THUMB's pipeline and the records that settle them: which
images are rated twice blind, which captions disagree and wait for resolution, which wait
for the native-speaker fluency round. Functions over the whole project, called by the
lead's commands, by import and by the sessions; one annotator's interactive work is
`storage/rating/rating_sessions.py`."""

from __future__ import annotations

import json
import math
import random
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Row,
    Table,
    delete,
    insert,
    literal,
    select,
    update,
)

from rubrics import PENALTY_KEYS, SCORE_KEYS
from rubrics.model import error_codes
from storage.db.engine import run_write
from storage.events import log_change
from storage.models import (
    Annotator,
    Assignment,
    Caption,
    Event,
    FluencyCheck,
    Image,
    Rating,
    ReleasedRating,
    Resolution,
    Stage,
    utcnow,
)
from storage.rating.protocol import (
    ImageState,
    ProtocolError,
    check_may_rate,
    complete_clause,
    group_identical,
    has_rated,
    lock_images,
    may_check_fluency,
    read_states,
    refusals,
)
from storage.rubric_registry import stored_rubrics

COMPARED = (*SCORE_KEYS, *PENALTY_KEYS)
# what a fluency verdict sets, logged with each so that its undo puts back what was there
FLUENCY_CHECK_FIELDS = ("checker_id", "fluency", "fluency_type", "rubric")


def disagree(first: Mapping[str, object], second: Mapping[str, object]) -> bool:
    """Whether two ratings' values differ (a caption's reviewed stage-1 values and its
    stage-2 values: what makes a disagreement, which a resolution settles)."""
    return any(first[key] != second[key] for key in COMPARED)


def primary_first_ratings(connection: Connection, caption_ids: Sequence[int] | None = None,
                          *, reviewed: bool = False) -> dict[int, dict[str, object]]:
    """caption id -> the stage-1 rating that stage 2 reviews, where complete: the rating by
    the image's first stage-1 annotator (whose first rating of it is the earliest; the
    times travel through export and import). One annotator per image, fixed once they
    start, so a reviewer never sees a mix of two blind raters' scores. Only on the images
    of `caption_ids` where given; with `reviewed`, only on images with a complete stage-2
    rating (all that a comparison with stage 2 needs: most of a large project may still be
    at stage 1). A dict is built only for the ratings returned."""
    rating, caption = Rating.__table__, Caption.__table__
    images = []
    if caption_ids is not None:
        given = caption.alias("given")
        images.append(select(given.c.image_id).where(given.c.id.in_(caption_ids)))
    if reviewed:
        review, of_review = rating.alias("review"), caption.alias("of_review")
        images.append(select(of_review.c.image_id)
                      .join(review, review.c.caption_id == of_review.c.id)
                      .where(review.c.stage == int(Stage.SECOND), complete_clause(review)))
    stage_one = (rating.c.stage == int(Stage.FIRST),
                 *(caption.c.image_id.in_(query) for query in images))
    in_order = (rating.c.created_at, rating.c.id)
    primary: dict[int, int] = {}  # image id -> its first stage-1 annotator
    for image_id, annotator_id in connection.execute(
            select(caption.c.image_id, rating.c.annotator_id)
            .join(caption, rating.c.caption_id == caption.c.id)
            .where(*stage_one).order_by(*in_order)):
        primary.setdefault(image_id, annotator_id)
    rows = connection.execute(select(rating, caption.c.image_id)
                              .join(caption, rating.c.caption_id == caption.c.id)
                              .where(*stage_one, complete_clause(rating)).order_by(*in_order))
    columns = list(rows.keys())
    return {row.caption_id: dict(zip(columns, row, strict=True)) for row in rows
            if primary[row.image_id] == row.annotator_id}


@dataclass(frozen=True)
class DoubleAssignment:
    """What `assign_double` did: keys of all marked images, of the newly marked ones, and
    how many images could not be marked because someone has already seen their scores."""

    marked: list[str]
    added: list[str]
    seen: int


def assign_double(engine: Engine, share: float, *, seed: int, actor: str) -> DoubleAssignment:
    """Mark images for blind double stage-1 rating until `share` of the images with
    captions is marked, choosing at random with `seed` among images whose scores nobody
    has seen yet (none opened in review or resolution). Marks are never removed: a second
    blind rating may exist."""
    if not 0 <= share <= 1:
        raise ValueError("the share of double-rated images must be between 0 and 1")
    image = Image.__table__

    def assign(connection: Connection) -> DoubleAssignment:
        states = read_states(connection, lock=True)
        seen = {image_id for image_id, state in states.items() if state.closed}
        rows = [row for row in connection.execute(
                    select(image.c.id, image.c.key, image.c.double_rating).order_by(image.c.id))
                if states[row.id].to_rate]
        already = [row for row in rows if row.double_rating]
        candidates = [row for row in rows if not row.double_rating and row.id not in seen]
        wanted = max(0, math.floor(share * len(rows) + 0.5) - len(already))  # half up
        chosen = random.Random(seed).sample(candidates, min(wanted, len(candidates)))
        if chosen:
            connection.execute(update(image).where(image.c.id.in_([r.id for r in chosen]))
                               .values(double_rating=True))
        result = DoubleAssignment(
            marked=sorted(row.key for row in [*already, *chosen]),
            added=sorted(row.key for row in chosen),
            seen=len([row for row in rows if not row.double_rating and row.id in seen]))
        log_change(connection, actor=actor, action="assign", table="image",
                   new={"double_rating": {"share": share, "seed": seed, "added": result.added,
                                          "marked": len(result.marked)}})
        return result

    return run_write(engine, assign)


@dataclass(frozen=True)
class KeptClaim:
    """A claim `release_claims` kept: its image, its stage, and how many captions its
    annotator has rated there."""

    image_key: str
    stage: int
    rated: int


@dataclass(frozen=True)
class ClaimRelease:
    """What `release_claims` did: the keys of the images released, the claims it kept, and
    how many ratings a forced release moved into `released_rating`."""

    released: list[str]
    kept: list[KeptClaim]
    set_aside: int = 0


def _removed_rating(row: Row) -> dict[str, object]:
    """A rating row's fields as the event log keeps them (times as ISO text)."""
    return {key: value.isoformat() if isinstance(value, datetime) else value
            for key, value in row._mapping.items() if key != "id"}


def release_claims(engine: Engine, annotator: str, *, actor: str,
                   image_key: str | None = None, force: bool = False) -> ClaimRelease:
    """Give up the claims `annotator` holds at stages 1 and 2 on images they have rated
    nothing of at that stage (a session killed before it could give them up itself), so
    that others may take the images; only the image `image_key`'s, where given. A claim
    with a rating is kept (a rated image stays its annotator's) unless `force` (which
    needs `image_key`): then their ratings of the image at that stage move, in this
    transaction and every value as it was, into `released_rating` (with the claim, the
    time and `actor`), each logged with its values, so that no rating is lost and none
    counts: the image is open to others as if they had never rated it (stage 1 is blind,
    so the next rater would not have seen them; a review starts again from the stage-1
    values). A review is not forced out once someone has rated the image at the final
    stage. Each claim is judged again under its image's lock, as a session takes one, and
    each release is logged. ValueError for an unknown annotator or image."""
    if force and image_key is None:
        raise ValueError("--force frees one claim: name its image with --image")
    assignment, image, person = Assignment.__table__, Image.__table__, Annotator.__table__
    rating, caption = Rating.__table__, Caption.__table__
    released_rating = ReleasedRating.__table__

    def ratings_of(connection: Connection, annotator_id: int, image_id: int,
                   stage: int) -> list[Row]:
        return connection.execute(
            select(rating).join(caption, rating.c.caption_id == caption.c.id)
            .where(caption.c.image_id == image_id, rating.c.annotator_id == annotator_id,
                   rating.c.stage == stage).order_by(rating.c.id)).all()

    def set_ratings_aside(connection: Connection, rated: list[Row], *, claim: int,
                          now: datetime) -> int:
        """Move `rated` into `released_rating` (copied in the database, so every value is
        the one stored), log each with its values, remove it from `rating`."""
        change_id = uuid.uuid4().hex
        ids = [removed.id for removed in rated]
        copied = [column.name for column in rating.c if column.name != "id"]
        moved = connection.execute(
            insert(released_rating).from_select(
                [*copied, "rating_id", "assignment_id", "released_at", "released_by"],
                select(*(rating.c[name] for name in copied), rating.c.id, literal(claim),
                       literal(now, released_rating.c.released_at.type), literal(actor))
                .where(rating.c.id.in_(ids)))
            .returning(released_rating.c.id, released_rating.c.rating_id)).all()
        for removed in rated:
            old = _removed_rating(removed)
            log_change(connection, actor=actor, action="release", table=rating.name,
                       row_id=removed.id, old=old, new=dict.fromkeys(old),
                       change_id=change_id)
        for released_id, rating_id in moved:
            log_change(connection, actor=actor, action="release",
                       table=released_rating.name,
                       row_id=released_id, new={"rating_id": rating_id},
                       change_id=change_id)
        connection.execute(delete(rating).where(rating.c.id.in_(ids)))
        return len(moved)

    def resolved(connection: Connection, image_id: int) -> bool:
        return connection.execute(
            select(rating.c.id).join(caption, rating.c.caption_id == caption.c.id)
            .where(caption.c.image_id == image_id, rating.c.stage == int(Stage.FINAL))
            .limit(1)).first() is not None

    def release(connection: Connection) -> ClaimRelease:
        annotator_id = connection.execute(select(person.c.id).where(
            person.c.name == annotator)).scalar_one_or_none()
        if annotator_id is None:
            raise ValueError(f"no annotator {annotator!r} in this project")
        query = (select(assignment.c.id, assignment.c.image_id, assignment.c.stage,
                        image.c.key).join(image, image.c.id == assignment.c.image_id)
                 .where(assignment.c.annotator_id == annotator_id,
                        assignment.c.stage.in_([int(Stage.FIRST), int(Stage.SECOND)]),
                        assignment.c.released_at.is_(None)))
        if image_key is not None:
            if connection.execute(select(image.c.id).where(image.c.key == image_key)
                                  ).first() is None:
                raise ValueError(f"no image {image_key!r} in this project")
            query = query.where(image.c.key == image_key)
        held = connection.execute(query).all()
        lock_images(connection, {row.image_id for row in held})
        released, kept, set_aside = [], [], 0
        for row in held:
            still_held = connection.execute(select(assignment.c.released_at).where(
                assignment.c.id == row.id)).scalar_one() is None
            if not still_held:
                continue
            now = utcnow()
            if has_rated(connection, annotator_id, row.image_id, row.stage):
                rated = ratings_of(connection, annotator_id, row.image_id, row.stage)
                if not force or (row.stage == Stage.SECOND
                                 and resolved(connection, row.image_id)):
                    kept.append(KeptClaim(row.key, row.stage, len(rated)))
                    continue
                set_aside += set_ratings_aside(connection, rated, claim=row.id, now=now)
            connection.execute(update(assignment).where(assignment.c.id == row.id)
                               .values(released_at=now))
            log_change(connection, actor=actor, action="release", table=assignment.name,
                       row_id=row.id, old={"released_at": None},
                       new={"released_at": now.isoformat()})
            released.append(row.key)
        return ClaimRelease(sorted(released), kept, set_aside)

    return run_write(engine, release)


@dataclass(frozen=True)
class Disagreement:
    caption_id: int
    image_id: int
    text: str
    first: dict[str, object]
    second: dict[str, object]
    caption_ids: tuple[int, ...] = ()  # the caption and identical ones of its image
    resolved: bool = False  # a complete final rating with its resolver's reasons

    @property
    def severity(self) -> tuple[float, float, float]:
        """Worst first: the largest P/R gap, then the summed P/R gap, then penalties."""
        gaps = [abs(float(self.first[d]) - float(self.second[d]))  # type: ignore[arg-type]
                for d in SCORE_KEYS]
        penalties = sum(abs(float(self.first[p]) - float(self.second[p]))  # type: ignore[arg-type]
                        for p in PENALTY_KEYS)
        return max(gaps), sum(gaps), penalties


def disagreements(engine: Engine, include_resolved: bool = False,
                  resolver: str | None = None) -> list[Disagreement]:
    """Captions whose stage-1 and stage-2 values differ, worst first; identical captions of
    an image (rated together) come once. With `resolver`: only those they may settle, on
    images they neither rated nor reviewed."""
    with engine.connect() as connection:
        found = project_disagreements(connection)
        if resolver is not None:
            found = settleable_by(resolver, found, read_states(connection))
    return found if include_resolved else [item for item in found if not item.resolved]


def project_disagreements(connection: Connection,
                          first: Mapping[int, dict[str, object]] | None = None
                          ) -> list[Disagreement]:
    """Every caption whose stage-1 and stage-2 values differ, resolved or not (`resolved`
    says which), worst first; identical captions of an image come once. One read of the
    ratings for all that a command asks of the disagreements; `first` are
    `primary_first_ratings(connection, reviewed=True)` where the caller has them."""
    rating = Rating.__table__
    if first is None:
        first = primary_first_ratings(connection, reviewed=True)
    resolved = set(connection.execute(
        select(Resolution.__table__.c.caption_id)).scalars()) & set(connection.execute(
        select(rating.c.caption_id).where(
            rating.c.stage == int(Stage.FINAL), complete_clause(rating))).scalars())
    rows = _complete_reviews(connection, rating.c.id)
    twins = _same_text(connection, {row.image_id for row in rows})
    found = []
    for key, group in group_identical(rows, lambda r: r.image_id, lambda r: r.text).items():
        row = next((r for r in group if r.caption_id in first), None)
        if row is None:
            continue
        reviewed = first[row.caption_id]
        if not disagree(reviewed, row._mapping):
            continue
        found.append(Disagreement(row.caption_id, row.image_id, row.text, reviewed,
                                  row._asdict(), twins[key], row.caption_id in resolved))
    return sorted(found, key=lambda d: d.severity, reverse=True)


def settleable_by(resolver: str, found: Sequence[Disagreement],
                  states: Mapping[int, ImageState]) -> list[Disagreement]:
    """Those of `found` that `resolver` may settle (`refusals` at the final stage: on
    images they neither rated nor reviewed), in the order given; `states` are
    `read_states`', which the caller may share between resolvers."""
    refused: dict[int, bool] = {}
    for image_id in {item.image_id for item in found}:
        refused[image_id] = image_id in states and bool(
            refusals(states[image_id], [(resolver, Stage.FINAL)]))
    return [item for item in found if not refused[item.image_id]]


def _complete_reviews(connection: Connection, *order: ColumnElement) -> list[Row]:
    """Every complete stage-2 rating, with its caption's image id and text, in `order`:
    what the disagreements and the fluency round compare with stage 1."""
    rating, caption = Rating.__table__, Caption.__table__
    return list(connection.execute(
        select(rating, caption.c.image_id, caption.c.text)
        .join(caption, rating.c.caption_id == caption.c.id)
        .where(rating.c.stage == int(Stage.SECOND), complete_clause(rating))
        .order_by(*order)))


def _same_text(connection: Connection, image_ids: set[int]
               ) -> dict[tuple[int, str], tuple[int, ...]]:
    """(image id, text) -> ids of that image's captions with this text, which the screens
    show and rate as one caption."""
    caption = Caption.__table__
    rows = connection.execute(select(caption.c.id, caption.c.image_id, caption.c.text)
                              .where(caption.c.image_id.in_(image_ids))
                              .order_by(caption.c.id))
    return {key: tuple(row.id for row in group) for key, group in
            group_identical(rows, lambda r: r.image_id, lambda r: r.text).items()}


def record_resolution(engine: Engine, caption_ids: int | Sequence[int], resolver: str,
                      reasons: Sequence[str], note: str, valid_codes: Sequence[str]) -> None:
    """Store (or replace) why a disagreement was settled, for the caption or the identical
    captions given (all in one transaction); logged like every change."""
    unknown = [code for code in reasons if code not in valid_codes]
    if not reasons or unknown:
        raise ValueError(f"give at least one reason from: {', '.join(valid_codes)}")
    table, annotator, rating = Resolution.__table__, Annotator.__table__, Rating.__table__
    ids = [caption_ids] if isinstance(caption_ids, int) else list(caption_ids)

    def resolve(connection: Connection) -> None:
        resolver_id = connection.execute(
            select(annotator.c.id).where(annotator.c.name == resolver)).scalar_one_or_none()
        if resolver_id is None:
            raise ProtocolError(f"{resolver!r} has set no final P and R: nothing to give "
                                "reasons for")
        for caption_id in ids:
            check_may_rate(connection, resolver, Stage.FINAL, _image_of(connection, caption_id))
            final = connection.execute(select(rating.c.id).where(
                rating.c.caption_id == caption_id, rating.c.annotator_id == resolver_id,
                rating.c.stage == int(Stage.FINAL), complete_clause(rating))).first()
            if final is None:
                raise ProtocolError("set the final P and R before the reasons")
            _upsert_logged(connection, table, caption_id, resolver, ("reasons",),
                           {"reasons": ",".join(reasons), "note": note,
                            "resolver_id": resolver_id})

    run_write(engine, resolve)


def withdraw_resolution(connection: Connection, caption_id: int, resolver_id: int,
                        resolver: str) -> bool:
    """The resolver's reasons for the caption no longer stand: they said why the final
    values were right, and the values have changed. Their resolution row goes, logged
    (reasons old -> null), in the caller's transaction, so the caption is unresolved until
    they give reasons again. Returns whether there was one to withdraw."""
    table = Resolution.__table__
    row = connection.execute(select(table.c.id, table.c.reasons).where(
        table.c.caption_id == caption_id, table.c.resolver_id == resolver_id)).one_or_none()
    if row is None:
        return False
    connection.execute(delete(table).where(table.c.id == row.id))
    log_change(connection, actor=resolver, action="delete", table=table.name, row_id=row.id,
               old={"reasons": row.reasons}, new={"reasons": None})
    return True


def recorded_reasons(engine: Engine, caption_id: int, resolver: str) -> list[str]:
    """The reason codes the resolver has stored for the caption (none: not resolved by
    them, or withdrawn since)."""
    table, annotator = Resolution.__table__, Annotator.__table__
    with engine.connect() as connection:
        reasons = connection.execute(
            select(table.c.reasons).join(annotator, annotator.c.id == table.c.resolver_id)
            .where(table.c.caption_id == caption_id, annotator.c.name == resolver)
        ).scalar_one_or_none()
    return reasons.split(",") if reasons else []


def _image_of(connection: Connection, caption_id: int) -> int:
    caption = Caption.__table__
    return connection.execute(
        select(caption.c.image_id).where(caption.c.id == caption_id)).scalar_one()


def _upsert_logged(connection: Connection, table: Table, caption_id: int, actor: str,
                   logged: Sequence[str], values: dict[str, object],
                   change_id: str | None = None) -> None:
    """Insert or replace the caption's row of `table` and log the `logged` fields' change
    (old values null where the row is new), as `change_id` where given."""
    old = connection.execute(select(table).where(table.c.caption_id == caption_id)
                             ).one_or_none()
    if old is None:
        row_id = connection.execute(table.insert().values(
            caption_id=caption_id, created_at=utcnow(), **values)).inserted_primary_key[0]
    else:
        row_id = old.id
        changed = connection.execute(update(table).where(table.c.id == old.id).values(**values))
        if changed.rowcount != 1:  # on a team database: another person's row
            raise ProtocolError("someone else has just recorded this for the caption: the "
                                "database refuses to change their row")
    log_change(connection, actor=actor, action="update", table=table.name, row_id=row_id,
               old={field: None if old is None else old._mapping[field] for field in logged},
               new={field: values[field] for field in logged}, change_id=change_id)


@dataclass(frozen=True)
class FluencyItem:
    """A caption waiting for the fluency round, with both stages' fluency values."""

    caption_id: int
    text: str
    first: dict[str, object]
    second: dict[str, object]
    caption_ids: tuple[int, ...]  # the caption and identical ones of its image


def fluency_queue(engine: Engine) -> list[FluencyItem]:
    """Captions whose complete stage-1 and stage-2 ratings (`is_complete`: a half-scored
    review is not a review yet) were both made by annotators who may not check fluency
    (`may_check_fluency`) and that no native speaker has checked yet, where the review's
    rubric has a fluency penalty."""
    with engine.connect() as connection:
        return project_fluency_queue(connection)


def project_fluency_queue(connection: Connection,
                          first: Mapping[int, dict[str, object]] | None = None
                          ) -> list[FluencyItem]:
    """`fluency_queue` on an open connection; `first` are `primary_first_ratings(connection,
    reviewed=True)` where the caller has read them for the other queues too."""
    rating, annotator = Rating.__table__, Annotator.__table__
    without_fluency = {signature for signature, rubric in stored_rubrics(connection).items()
                       if not rubric.has_penalty("fluency")}
    checks = {row.id: may_check_fluency(row.native_english) for row in connection.execute(
        select(annotator.c.id, annotator.c.native_english))}
    if first is None:
        first = primary_first_ratings(connection, reviewed=True)
    checked = set(connection.execute(select(FluencyCheck.__table__.c.caption_id)).scalars())
    # image by image, each image's captions by their text: caption ids are drawn at
    # random (their order would change from one import to the next) and the order of
    # the file would tell the systems apart
    caption = Caption.__table__
    rows = _complete_reviews(connection, caption.c.image_id, caption.c.text,
                             rating.c.caption_id)
    waiting = [row for row in rows if row.caption_id not in checked
               and row.caption_id in first and row.rubric not in without_fluency
               and not checks[row.annotator_id]
               and not checks[first[row.caption_id]["annotator_id"]]]
    return [FluencyItem(group[0].caption_id, group[0].text, first[group[0].caption_id],
                        dict(group[0]._mapping), tuple(row.caption_id for row in group))
            for group in group_identical(waiting, lambda r: r.image_id,
                                         lambda r: r.text).values()]


def record_fluency_check(engine: Engine, caption_ids: int | Sequence[int], checker: str,
                         fluency: float, fluency_type: str | None) -> str:
    """Store (or replace) a native speaker's fluency verdict on the caption or the
    identical captions given (all in one transaction); only native speakers may
    (`may_check_fluency`), after a complete review, with an amount and error types that
    the review's rubric allows (`Rubric.penalty_problem`; ValueError otherwise). Returns
    the change's id, which `take_back_fluency_check` undoes."""
    table, annotator, rating = FluencyCheck.__table__, Annotator.__table__, Rating.__table__
    ids = [caption_ids] if isinstance(caption_ids, int) else list(caption_ids)

    codes = error_codes(fluency_type)

    def check(connection: Connection) -> None:
        rubrics = stored_rubrics(connection)
        row = connection.execute(select(annotator.c.id, annotator.c.native_english)
                                 .where(annotator.c.name == checker)).one()
        if not may_check_fluency(row.native_english):
            raise ProtocolError("only native English speakers do the fluency round")
        lock_images(connection, {_image_of(connection, caption_id) for caption_id in ids})
        for caption_id in ids:
            reviewed = connection.execute(select(rating.c.id, rating.c.rubric).where(
                rating.c.caption_id == caption_id, rating.c.stage == int(Stage.SECOND),
                complete_clause(rating))).first()
            if reviewed is None:
                raise ProtocolError("the fluency round comes after review (stage 2)")
            problem = rubrics[reviewed.rubric].penalty_problem("fluency", fluency, codes)
            if problem is not None:
                raise ValueError(problem)
            _upsert_logged(connection, table, caption_id, checker, FLUENCY_CHECK_FIELDS,
                           {"checker_id": row.id, "fluency": fluency,
                            "fluency_type": fluency_type, "rubric": reviewed.rubric},
                           change_id)

    change_id = uuid.uuid4().hex
    run_write(engine, check)
    return change_id


def fluency_verdict(engine: Engine, caption_id: int) -> tuple[float, str | None] | None:
    """The fluency penalty and error types a native speaker gave the caption, if any."""
    table = FluencyCheck.__table__
    with engine.connect() as connection:
        row = connection.execute(select(table.c.fluency, table.c.fluency_type)
                                 .where(table.c.caption_id == caption_id)).one_or_none()
    return None if row is None else (row.fluency, row.fluency_type)


def take_back_fluency_check(engine: Engine, change_id: str, checker: str) -> list[int]:
    """Undo the verdict that `change_id` recorded: each caption's check back as it was
    before (gone where there was none), in one transaction, logged as an undo that
    reverts the change. Returns the captions taken back: none where the change is undone
    already."""
    table, event = FluencyCheck.__table__, Event.__table__

    def undo(connection: Connection) -> list[int]:
        if connection.execute(select(event.c.id).where(event.c.reverts == change_id)
                              .limit(1)).first() is not None:
            return []
        before: dict[int, dict[str, object]] = {}
        for row_id, field, old in connection.execute(
                select(event.c.row_id, event.c.field_name, event.c.old_value).where(
                    event.c.change_id == change_id, event.c.table_name == table.name)):
            before.setdefault(row_id, {})[field] = json.loads(old)
        rows = connection.execute(select(table).where(table.c.id.in_(before))).all()
        lock_images(connection, {_image_of(connection, row.caption_id) for row in rows})
        for row in rows:
            now = {field: row._mapping[field] for field in FLUENCY_CHECK_FIELDS}
            if before[row.id]["fluency"] is None:  # there was no verdict before
                connection.execute(delete(table).where(table.c.id == row.id))
            else:
                connection.execute(update(table).where(table.c.id == row.id)
                                   .values(**before[row.id]))
            log_change(connection, actor=checker, action="undo", table=table.name,
                       row_id=row.id, old=now, new=before[row.id], reverts=change_id)
        return [row.caption_id for row in rows]

    return run_write(engine, undo)
