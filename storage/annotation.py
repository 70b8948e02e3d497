"""The annotation session behind the rating screens: what one annotator sees and changes.

Every change is committed as it is made, in one transaction with its event-log rows, so a
killed process loses nothing; undo reverts the annotator's last change and is logged too."""

from __future__ import annotations

import json
import random
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from sqlalchemy import ColumnElement, Connection, Engine, and_, select, update

from rubrics import PENALTY_KEYS, SCORE_KEYS, Rubric
from storage.image_flags import flag_image, flagged_by
from storage.models import (
    RATING_VALUE_FIELDS,
    Annotator,
    Assignment,
    Caption,
    Event,
    FluencyCheck,
    Image,
    Rating,
    Stage,
    utcnow,
)
from storage.rubric_registry import project_rubric
from storage.workflow import (
    ProtocolError,
    check_may_rate,
    eligible_images,
    primary_first_ratings,
)

RATING_FIELDS = (*RATING_VALUE_FIELDS, "note")
EMPTY_RATING: dict[str, object] = {
    **dict.fromkeys(SCORE_KEYS), **{f"{key}_type": None for key in PENALTY_KEYS},
    **dict.fromkeys(PENALTY_KEYS, 0.0), "note": "",
}


@dataclass(frozen=True)
class ImageItem:
    id: int
    key: str
    path: str | None


@dataclass(frozen=True)
class CaptionGroup:
    """Captions of one image with identical text: shown once, rated together.
    Deliberately carries no system name."""

    caption_ids: tuple[int, ...]
    text: str
    values: dict[str, object]
    reference: dict[str, object] | None = None  # stage 2: the stage-1 values under review

    @property
    def complete(self) -> bool:
        return self.values["precision"] is not None and self.values["recall"] is not None

    def total(self, rubric: Rubric) -> float | None:
        if not self.complete:
            return None
        return rubric.total_of(self.values)


@dataclass(frozen=True)
class Progress:
    images_done: int
    images_total: int
    captions_done: int
    captions_total: int


def register_annotator(engine: Engine, name: str, native_english: bool | None) -> bool | None:
    """Create the annotator if new; record native_english when given. Returns what is
    recorded now."""
    table = Annotator.__table__
    with engine.begin() as connection:
        row = connection.execute(select(table).where(table.c.name == name)).one_or_none()
        if row is None:
            connection.execute(table.insert().values(name=name, native_english=native_english,
                                                     created_at=utcnow()))
            return native_english
        if native_english is not None and native_english != row.native_english:
            check = FluencyCheck.__table__
            if not native_english and connection.execute(
                    select(check.c.id).where(check.c.checker_id == row.id)).first():
                raise ProtocolError(f"{name} gave fluency-round verdicts as a native English "
                                    "speaker; that record stays")
            connection.execute(update(table).where(table.c.id == row.id)
                               .values(native_english=native_english))
            connection.execute(Event.__table__.insert().values(
                at=utcnow(), actor=name, action="update", table_name="annotator",
                row_id=row.id, field_name="native_english",
                old_value=json.dumps(row.native_english), new_value=json.dumps(native_english),
                change_id=uuid.uuid4().hex))
            return native_english
        return row.native_english


def is_native_speaker(engine: Engine, name: str) -> bool:
    """Whether the annotator is recorded as a native English speaker (unknown counts as no)."""
    table = Annotator.__table__
    with engine.connect() as connection:
        return bool(connection.execute(select(table.c.native_english)
                                       .where(table.c.name == name)).scalar())


def _filled(row: object) -> dict[str, object]:
    """A rating row's values, with the empty defaults where it has none yet."""
    values = {f: getattr(row, f) for f in RATING_FIELDS}
    return {f: EMPTY_RATING[f] if values[f] is None and f in EMPTY_RATING else values[f]
            for f in RATING_FIELDS}


def shown_captions(captions_of: dict[int, list[int]]) -> set[int]:
    return {caption for captions in captions_of.values() for caption in captions}


def fluency_value(types: list[str], values: list[float]) -> tuple[float, str | None]:
    """The fluency penalty (sum) and type list stored for a list of fluency errors."""
    return round(sum(values), 6), ",".join(types) or None


