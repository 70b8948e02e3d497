"""The annotation session behind the rating screens: what one annotator sees and changes.

Every change is committed as it is made, in one transaction with its event-log rows, so a
killed process loses nothing; undo reverts the annotator's last change and is logged too.
Each write checks the THUMB protocol in its own transaction, under the image's lock, and
is retried while the database is busy (`storage.db.run_write`). Opening an image at stage
1 or 2 claims it, so two annotators never take the same image at once."""

from __future__ import annotations

import json
import random
import secrets
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace

from sqlalchemy import ColumnElement, Connection, Engine, Row, and_, select, update

from rubrics import PENALTY_KEYS, SCORE_KEYS, Rubric
from storage.db import run_write
from storage.events import log_change
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
from storage.protocol import (
    ProtocolError,
    check_may_rate,
    group_identical,
    open_images,
)
from storage.rubric_registry import project_rubric
from storage.workflow import (
    Disagreement,
    FluencyItem,
    disagreements,
    fluency_queue,
    primary_first_ratings,
    record_fluency_check,
    record_resolution,
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

    def register(connection: Connection) -> bool | None:
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
            log_change(connection, actor=name, action="update", table="annotator",
                       row_id=row.id, old={"native_english": row.native_english},
                       new={"native_english": native_english})
            return native_english
        return row.native_english

    return run_write(engine, register)


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
        with engine.connect() as connection:
            self.annotator_id = connection.execute(
                select(Annotator.__table__.c.id).where(Annotator.__table__.c.name == annotator)
            ).scalar_one()
            open_to_me = (open_images(connection, annotator, stage)
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
        self._count_progress()
        self._opened: tuple[int, float] | None = None

    def _count_progress(self) -> None:
        self._index_of = {image.id: index for index, image in enumerate(self.images)}
        self._image_of = {c: i for i, captions in self._captions_of.items() for c in captions}
        self._done_in_image: dict[int, int] = {}
        for caption_id in self._complete:
            image_id = self._image_of[caption_id]
            self._done_in_image[image_id] = self._done_in_image.get(image_id, 0) + 1
        self._images_done = sum(1 for image in self.images if self.is_complete(image))

    def _forget(self, image_id: int) -> None:
        """Take an image that is no longer open to this annotator out of their list, so
        the progress totals count only what they can still do."""
        self.images = [image for image in self.images if image.id != image_id]
        self._complete -= set(self._captions_of.pop(image_id, ()))
        self._count_progress()

    # -- set-up -----------------------------------------------------------------------------

    def _assignment(self, connection: Connection, image_id: int, *,
                    claim: bool) -> dict[str, object]:
        """This annotator's assignment of the image at this stage, made if need be. With
        `claim` (opening the image at stage 1 or 2) it is also their claim: taken, or
        taken again once released, only where the protocol allows (under the image's
        lock, so a second annotator opening it at the same moment is refused)."""
        table = Assignment.__table__
        row = self._check_claim(connection, image_id, lock=True) if claim else (
            connection.execute(select(table).where(self._mine(image_id))).one_or_none())
        if row is None:
            values = {"image_id": image_id, "annotator_id": self.annotator_id,
                      "stage": int(self.stage), "shuffle_seed": self._seed_source(),
                      "seconds": 0.0, "focus": 0, "last_viewed_at": utcnow()}
            connection.execute(table.insert().values(**values))
            return values
        if claim and row.released_at is not None:
            connection.execute(update(table).where(self._mine(image_id))
                               .values(released_at=None))
        return dict(row._mapping)

    def _mine(self, image_id: int) -> ColumnElement[bool]:
        table = Assignment.__table__
        return and_(table.c.image_id == image_id, table.c.annotator_id == self.annotator_id,
                    table.c.stage == int(self.stage))

    def _check_claim(self, connection: Connection, image_id: int, *, lock: bool) -> Row | None:
        """This annotator's assignment of the image; raises ProtocolError when opening the
        image would take a claim (none held yet, or released) that the protocol refuses."""
        row = connection.execute(select(Assignment.__table__).where(self._mine(image_id))
                                 ).one_or_none()
        if row is None or row.released_at is not None:
            check_may_rate(connection, self.annotator, self.stage, image_id, lock=lock)
        return row

    def _release_if_untouched(self, connection: Connection, image_id: int) -> None:
        """Leaving an image without having rated any of it gives up the claim on it."""
        table, rating, caption = Assignment.__table__, Rating.__table__, Caption.__table__
        rated = connection.execute(
            select(rating.c.id).join(caption, rating.c.caption_id == caption.c.id)
            .where(caption.c.image_id == image_id, rating.c.annotator_id == self.annotator_id,
                   rating.c.stage == int(self.stage)).limit(1)).first()
        if rated is None:
            connection.execute(update(table).where(
                self._mine(image_id), table.c.released_at.is_(None))
                .values(released_at=utcnow()))

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
        run_write(self.engine, lambda connection: flag_image(
            connection, image.id, self.annotator_id, self.annotator, reason))
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
        shuffled with the seed stored for this (image, annotator). At stages 1 and 2 this
        claims the image and gives up the one left untouched before it; the values under
        review are read in the same transaction, so they are what stage 1 keeps. Raises
        ProtocolError (ImageTaken when another annotator holds it) after taking the image
        out of this session's list when it is no longer open to the annotator."""
        image = self.images[index]
        caption = Caption.__table__
        claim = self.stage in (Stage.FIRST, Stage.SECOND)
        left = self._opened[0] if self._opened and self._opened[0] != image.id else None

        def open_it(connection: Connection) -> tuple[int, list, dict]:
            seed = int(self._assignment(connection, image.id, claim=claim)["shuffle_seed"])
            if claim and left is not None:
                self._release_if_untouched(connection, left)
            rows = self._caption_rows(connection, caption.c.image_id == image.id)
            reviewed = (primary_first_ratings(connection, [row.id for row in rows])
                        if self.stage == Stage.SECOND else {})
            return seed, rows, reviewed

        try:
            if claim:  # refused on what is committed, without waiting for the write lock
                with self.engine.connect() as connection:
                    self._check_claim(connection, image.id, lock=False)
            seed, rows, reviewed = run_write(self.engine, open_it)
        except ProtocolError:
            self._forget(image.id)
            raise
        result = []
        for (_, text), members in group_identical(rows, lambda _: image.id,
                                                  lambda r: r.text).items():
            reference = reviewed.get(members[0].id)
            result.append(CaptionGroup(
                tuple(m.id for m in members), text, _filled(members[0]),
                {f: reference[f] for f in RATING_FIELDS} if reference else None))
        random.Random(seed).shuffle(result)
        self._opened = (image.id, self._clock())
        return result

    def close(self) -> None:
        """Leave the session: the claim on the open image goes if it was left untouched,
        so quitting on an image one never rated does not keep it from others."""
        if self._opened is not None and self.stage in (Stage.FIRST, Stage.SECOND):
            image_id = self._opened[0]
            run_write(self.engine, lambda connection: self._release_if_untouched(connection,
                                                                                 image_id))

    def look_at(self, index: int) -> None:
        """Record that the annotator has this image open: whatever scores the screen shows
        count as seen from now on (the image's stage 1 is closed)."""
        image = self.images[index]
        run_write(self.engine, lambda connection: self._assignment(connection, image.id,
                                                                   claim=False))
        self._opened = (image.id, self._clock())

    def remember_position(self, index: int, focus: int) -> None:
        """Store where the annotator is and add the time spent on the image so far."""
        image_id, elapsed = self.images[index].id, self._elapsed(self.images[index].id)
        run_write(self.engine, lambda connection: self._save_time_and_focus(
            connection, image_id, focus, elapsed))

    def _elapsed(self, image_id: int) -> float:
        """Seconds on the image since it was opened or last saved; the clock restarts."""
        if self._opened is None or self._opened[0] != image_id:
            return 0.0
        now = self._clock()
        elapsed, self._opened = max(0.0, now - self._opened[1]), (image_id, now)
        return elapsed

    def _save_time_and_focus(self, connection: Connection, image_id: int, focus: int,
                             elapsed: float) -> None:
        table = Assignment.__table__
        connection.execute(
            update(table).where(self._mine(image_id))
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
        """Apply `values` to every caption of the group, commit, and log each field change:
        one transaction that first checks the protocol under the image's lock. Raises
        ProtocolError where the protocol refuses, DatabaseBusy when the database stays
        locked; nothing is written then."""
        self.validate(values)
        changed = {f: v for f, v in values.items() if group.values.get(f) != v}
        if not changed:
            return group
        image_id = self.images[image_index].id
        elapsed = self._elapsed(image_id)

        def write(connection: Connection) -> None:
            check_may_rate(connection, self.annotator, self.stage, image_id)
            change_id = uuid.uuid4().hex
            for caption_id in group.caption_ids:
                self._write(connection, caption_id, changed, change_id, action="update")
            self._save_time_and_focus(connection, image_id, focus, elapsed)

        run_write(self.engine, write)
        new = replace(group, values={**group.values, **changed})
        for caption_id in group.caption_ids:
            self._track_completion(caption_id, new.complete)
        return new

    def _track_completion(self, caption_id: int, complete: bool) -> None:
        """Keep the in-memory progress counts in step with a committed change (O(1))."""
        if complete == (caption_id in self._complete) or caption_id not in self._image_of:
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
        rating = Rating.__table__
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
        log_change(connection, actor=self.annotator, action=action, table="rating",
                   row_id=rating_id, old=old, new=values, change_id=change_id, reverts=reverts)
        return {**old, **values}

    def undo(self) -> tuple[list[str], int] | None:
        """Revert this annotator's latest change not yet undone. Returns the fields reverted
        and one caption it touched (so the screen can show it), or None if nothing is left.
        Raises ProtocolError where the protocol no longer allows the change (e.g. stage 1
        of an image opened for review)."""
        event, rating = Event.__table__, Rating.__table__
        undone = select(event.c.reverts).where(event.c.reverts.is_not(None))

        def undo(connection: Connection) -> tuple[list, dict[int, int], dict] | None:
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
            caption_of = dict(
                connection.execute(
                    select(rating.c.id, rating.c.caption_id).where(rating.c.id.in_(restore))
                ).all()
            )
            for image_id in sorted(self._images_of(connection, caption_of.values())):
                check_may_rate(connection, self.annotator, self.stage, image_id)  # a change
            undo_id = uuid.uuid4().hex
            after = {rating_id: self._write(connection, caption_of[rating_id], values, undo_id,
                                            action="undo", reverts=change_id)
                     for rating_id, values in restore.items()}
            return events, caption_of, after

        done = run_write(self.engine, undo)
        if done is None:
            return None
        events, caption_of, after = done
        for rating_id, values in after.items():
            complete = values["precision"] is not None and values["recall"] is not None
            self._track_completion(caption_of[rating_id], complete)
        fields = list(dict.fromkeys(row.field_name for row in reversed(events)))
        return fields, next(iter(caption_of.values()))

    @staticmethod
    def _images_of(connection: Connection, caption_ids: Collection[int]) -> set[int]:
        caption = Caption.__table__
        return set(connection.execute(select(caption.c.image_id).where(
            caption.c.id.in_(caption_ids))).scalars())

    def group_for_caption(self, caption_id: int) -> CaptionGroup:
        """The caption with the identical captions of its image (rated together, as
        `open_image` shows them), with this annotator's values at this stage."""
        caption = Caption.__table__
        with self.engine.connect() as connection:
            image_id = self._images_of(connection, [caption_id]).pop()
            rows = self._caption_rows(connection, caption.c.image_id == image_id)
        (_, text), same = next(
            (key, group) for key, group in group_identical(rows, lambda _: image_id,
                                                           lambda r: r.text).items()
            if any(row.id == caption_id for row in group))
        mine = next(row for row in same if row.id == caption_id)
        return CaptionGroup((caption_id, *[r.id for r in same if r.id != caption_id]),
                            text, _filled(mine))

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

    def index_of(self, image_id: int) -> int:
        return self._index_of[image_id]

    def image_index_of_caption(self, caption_id: int) -> int:
        with self.engine.connect() as connection:
            image_id = self._images_of(connection, [caption_id]).pop()
        return self._index_of[image_id]


class ResolutionSession(AnnotationSession):
    """A resolver's session: the disagreements they may settle, worst first (on images
    they neither rated nor reviewed), their final-stage values and the reasons."""

    def __init__(self, engine: Engine, resolver: str, *, rubric: Rubric | None = None) -> None:
        super().__init__(engine, resolver, stage=Stage.FINAL, rubric=rubric)

    def queue(self) -> list[Disagreement]:
        return disagreements(self.engine, resolver=self.annotator)

    def resolved_count(self) -> int:
        """How many of the disagreements open to this resolver are resolved already."""
        return len(disagreements(self.engine, include_resolved=True,
                                 resolver=self.annotator)) - len(self.queue())

    def record_reasons(self, group: CaptionGroup, reasons: list[str]) -> None:
        """Why the group's final values are right (with its note), for every caption of
        the group at once."""
        codes = [reason.code for reason in self.rubric.resolution_reasons]
        record_resolution(self.engine, group.caption_ids, self.annotator, reasons,
                          str(group.values["note"]), codes)


class FluencyRoundSession:
    """A native English speaker's fluency round: the captions waiting for it and the
    verdicts, each setting the final fluency penalty of a caption and its twins."""

    def __init__(self, engine: Engine, checker: str, rubric: Rubric | None = None) -> None:
        if not is_native_speaker(engine, checker):
            raise ProtocolError(f"{checker!r} is not recorded as a native English speaker "
                                "(set it with `thumb annotator NAME --native`)")
        self.engine, self.checker = engine, checker
        self.rubric = rubric or project_rubric(engine)

    def queue(self) -> list[FluencyItem]:
        return fluency_queue(self.engine)

    def record(self, item: FluencyItem, fluency: float, types: str | None) -> None:
        record_fluency_check(self.engine, item.caption_ids, self.checker, fluency, types)

    def image_of(self, item: FluencyItem) -> tuple[str, str | None]:
        """The key and file path of the image the caption describes."""
        from storage.queries import image_of_caption

        return image_of_caption(self.engine, item.caption_id)
