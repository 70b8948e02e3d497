"""THUMB's two-stage protocol: who may rate which image at which stage, blind double
rating, the disagreement queue, resolutions and the native-speaker fluency round."""

from __future__ import annotations

import json
import math
import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from sqlalchemy import Connection, Engine, Table, func, select, update

from rubrics import PENALTY_KEYS, SCORE_KEYS
from storage.models import (
    Annotator,
    Assignment,
    Caption,
    Event,
    FluencyCheck,
    Image,
    Rating,
    Resolution,
    Stage,
    utcnow,
)
from storage.rubric_registry import stored_rubrics

COMPARED = (*SCORE_KEYS, *PENALTY_KEYS)


class ProtocolError(PermissionError):
    """An action the THUMB protocol does not allow this annotator."""


def _stage_raters(connection: Connection, stage: Stage) -> dict[int, set[int]]:
    """image id -> annotators with at least one rating of it at `stage`."""
    rating, caption = Rating.__table__, Caption.__table__
    raters: dict[int, set[int]] = {}
    for image_id, annotator_id in connection.execute(
        select(caption.c.image_id, rating.c.annotator_id)
        .join(caption, rating.c.caption_id == caption.c.id)
        .where(rating.c.stage == int(stage))
        .distinct()
    ):
        raters.setdefault(image_id, set()).add(annotator_id)
    return raters


def primary_first_ratings(connection: Connection, caption_ids: Sequence[int] | None = None
                          ) -> dict[int, dict[str, object]]:
    """caption id -> the stage-1 rating that stage 2 reviews, where complete: the rating by
    the image's first stage-1 annotator (whose first rating of it is the earliest; the
    times travel through export and import). One annotator per image, fixed once they
    start, so a reviewer never sees a mix of two blind raters' scores."""
    rating, caption = Rating.__table__, Caption.__table__
    query = (select(rating, caption.c.image_id)
             .join(caption, rating.c.caption_id == caption.c.id)
             .where(rating.c.stage == int(Stage.FIRST))
             .order_by(rating.c.created_at, rating.c.id))
    if caption_ids is not None:
        images = select(caption.c.image_id).where(caption.c.id.in_(caption_ids))
        query = query.where(caption.c.image_id.in_(images))
    primary: dict[int, int] = {}
    first: dict[int, dict[str, object]] = {}
    for row in connection.execute(query):
        if primary.setdefault(row.image_id, row.annotator_id) != row.annotator_id:
            continue
        if row.precision is not None and row.recall is not None:
            first[row.caption_id] = dict(row._mapping)
    return first


def stage_one_done(connection: Connection, image_id: int | None = None) -> set[int]:
    """Images (all, or just `image_id`) whose stage 1 is over: as many annotators as the
    image takes (one; two when double-rated) have rated every one of its captions."""
    image, caption, rating = Image.__table__, Caption.__table__, Rating.__table__
    images, captions = select(image.c.id, image.c.double_rating), select(
        caption.c.image_id, func.count()).group_by(caption.c.image_id)
    ratings = (select(caption.c.image_id, rating.c.annotator_id, func.count())
               .join(caption, rating.c.caption_id == caption.c.id)
               .where(rating.c.stage == int(Stage.FIRST), rating.c.precision.is_not(None),
                      rating.c.recall.is_not(None))
               .group_by(caption.c.image_id, rating.c.annotator_id))
    if image_id is not None:
        images = images.where(image.c.id == image_id)
        captions = captions.where(caption.c.image_id == image_id)
        ratings = ratings.where(caption.c.image_id == image_id)
    sizes = dict(connection.execute(captions).all())
    capacity = {row.id: 2 if row.double_rating else 1 for row in connection.execute(images)}
    finished: dict[int, int] = {}
    for rated, _, count in connection.execute(ratings):
        if count == sizes.get(rated):
            finished[rated] = finished.get(rated, 0) + 1
    return {rated for rated, n in finished.items() if n >= capacity[rated]}