class AnnotationSession:
    """One annotator's session at one stage over the whole project."""

    def __init__(
        self,
        engine: Engine,
        annotator: str,
        *,
        stage: Stage = Stage.FIRST,
        rubric: Rubric | None = None,
        native_english: bool | None = None,
        seed_source: Callable[[], int] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine = engine
        self.annotator = annotator
        self.stage = stage
        self.rubric = rubric or project_rubric(engine)
        self._seed_source = seed_source or (lambda: secrets.randbits(31))
        self._clock = clock
        register_annotator(engine, annotator, native_english)
        with engine.begin() as connection:
            self.annotator_id = connection.execute(
                select(Annotator.__table__.c.id).where(Annotator.__table__.c.name == annotator)
            ).scalar_one()
            open_to_me = (eligible_images(connection, self.annotator_id, stage)
                          if stage in (Stage.FIRST, Stage.SECOND) else None)
            self.images = [
                ImageItem(row.id, row.key, row.path)
                for row in connection.execute(
                    select(Image.__table__.c.id, Image.__table__.c.key, Image.__table__.c.path)
                    .order_by(Image.__table__.c.id)
                )
                if open_to_me is None or row.id in open_to_me
            ]
            self._captions_of: dict[int, list[int]] = {}
            caption = Caption.__table__
            shown = {image.id for image in self.images}
            for row in connection.execute(
                select(caption.c.id, caption.c.image_id).order_by(caption.c.id)
            ):
                if row.image_id in shown:
                    self._captions_of.setdefault(row.image_id, []).append(row.id)
            rating = Rating.__table__
            self._complete: set[int] = shown_captions(self._captions_of) & set(
                connection.execute(
                    select(rating.c.caption_id).where(
                        rating.c.annotator_id == self.annotator_id,
                        rating.c.stage == int(stage),
                        rating.c.precision.is_not(None),
                        rating.c.recall.is_not(None),
                    )
                ).scalars()
            )
            self.flagged = flagged_by(connection, self.annotator_id)
        self._index_of = {image.id: index for index, image in enumerate(self.images)}
        self._image_of = {c: i for i, captions in self._captions_of.items() for c in captions}
        self._done_in_image: dict[int, int] = {}
        for caption_id in self._complete:
            image_id = self._image_of[caption_id]
            self._done_in_image[image_id] = self._done_in_image.get(image_id, 0) + 1
        self._images_done = sum(1 for image in self.images if self.is_complete(image))
        self._opened: tuple[int, float] | None = None

    # -- set-up -----------------------------------------------------------------------------

    def _assignment(self, connection: Connection, image_id: int) -> dict[str, object]:
        table = Assignment.__table__
        where = and_(table.c.image_id == image_id, table.c.annotator_id == self.annotator_id,
                     table.c.stage == int(self.stage))
        row = connection.execute(select(table).where(where)).one_or_none()
        if row is None:
            values = {"image_id": image_id, "annotator_id": self.annotator_id,
                      "stage": int(self.stage), "shuffle_seed": self._seed_source(),
                      "seconds": 0.0, "focus": 0, "last_viewed_at": utcnow()}
            connection.execute(table.insert().values(**values))
            return values
        return dict(row._mapping)

    # -- navigation -------------------------------------------------------------------------

    def is_complete(self, image: ImageItem) -> bool:
        total = len(self._captions_of.get(image.id, ()))
        return total > 0 and self._done_in_image.get(image.id, 0) == total

    def next_unrated(self, after: int) -> int | None:
        """Index of the next image after `after` (wrapping around) that is not complete
        and not flagged as broken by this annotator."""
        count = len(self.images)
        for step in range(1, count + 1):
            index = (after + step) % count
            image = self.images[index]
            if not self.is_complete(image) and image.id not in self.flagged:
                return index
        return None

    def flag_broken(self, index: int, reason: str) -> None:
        """Record that the image cannot be rated (and why); "next image" skips it now."""
        image = self.images[index]
        with self.engine.begin() as connection:
            flag_image(connection, image.id, self.annotator_id, self.annotator, reason)
        self.flagged.add(image.id)

    def resume_position(self) -> tuple[int, int]:
        """(image index, focused caption) where this annotator last was; else the first
        image not yet complete."""
        table = Assignment.__table__
        with self.engine.connect() as connection:
            row = connection.execute(
                select(table.c.image_id, table.c.focus)
                .where(table.c.annotator_id == self.annotator_id, table.c.stage == int(self.stage))
                .order_by(table.c.last_viewed_at.desc(), table.c.id.desc())
                .limit(1)
            ).one_or_none()
        if row is not None and row.image_id in self._index_of and (
                row.image_id not in self.flagged):
            return self._index_of[row.image_id], row.focus
        first = self.next_unrated(-1) if self.images else None
        return (first if first is not None else 0), 0

    def progress(self) -> Progress:
        return Progress(self._images_done, len(self.images), len(self._complete),
                        len(self._image_of))

    # -- reading ----------------------------------------------------------------------------

    def open_image(self, index: int) -> list[CaptionGroup]:
        """The image's captions as the annotator sees them: identical texts merged, then
        shuffled with the seed stored for this (image, annotator)."""
        image = self.images[index]
        caption = Caption.__table__
        with self.engine.begin() as connection:
            seed = int(self._assignment(connection, image.id)["shuffle_seed"])
            rows = self._caption_rows(connection, caption.c.image_id == image.id)
        reviewed = {}
        if self.stage == Stage.SECOND:
            with self.engine.connect() as connection:
                reviewed = primary_first_ratings(connection, [row.id for row in rows])
        groups: dict[str, list] = {}
        for row in rows:
            groups.setdefault(row.text.strip(), []).append(row)
        result = []
        for text, members in groups.items():
            first = members[0]
            values = _filled(first)
            reference = reviewed.get(first.id)
            result.append(CaptionGroup(
                tuple(m.id for m in members), text, values,
                {f: reference[f] for f in RATING_FIELDS} if reference else None))
        random.Random(seed).shuffle(result)
        self._opened = (image.id, self._clock())
        return result

    def look_at(self, index: int) -> None:
        """Record that the annotator has this image open: whatever scores the screen shows
        count as seen from now on (see `seen_scores`)."""
        image = self.images[index]
        with self.engine.begin() as connection:
            self._assignment(connection, image.id)
        self._opened = (image.id, self._clock())

    def remember_position(self, index: int, focus: int) -> None:
        """Store where the annotator is and add the time spent on the image so far."""
        image = self.images[index]
        with self.engine.begin() as connection:
            self._save_time_and_focus(connection, image.id, focus)

    def _save_time_and_focus(self, connection: Connection, image_id: int, focus: int) -> None:
        table = Assignment.__table__
        self._assignment(connection, image_id)
        elapsed = 0.0
        if self._opened is not None and self._opened[0] == image_id:
            now = self._clock()
            elapsed = max(0.0, now - self._opened[1])
            self._opened = (image_id, now)
        connection.execute(
            update(table)
            .where(table.c.image_id == image_id, table.c.annotator_id == self.annotator_id,
                   table.c.stage == int(self.stage))
            .values(seconds=table.c.seconds + elapsed, focus=focus, last_viewed_at=utcnow())
        )

    # -- changing ---------------------------------------------------------------------------

    def validate(self, values: dict[str, object]) -> None:
        for field, value in values.items():
            if field not in RATING_FIELDS:
                raise ValueError(f"unknown rating field {field!r}")
            if field in SCORE_KEYS and value is not None:
                dimension = self.rubric.dimension(field)
                if value not in dimension.scale:
                    raise ValueError(f"{field} must be {dimension.min}-{dimension.max}")
            if field in PENALTY_KEYS and value:
                if not self.rubric.has_penalty(field):
                    raise ValueError(f"rubric {self.rubric.signature} has no {field} penalty")
                if not self.rubric.penalty(field).allows(float(value)):  # type: ignore[arg-type]
                    raise ValueError(f"{field} penalty {value} is not one the rubric allows")

    def set_values(
        self, group: CaptionGroup, values: dict[str, object], *, image_index: int, focus: int
    ) -> CaptionGroup:
        """Apply `values` to every caption of the group, commit, and log each field change."""
        self.validate(values)
        changed = {f: v for f, v in values.items() if group.values.get(f) != v}
        if not changed:
            return group
        change_id = uuid.uuid4().hex
        with self.engine.begin() as connection:
            check_may_rate(connection, self.annotator_id, self.stage,
                           self.images[image_index].id)
            for caption_id in group.caption_ids:
                self._write(connection, caption_id, changed, change_id, action="update")
            self._save_time_and_focus(connection, self.images[image_index].id, focus)
        new = replace(group, values={**group.values, **changed})
        for caption_id in group.caption_ids:
            self._track_completion(caption_id, new.complete)
        return new

    def _track_completion(self, caption_id: int, complete: bool) -> None:
        """Keep the in-memory progress counts in step with a committed change (O(1))."""
        if complete == (caption_id in self._complete):
            return
        image_id = self._image_of[caption_id]
        was_done = self.is_complete(self.images[self._index_of[image_id]])
        if complete:
            self._complete.add(caption_id)
            self._done_in_image[image_id] = self._done_in_image.get(image_id, 0) + 1
        else:
            self._complete.discard(caption_id)
            self._done_in_image[image_id] -= 1
        self._images_done += self.is_complete(self.images[self._index_of[image_id]]) - was_done

    def _write(
        self,
        connection: Connection,
        caption_id: int,
        values: dict[str, object],
        change_id: str,
        *,
        action: str,
        reverts: str | None = None,
    ) -> dict[str, object]:
        """Upsert this annotator's rating of one caption and log old -> new per field.
        Returns the rating's values after the write."""
        rating, event = Rating.__table__, Event.__table__
        now = utcnow()
        row = connection.execute(
            select(rating).where(rating.c.caption_id == caption_id,
                                 rating.c.annotator_id == self.annotator_id,
                                 rating.c.stage == int(self.stage))
        ).one_or_none()
        if row is None:
            old = dict(EMPTY_RATING)
            rating_id = connection.execute(
                rating.insert().values(
                    caption_id=caption_id, annotator_id=self.annotator_id, stage=int(self.stage),
                    rubric=self.rubric.signature, seconds=0.0, created_at=now, updated_at=now,
                    **{**EMPTY_RATING, **values},
                )
            ).inserted_primary_key[0]
        else:
            old = {f: getattr(row, f) for f in RATING_FIELDS}
            rating_id = row.id
            connection.execute(
                update(rating).where(rating.c.id == rating_id).values(updated_at=now, **values)
            )
        connection.execute(
            event.insert(),
            [
                {"at": now, "actor": self.annotator, "action": action, "table_name": "rating",
                 "row_id": rating_id, "field_name": field, "old_value": json.dumps(old[field]),
                 "new_value": json.dumps(value), "change_id": change_id, "reverts": reverts}
                for field, value in values.items()
            ],
        )
        return {**old, **values}

    def undo(self) -> tuple[list[str], int] | None:
        """Revert this annotator's latest change not yet undone. Returns the fields reverted
        and one caption it touched (so the screen can show it), or None if nothing is left.
        Raises ProtocolError where the protocol no longer allows the change (e.g. stage 1
        of an image opened for review)."""
        event, rating = Event.__table__, Rating.__table__
        undone = select(event.c.reverts).where(event.c.reverts.is_not(None))
        with self.engine.begin() as connection:
            change_id = connection.execute(
                select(event.c.change_id)
                .join(rating, rating.c.id == event.c.row_id)
                .where(event.c.actor == self.annotator, event.c.action == "update",
                       event.c.table_name == "rating", rating.c.stage == int(self.stage),
                       event.c.change_id.not_in(undone))
                .order_by(event.c.id.desc())
                .limit(1)
            ).scalar()
            if change_id is None:
                return None
            events = connection.execute(
                select(event.c.row_id, event.c.field_name, event.c.old_value)
                .where(event.c.change_id == change_id)
                .order_by(event.c.id.desc())
            ).all()
            restore: dict[int, dict[str, object]] = {}
            for row in events:
                restore.setdefault(row.row_id, {})[row.field_name] = json.loads(row.old_value)
            undo_id = uuid.uuid4().hex
            caption_of = dict(
                connection.execute(
                    select(rating.c.id, rating.c.caption_id).where(rating.c.id.in_(restore))
                ).all()
            )
            images = set(connection.execute(select(Caption.__table__.c.image_id).where(
                Caption.__table__.c.id.in_(caption_of.values()))).scalars())
            for image_id in images:  # an undo is a change like any other
                check_may_rate(connection, self.annotator_id, self.stage, image_id)
            for rating_id, values in restore.items():
                after = self._write(connection, caption_of[rating_id], values, undo_id,
                                    action="undo", reverts=change_id)
                complete = after["precision"] is not None and after["recall"] is not None
                self._track_completion(caption_of[rating_id], complete)
        fields = list(dict.fromkeys(row.field_name for row in reversed(events)))
        return fields, next(iter(caption_of.values()))

    def group_for_caption(self, caption_id: int) -> CaptionGroup:
        """The caption with the identical captions of its image (rated together, as
        `open_image` shows them), with this annotator's values at this stage."""
        caption = Caption.__table__
        with self.engine.connect() as connection:
            image_id, text = connection.execute(
                select(caption.c.image_id, caption.c.text).where(caption.c.id == caption_id)
            ).one()
            rows = self._caption_rows(connection, caption.c.image_id == image_id)
        same = [row for row in rows if row.text.strip() == text.strip()]
        mine = next(row for row in same if row.id == caption_id)
        return CaptionGroup((caption_id, *[r.id for r in same if r.id != caption_id]),
                            text.strip(), _filled(mine))

    def _caption_rows(self, connection: Connection, where: ColumnElement[bool]) -> list:
        """Captions matching `where` with this annotator's rating values at this stage."""
        caption, rating = Caption.__table__, Rating.__table__
        return connection.execute(
            select(caption.c.id, caption.c.text, *[rating.c[f] for f in RATING_FIELDS])
            .select_from(caption)
            .outerjoin(rating, and_(rating.c.caption_id == caption.c.id,
                                    rating.c.annotator_id == self.annotator_id,
                                    rating.c.stage == int(self.stage)))
            .where(where)
            .order_by(caption.c.id)
        ).all()

    def image_index_of_caption(self, caption_id: int) -> int:
        with self.engine.connect() as connection:
            image_id = connection.execute(
                select(Caption.__table__.c.image_id).where(Caption.__table__.c.id == caption_id)
            ).scalar_one()
        return self._index_of[image_id]