def reviewed_images(connection: Connection, image_id: int | None = None) -> set[int]:
    """Images (all, or just `image_id`) that someone has opened for review or resolution
    or rated at stage 2 or final: their stage 1 is closed, so what the reviewer saw stays
    what stage 1 says."""
    assignment, rating, caption = Assignment.__table__, Rating.__table__, Caption.__table__
    opened = select(assignment.c.image_id).where(assignment.c.stage >= int(Stage.SECOND))
    rated = (select(caption.c.image_id).join(rating, rating.c.caption_id == caption.c.id)
             .where(rating.c.stage >= int(Stage.SECOND)))
    if image_id is not None:
        opened = opened.where(assignment.c.image_id == image_id)
        rated = rated.where(caption.c.image_id == image_id)
    return set(connection.execute(opened.distinct()).scalars()) | set(
        connection.execute(rated.distinct()).scalars())


def eligible_images(connection: Connection, annotator_id: int, stage: Stage) -> set[int]:
    """Images this annotator may work on at `stage`.

    Stage 1: images nobody has opened for review yet (so nobody has seen their scores)
    that they started, or that fewer other annotators started than the image takes (one;
    two for blind double rating). Stage 2: images whose stage 1 is over, that they did
    not rate at stage 1 and that no other reviewer started."""
    image = Image.__table__
    capacity = {row.id: 2 if row.double_rating else 1
                for row in connection.execute(select(image.c.id, image.c.double_rating))}
    first = _stage_raters(connection, Stage.FIRST)
    second = _stage_raters(connection, Stage.SECOND)
    if stage == Stage.FIRST:
        closed = reviewed_images(connection)
        return {
            image_id for image_id, slots in capacity.items()
            if image_id not in closed and (
                annotator_id in first.get(image_id, set())
                or len(first.get(image_id, set())) < slots)
        }
    if stage != Stage.SECOND:
        raise ValueError("eligibility is defined for stages 1 and 2")
    return {
        image_id for image_id in stage_one_done(connection)
        if annotator_id not in first.get(image_id, set())
        and not second.get(image_id, set()) - {annotator_id}
    }


def check_may_rate(connection: Connection, annotator_id: int, stage: Stage,
                   image_id: int) -> None:
    """Raise ProtocolError unless the annotator may rate this image at this stage (the
    per-image form of `eligible_images`, cheap enough to run on every change)."""
    rating, caption, image = Rating.__table__, Caption.__table__, Image.__table__

    def raters(at: Stage) -> set[int]:
        return set(connection.execute(
            select(rating.c.annotator_id).join(caption, rating.c.caption_id == caption.c.id)
            .where(caption.c.image_id == image_id, rating.c.stage == int(at)).distinct()
        ).scalars())

    first, second = raters(Stage.FIRST), raters(Stage.SECOND)
    if stage == Stage.FIRST:
        if reviewed_images(connection, image_id):
            raise ProtocolError("this image has been opened for review: its stage 1 is "
                                "closed")
        double = connection.execute(
            select(image.c.double_rating).where(image.c.id == image_id)).scalar()
        if annotator_id in first:
            return
        if len(first) >= (2 if double else 1):
            raise ProtocolError("another annotator already rates this image at stage 1")
        return
    if stage == Stage.SECOND:
        if annotator_id in first:
            raise ProtocolError("you rated this image at stage 1: another annotator must "
                                "review it")
        if second - {annotator_id}:
            raise ProtocolError("another annotator already reviews this image")
        if image_id not in stage_one_done(connection, image_id):
            raise ProtocolError("this image's stage-1 rating is not complete yet")
        return
    if annotator_id in first | second:
        raise ProtocolError("you rated or reviewed this image: someone else must resolve "
                            "its disagreements")
    if not second:
        raise ProtocolError("this image has not been reviewed: there is nothing to resolve")


@dataclass(frozen=True)
class DoubleAssignment:
    """What `assign_double` did: keys of all marked images, of the newly marked ones, and
    how many images could not be marked because someone has already seen their scores."""

    marked: list[str]
    added: list[str]
    seen: int


def assign_double(engine: Engine, share: float, *, seed: int, actor: str) -> DoubleAssignment:
    """Mark images for blind double stage-1 rating until `share` of all images is marked,
    choosing at random with `seed` among images whose scores nobody has seen yet (none
    opened in review or resolution). Marks are never removed: a second blind rating may exist."""
    if not 0 <= share <= 1:
        raise ValueError("the share of double-rated images must be between 0 and 1")
    image = Image.__table__
    with engine.begin() as connection:
        rows = connection.execute(select(image.c.id, image.c.key, image.c.double_rating)
                                  .order_by(image.c.id)).all()
        seen = reviewed_images(connection)
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
        connection.execute(Event.__table__.insert().values(
            at=utcnow(), actor=actor, action="assign", table_name="image",
            field_name="double_rating",
            new_value=json.dumps({"share": share, "seed": seed, "added": result.added,
                                  "marked": len(result.marked)})))
    return result


@dataclass(frozen=True)
class Disagreement:
    caption_id: int
    image_id: int
    text: str
    first: dict[str, object]
    second: dict[str, object]
    caption_ids: tuple[int, ...] = ()  # the caption and identical ones of its image

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
    rating, caption, annotator = Rating.__table__, Caption.__table__, Annotator.__table__
    with engine.connect() as connection:
        excluded: set[int] = set()
        if resolver is not None:
            resolver_id = connection.execute(
                select(annotator.c.id).where(annotator.c.name == resolver)).scalar()
            excluded = {image_id for at in (Stage.FIRST, Stage.SECOND)
                        for image_id, ids in _stage_raters(connection, at).items()
                        if resolver_id in ids}
        first = primary_first_ratings(connection)
        resolved = set(connection.execute(
            select(Resolution.__table__.c.caption_id)).scalars()) & set(connection.execute(
            select(rating.c.caption_id).where(
                rating.c.stage == int(Stage.FINAL), rating.c.precision.is_not(None),
                rating.c.recall.is_not(None))).scalars())
        rows = connection.execute(
            select(rating, caption.c.image_id, caption.c.text)
            .join(caption, rating.c.caption_id == caption.c.id)
            .where(rating.c.stage == int(Stage.SECOND), rating.c.precision.is_not(None),
                   rating.c.recall.is_not(None))
            .order_by(rating.c.id)
        ).all()
        twins = _same_text(connection, {row.image_id for row in rows})
    found = []
    texts: set[tuple[int, str]] = set()
    for row in rows:
        key = (row.image_id, row.text.strip())
        if row.caption_id not in first or row.image_id in excluded or key in texts:
            continue
        texts.add(key)
        second = dict(row._mapping)
        if all(first[row.caption_id][k] == second[k] for k in COMPARED):
            continue
        if row.caption_id in resolved and not include_resolved:
            continue
        found.append(Disagreement(row.caption_id, row.image_id, row.text,
                                  first[row.caption_id], second, twins[key]))
    return sorted(found, key=lambda d: d.severity, reverse=True)


def _same_text(connection: Connection, image_ids: set[int]
               ) -> dict[tuple[int, str], tuple[int, ...]]:
    """(image id, text) -> ids of that image's captions with this text, which the screens
    show and rate as one caption."""
    caption = Caption.__table__
    groups: dict[tuple[int, str], list[int]] = {}
    for caption_id, image_id, text in connection.execute(
            select(caption.c.id, caption.c.image_id, caption.c.text)
            .where(caption.c.image_id.in_(image_ids)).order_by(caption.c.id)):
        groups.setdefault((image_id, text.strip()), []).append(caption_id)
    return {key: tuple(ids) for key, ids in groups.items()}


def record_resolution(engine: Engine, caption_id: int, resolver: str,
                      reasons: Sequence[str], note: str, valid_codes: Sequence[str]) -> None:
    """Store (or replace) why a disagreement was settled; logged like every change."""
    unknown = [code for code in reasons if code not in valid_codes]
    if not reasons or unknown:
        raise ValueError(f"give at least one reason from: {', '.join(valid_codes)}")
    table, annotator, caption, rating = (Resolution.__table__, Annotator.__table__,
                                         Caption.__table__, Rating.__table__)
    with engine.begin() as connection:
        resolver_id = connection.execute(
            select(annotator.c.id).where(annotator.c.name == resolver)).scalar_one()
        image_id = connection.execute(
            select(caption.c.image_id).where(caption.c.id == caption_id)).scalar_one()
        check_may_rate(connection, resolver_id, Stage.FINAL, image_id)
        final = connection.execute(select(rating.c.id).where(
            rating.c.caption_id == caption_id, rating.c.annotator_id == resolver_id,
            rating.c.stage == int(Stage.FINAL), rating.c.precision.is_not(None),
            rating.c.recall.is_not(None))).first()
        if final is None:
            raise ProtocolError("set the final P and R before the reasons")
        _upsert_logged(connection, table, caption_id, resolver, "reasons",
                       {"reasons": ",".join(reasons), "note": note, "resolver_id": resolver_id})


def _upsert_logged(connection: Connection, table: Table, caption_id: int, actor: str,
                   logged: str, values: dict[str, object]) -> None:
    """Insert or replace the caption's row of `table` and log the `logged` field's change."""
    old = connection.execute(select(table).where(table.c.caption_id == caption_id)
                             ).one_or_none()
    if old is None:
        row_id = connection.execute(table.insert().values(
            caption_id=caption_id, created_at=utcnow(), **values)).inserted_primary_key[0]
    else:
        row_id = old.id
        connection.execute(update(table).where(table.c.id == old.id).values(**values))
    connection.execute(Event.__table__.insert().values(
        at=utcnow(), actor=actor, action="update", table_name=table.name, row_id=row_id,
        field_name=logged, old_value=json.dumps(None if old is None else old._mapping[logged]),
        new_value=json.dumps(values[logged]), change_id=uuid.uuid4().hex))


class FluencyItem(NamedTuple):
    """A caption waiting for the fluency round, with both stages' fluency values."""

    caption_id: int
    text: str
    first: dict[str, object]
    second: dict[str, object]
    caption_ids: tuple[int, ...]  # the caption and identical ones of its image


def fluency_queue(engine: Engine) -> list[FluencyItem]:
    """Captions whose stage-1 and stage-2 raters are both not native English speakers and
    that no native speaker has checked yet, where the review's rubric has a fluency
    penalty."""
    rating, caption, annotator = Rating.__table__, Caption.__table__, Annotator.__table__
    with engine.connect() as connection:
        without_fluency = {signature for signature, rubric in stored_rubrics(connection).items()
                           if not rubric.has_penalty("fluency")}
        native = {row.id: bool(row.native_english) for row in connection.execute(
            select(annotator.c.id, annotator.c.native_english))}
        first = primary_first_ratings(connection)
        checked = set(connection.execute(
            select(FluencyCheck.__table__.c.caption_id)).scalars())
        rows = connection.execute(
            select(rating, caption.c.text, caption.c.image_id)
            .join(caption, rating.c.caption_id == caption.c.id)
            .where(rating.c.stage == int(Stage.SECOND), rating.c.precision.is_not(None))
            .order_by(rating.c.caption_id)
        ).all()
    same_text: dict[tuple[int, str], list[int]] = {}
    for row in rows:
        if (row.caption_id in checked or row.caption_id not in first
                or row.rubric in without_fluency):
            continue
        if native[first[row.caption_id]["annotator_id"]] or native[row.annotator_id]:
            continue
        same_text.setdefault((row.image_id, row.text.strip()), []).append(row.caption_id)
    queue, listed = [], set()
    for row in rows:
        key = (row.image_id, row.text.strip())
        if key in same_text and key not in listed:
            listed.add(key)
            queue.append(FluencyItem(row.caption_id, row.text, first[row.caption_id],
                                     dict(row._mapping), tuple(same_text[key])))
    return queue


def record_fluency_check(engine: Engine, caption_id: int, checker: str, fluency: float,
                         fluency_type: str | None) -> None:
    """Store (or replace) a native speaker's fluency verdict; only native speakers may."""
    table, annotator, rating = FluencyCheck.__table__, Annotator.__table__, Rating.__table__
    with engine.begin() as connection:
        row = connection.execute(select(annotator.c.id, annotator.c.native_english)
                                 .where(annotator.c.name == checker)).one()
        if not row.native_english:
            raise ProtocolError("only native English speakers do the fluency round")
        reviewed = connection.execute(select(rating.c.id, rating.c.rubric).where(
            rating.c.caption_id == caption_id, rating.c.stage == int(Stage.SECOND),
            rating.c.precision.is_not(None))).first()
        if reviewed is None:
            raise ProtocolError("the fluency round comes after review (stage 2)")
        _upsert_logged(connection, table, caption_id, checker, "fluency",
                       {"checker_id": row.id, "fluency": fluency, "fluency_type": fluency_type,
                        "rubric": reviewed.rubric})
