"""What every rating session shares, held by each (composition, not a base class): one
annotator's ratings at one stage.

- `Worklist`: the images a session lists and which of their captions the annotator has
  complete. It is the session's only cache, and it is only ever set from the database: in
  full when the session starts, then image by image from what each write transaction
  reads back after writing (`Worklist.settle`), so no write path keeps counts by hand.
- `RatingDesk`: reads the images' caption groups, commits values with their event-log rows
  under `run_write` (the protocol checked in the same transaction), undoes, and keeps the
  annotator's place (shuffle seed, time, focus). Building one only reads: the annotator's
  row is made, and their native-speaker flag recorded, by their first write, inside that
  write's transaction (`RatingDesk.write`).

The stage's own rules stay with the sessions in `storage.rating.rating_sessions`: claims and the
reviewed values at stages 1 and 2, the disagreements and reasons of the final stage."""

from __future__ import annotations

import json
import random
import secrets
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from sqlalchemy import ColumnElement, Connection, Engine, Row, Select, and_, select, update

from rubrics import PENALTY_KEYS, SCORE_KEYS, Rubric
from rubrics.model import error_codes
from storage.db.engine import run_write
from storage.events import log_change
from storage.models import (
    RATING_VALUE_FIELDS,
    Assignment,
    Caption,
    Event,
    Image,
    Rating,
    Stage,
    utcnow,
)
from storage.rating.annotators import register, registration
from storage.rating.image_flags import flag_image, flagged_by, take_back
from storage.rating.protocol import (
    ProtocolError,
    check_may_rate,
    complete_clause,
    group_identical,
    is_complete,
)

T = TypeVar("T")

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
        return is_complete(self.values)

    def total(self, rubric: Rubric) -> float | None:
        if not self.complete:
            return None
        return rubric.total_of(self.values)


@dataclass(frozen=True)
class Undone:
    """What an undo took back: the `fields` of one change to caption groups (`caption_id`
    one caption it touched, `caption_ids` all of them: an action on several groups, like
    accepting a whole image, is one change), or, with `flag`, the annotator's
    broken-image flag."""

    image_id: int
    fields: list[str]
    caption_id: int | None = None
    flag: bool = False
    caption_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Progress:
    images_done: int
    images_total: int
    captions_done: int
    captions_total: int


def filled(row: object) -> dict[str, object]:
    """A rating row's values, with the empty defaults where it has none yet."""
    values = {f: getattr(row, f) for f in RATING_FIELDS}
    return {f: EMPTY_RATING[f] if values[f] is None and f in EMPTY_RATING else values[f]
            for f in RATING_FIELDS}


def shown_captions(captions_of: dict[int, list[int]]) -> set[int]:
    return {caption for captions in captions_of.values() for caption in captions}


def group_of(rows: Sequence[Row], image_id: int, caption_id: int) -> CaptionGroup:
    """The caption `caption_id` with the identical captions among `rows` (its image's,
    with one annotator's values), as the screens show and rate them together."""
    (_, text), same = next(
        (key, group) for key, group in group_identical(rows, lambda _: image_id,
                                                       lambda r: r.text).items()
        if any(row.id == caption_id for row in group))
    mine = next(row for row in same if row.id == caption_id)
    return CaptionGroup((caption_id, *[r.id for r in same if r.id != caption_id]),
                        text, filled(mine))


class Worklist:
    """The images a session lists, each with its caption ids and those the annotator has
    complete at the session's stage. `settle` is the one way the completion changes."""

    def __init__(self, images: list[ImageItem], captions_of: dict[int, list[int]],
                 complete: dict[int, Collection[int]]) -> None:
        self.images = images
        self._captions_of = {image.id: frozenset(captions_of.get(image.id, ()))
                             for image in images}
        # only the images with any caption complete: most have none when a session starts
        self._done = {image_id: self._captions_of[image_id] & frozenset(captions)
                      for image_id, captions in complete.items()
                      if image_id in self._captions_of}
        self._index()

    def _index(self) -> None:
        """The look-ups and totals, derived from the lists above (after any change)."""
        self._index_of = {image.id: index for index, image in enumerate(self.images)}
        self._captions_total = sum(map(len, self._captions_of.values()))
        self._captions_done = sum(map(len, self._done.values()))
        self._images_done = sum(map(self.is_complete, self._done))

    def settle(self, complete: dict[int, Collection[int]]) -> None:
        """Image id -> the captions of it that are complete now, as a write read them back
        in its transaction; images this list does not hold are ignored."""
        for image_id, captions in complete.items():
            if image_id not in self._captions_of:
                continue
            was, before = self.is_complete(image_id), len(self._done.get(image_id, ()))
            self._done[image_id] = self._captions_of[image_id] & frozenset(captions)
            self._captions_done += len(self._done[image_id]) - before
            self._images_done += self.is_complete(image_id) - was

    def including(self, images: list[ImageItem], captions_of: dict[int, list[int]],
                  complete: dict[int, Collection[int]]) -> Worklist:
        """A worklist of `images` (this one's, in any order, and others, whose captions and
        completion `captions_of` and `complete` give): gold images seeded in
        (`storage.rating.gold`)."""
        return Worklist(images, {**self._captions_of, **captions_of},
                        {**self._done, **complete})

    def drop(self, image_id: int) -> None:
        """Take an image out of the list (no longer open to the annotator)."""
        self.images = [image for image in self.images if image.id != image_id]
        self._captions_of.pop(image_id, None)
        self._done.pop(image_id, None)
        self._index()

    def is_complete(self, image_id: int) -> bool:
        captions = self._captions_of.get(image_id, frozenset())
        return bool(captions) and len(self._done.get(image_id, ())) == len(captions)

    def index_of(self, image_id: int) -> int:
        return self._index_of[image_id]

    def holds(self, image_id: int) -> bool:
        return image_id in self._index_of

    def progress(self) -> Progress:
        return Progress(self._images_done, len(self.images), self._captions_done,
                        self._captions_total)


class RatingDesk:
    """One annotator's ratings at one stage, over the images `listed` picks (all when it
    gives None): the part every rating session holds. Construction only reads."""

    def __init__(
        self,
        engine: Engine,
        annotator: str,
        stage: Stage,
        rubric: Rubric,
        *,
        native_english: bool | None = None,
        listed: Callable[[Connection], Collection[int] | None] = lambda _: None,
        seed_source: Callable[[], int] | None = None,
        clock: Callable[[], float] = time.monotonic,
        after_write: Callable[[Connection, int, int, Collection[str]], None] | None = None,
    ) -> None:
        """`after_write(connection, annotator id, caption id, fields)`: the stage's rule
        on a change to a caption's rating (an edit or an undo), run in its transaction."""
        self.engine, self.annotator, self.stage, self.rubric = engine, annotator, stage, rubric
        self._after_write = after_write
        self._native_english = native_english
        self._seed_source = seed_source or (lambda: secrets.randbits(31))
        self._clock = clock
        self._opened: tuple[int, float] | None = None
        # the changes this desk made, oldest first (kind, change id): undo takes back the
        # last of them, never a change of an earlier session, by the kind's undoer (a
        # session that writes elsewhere, like gold answers, adds its own kind)
        self._changes: list[tuple[str, str]] = []
        self._undoers: dict[str, Callable[[str], Undone | None]] = {
            "rating": self._undo_rating, "flag": self._undo_flag}
        with engine.connect() as connection:
            row = registration(connection, annotator, native_english)  # refusals now
            self._annotator_id: int | None = None if row is None else row.id
            # registered already (nothing to record) unless a first write must record it
            self._registered = row is not None and (
                native_english is None or native_english == row.native_english)
            self.worklist = self._load(connection, listed(connection))
            self.flagged = (set() if self._annotator_id is None
                            else flagged_by(connection, self._annotator_id))

    def _load(self, connection: Connection, only: Collection[int] | None) -> Worklist:
        image = Image.__table__
        return self._worklist(connection, [
            ImageItem(*row) for row in connection.execute(
                select(image.c.id, image.c.key, image.c.path).order_by(image.c.id))
            if only is None or row.id in only])

    def _worklist(self, connection: Connection, images: list[ImageItem]) -> Worklist:
        """These images with their captions and what this annotator has complete."""
        caption = Caption.__table__
        shown = {item.id for item in images}
        captions_of: dict[int, list[int]] = {}
        for image_id, caption_id in connection.execute(select(caption.c.image_id,
                                                              caption.c.id)):
            if image_id in shown:
                captions_of.setdefault(image_id, []).append(caption_id)
        return Worklist(images, captions_of,
                        self._complete_in(connection, self._annotator_id, None))

    # -- who writes ---------------------------------------------------------------------------

    @property
    def annotator_id(self) -> int | None:
        """The annotator's id; None until their first write where they are new."""
        return self._annotator_id

    def write(self, work: Callable[[Connection, int], T]) -> T:
        """Run `work(connection, annotator id)` in one write transaction (`run_write`),
        registering the annotator first in that transaction if this session has not yet:
        their row, and native_english when it was given. The registration stands even
        where the protocol refuses the work (its ProtocolError is raised after the commit,
        the work's own writes undone), as one who tried to rate is an annotator."""
        def run(connection: Connection) -> tuple[int, T | None, ProtocolError | None]:
            me = self._annotator_id
            if self._registered and me is not None:
                return me, work(connection, me), None
            me = register(connection, self.annotator, self._native_english)[0]
            try:
                with connection.begin_nested():
                    return me, work(connection, me), None
            except ProtocolError as refusal:
                return me, None, refusal

        me, result, refusal = run_write(self.engine, run)
        self._annotator_id, self._registered = me, True
        if refusal is not None:
            raise refusal
        return result  # type: ignore[return-value]

    def register(self) -> int:
        """Register the annotator now if this session has not yet (a write of its own,
        for an action whose own write registers no one); returns their id."""
        if self._registered and self._annotator_id is not None:
            return self._annotator_id
        return self.write(lambda _, me: me)

    def mine(self, image_id: int, annotator_id: int | None) -> ColumnElement[bool]:
        """This annotator's assignment row of the image at this stage."""
        table = Assignment.__table__
        return and_(table.c.image_id == image_id, table.c.annotator_id == annotator_id,
                    table.c.stage == int(self.stage))

    # -- the annotator's place: assignment, time, focus --------------------------------------

    def assignment_row(self, connection: Connection, annotator_id: int | None,
                       image_id: int) -> Row | None:
        if annotator_id is None:
            return None
        return connection.execute(select(Assignment.__table__)
                                  .where(self.mine(image_id, annotator_id))).one_or_none()

    def make_assignment(self, connection: Connection, annotator_id: int,
                        image_id: int) -> dict[str, object]:
        values = {"image_id": image_id, "annotator_id": annotator_id,
                  "stage": int(self.stage), "shuffle_seed": self._seed_source(),
                  "seconds": 0.0, "focus": 0, "last_viewed_at": utcnow()}
        connection.execute(Assignment.__table__.insert().values(**values))
        return values

    def assignment(self, connection: Connection, annotator_id: int,
                   image_id: int) -> dict[str, object]:
        """This annotator's assignment of the image at this stage, made if need be."""
        row = self.assignment_row(connection, annotator_id, image_id)
        return (self.make_assignment(connection, annotator_id, image_id) if row is None
                else dict(row._mapping))

    @property
    def opened(self) -> int | None:
        """The image open now (its time is counting), if any."""
        return None if self._opened is None else self._opened[0]

    def look_at(self, index: int) -> None:
        image = self.images[index]
        self.write(lambda connection, me: self.assignment(connection, me, image.id))
        self._opened = (image.id, self._clock())

    def remember_position(self, index: int, focus: int) -> None:
        image_id, elapsed = self.images[index].id, self._elapsed(self.images[index].id)
        self.write(lambda connection, me: self.save_time_and_focus(
            connection, me, image_id, focus, elapsed))

    def _elapsed(self, image_id: int) -> float:
        """Seconds on the image since it was opened or last saved; the clock restarts."""
        if self._opened is None or self._opened[0] != image_id:
            return 0.0
        now = self._clock()
        elapsed, self._opened = max(0.0, now - self._opened[1]), (image_id, now)
        return elapsed

    def save_time_and_focus(self, connection: Connection, annotator_id: int, image_id: int,
                            focus: int, elapsed: float) -> None:
        table = Assignment.__table__
        connection.execute(
            update(table).where(self.mine(image_id, annotator_id))
            .values(seconds=table.c.seconds + elapsed, focus=focus, last_viewed_at=utcnow())
        )

    def resume_position(self) -> tuple[int, int]:
        table = Assignment.__table__
        row = None
        if self._annotator_id is not None:
            with self.engine.connect() as connection:
                row = connection.execute(
                    select(table.c.image_id, table.c.focus)
                    .where(table.c.annotator_id == self._annotator_id,
                           table.c.stage == int(self.stage))
                    .order_by(table.c.last_viewed_at.desc(), table.c.id.desc())
                    .limit(1)
                ).one_or_none()
        if row is not None and self.worklist.holds(row.image_id) and (
                row.image_id not in self.flagged):
            return self.worklist.index_of(row.image_id), row.focus
        first = self.next_unrated(-1) if self.images else None
        return (first if first is not None else 0), 0

    # -- navigation ---------------------------------------------------------------------------

    @property
    def images(self) -> list[ImageItem]:
        return self.worklist.images

    @images.setter
    def images(self, images: list[ImageItem]) -> None:
        """List these images instead (their completion read afresh)."""
        with self.engine.connect() as connection:
            self.worklist = self._worklist(connection, list(images))

    def is_complete(self, image: ImageItem) -> bool:
        return self.worklist.is_complete(image.id)

    def next_unrated(self, after: int) -> int | None:
        count = len(self.images)
        for step in range(1, count + 1):
            index = (after + step) % count
            image = self.images[index]
            if not self.is_complete(image) and image.id not in self.flagged:
                return index
        return None

    def flag_broken(self, index: int, reason: str) -> None:
        image = self.images[index]
        change_id = self.write(lambda connection, me: flag_image(connection, image.id, me,
                                                                 self.annotator, reason))
        self.flagged.add(image.id)
        if change_id is not None:
            self.remember("flag", change_id)

    def index_of(self, image_id: int) -> int:
        return self.worklist.index_of(image_id)

    def image_index_of_caption(self, caption_id: int) -> int:
        with self.engine.connect() as connection:
            image_id = images_of(connection, [caption_id]).pop()
        return self.worklist.index_of(image_id)

    # -- reading ------------------------------------------------------------------------------

    def caption_rows(self, connection: Connection, annotator_id: int | None,
                     where: ColumnElement[bool]) -> list:
        """Captions matching `where` with this annotator's rating values at this stage."""
        caption, rating = Caption.__table__, Rating.__table__
        return connection.execute(
            select(caption.c.id, caption.c.text, *[rating.c[f] for f in RATING_FIELDS])
            .select_from(caption)
            .outerjoin(rating, and_(rating.c.caption_id == caption.c.id,
                                    rating.c.annotator_id == annotator_id,
                                    rating.c.stage == int(self.stage)))
            .where(where)
            .order_by(caption.c.text, caption.c.id)  # (an annotator's role reads no import order)
        ).all()

    def image_rows(self, connection: Connection, annotator_id: int | None,
                   image_id: int) -> list:
        return self.caption_rows(connection, annotator_id,
                                 Caption.__table__.c.image_id == image_id)

    def show(self, image_id: int, rows: list, seed: int,
             reviewed: dict[int, dict[str, object]] | None = None) -> list[CaptionGroup]:
        """The image's caption rows as the annotator sees them: identical texts merged (with
        the values under review, if any), shuffled with the seed; the image's time starts."""
        groups = []
        for (_, text), members in group_identical(rows, lambda _: image_id,
                                                  lambda r: r.text).items():
            reference = (reviewed or {}).get(members[0].id)
            groups.append(CaptionGroup(
                tuple(m.id for m in members), text, filled(members[0]),
                {f: reference[f] for f in RATING_FIELDS} if reference else None))
        random.Random(seed).shuffle(groups)
        self._opened = (image_id, self._clock())
        return groups

    def open_image(self, index: int) -> list[CaptionGroup]:
        """The image's caption groups, its assignment made if need be (no claim)."""
        image = self.images[index]

        def open_it(connection: Connection, me: int) -> tuple[int, list]:
            seed = int(self.assignment(connection, me, image.id)["shuffle_seed"])
            return seed, self.image_rows(connection, me, image.id)

        seed, rows = self.write(open_it)
        return self.show(image.id, rows, seed)

    def group_for_caption(self, caption_id: int) -> CaptionGroup:
        caption = Caption.__table__
        with self.engine.connect() as connection:
            image_id = images_of(connection, [caption_id]).pop()
            rows = self.caption_rows(connection, self._annotator_id,
                                     caption.c.image_id == image_id)
        return group_of(rows, image_id, caption_id)

    def _complete_in(self, connection: Connection, annotator_id: int | None,
                     image_ids: Collection[int] | Select | None) -> dict[int, set[int]]:
        """Image id -> the captions of it this annotator has complete at this stage: for
        every image given (ids, or a query of them), each present even with none; else
        for every image where they have any."""
        caption, rating = Caption.__table__, Rating.__table__
        mine = and_(rating.c.caption_id == caption.c.id, rating.c.annotator_id == annotator_id,
                    rating.c.stage == int(self.stage), complete_clause(rating))
        found: dict[int, set[int]] = {}
        if image_ids is None:
            if annotator_id is not None:
                for image_id, caption_id in connection.execute(
                        select(caption.c.image_id, caption.c.id).join(rating, mine)):
                    found.setdefault(image_id, set()).add(caption_id)
            return found
        if not isinstance(image_ids, Select):
            image_ids = sorted(image_ids)
        for image_id, caption_id, rated in connection.execute(
                select(caption.c.image_id, caption.c.id, rating.c.id).select_from(caption)
                .outerjoin(rating, mine).where(caption.c.image_id.in_(image_ids))):
            captions = found.setdefault(image_id, set())
            if rated is not None:
                captions.add(caption_id)
        return found

    # -- changing -----------------------------------------------------------------------------

    def validate(self, values: dict[str, object],
                 current: dict[str, object] | None = None) -> None:
        """Refuse values the rubric does not allow, as the rating would hold them after
        the change (`current` and `values` together): each score on its dimension's scale,
        each penalty's amount with its error types by the rubric's one rule
        (`Rubric.penalty_problem`)."""
        for field in values:
            if field not in RATING_FIELDS:
                raise ValueError(f"unknown rating field {field!r}")
        after = {**(current or {}), **values}
        for dimension in self.rubric.dimensions:
            value = values.get(dimension.key)
            if value is not None and value not in dimension.scale:
                raise ValueError(f"{dimension.key} must be {dimension.min}-{dimension.max}")
        for field in PENALTY_KEYS:
            if field in values or f"{field}_type" in values:
                problem = self.rubric.penalty_problem(
                    field, float(after.get(field) or 0.0),  # type: ignore[arg-type]
                    error_codes(after.get(f"{field}_type")))  # type: ignore[arg-type]
                if problem:
                    raise ValueError(problem)

    def set_values(self, group: CaptionGroup, values: dict[str, object], *,
                   image_index: int, focus: int) -> CaptionGroup:
        return self.set_many([(group, values)], image_index=image_index, focus=focus)[0]

    def set_many(self, changes: Sequence[tuple[CaptionGroup, dict[str, object]]], *,
                 image_index: int, focus: int) -> list[CaptionGroup]:
        """Apply each (group, values) of one action on the image `image_index` in one
        transaction and one change, so one undo takes all of it back; returns the groups
        as they are now (a group the values leave as it was comes back unchanged)."""
        for group, values in changes:
            self.validate(values, group.values)
        changed = [{f: v for f, v in values.items() if group.values.get(f) != v}
                   for group, values in changes]
        if not any(changed):
            return [group for group, _ in changes]
        image_id = self.images[image_index].id
        elapsed = self._elapsed(image_id)
        change_id = uuid.uuid4().hex
        caption_ids = [caption_id for (group, _), new in zip(changes, changed, strict=True)
                       if new for caption_id in group.caption_ids]

        def write(connection: Connection, me: int) -> dict[int, set[int]]:
            check_may_rate(connection, self.annotator, self.stage, image_id)
            completed = []
            for (group, _), new in zip(changes, changed, strict=True):
                if not new:
                    continue
                for caption_id in group.caption_ids:
                    if (rating_id := self._write(connection, me, caption_id, new, change_id,
                                                 action="update")) is not None:
                        completed.append(rating_id)
            self.save_time_and_focus(connection, me, image_id, focus, elapsed)
            self._time_first_passes(connection, me, image_id, completed)
            return self._complete_in(connection, me, select(Caption.__table__.c.image_id)
                                     .where(Caption.__table__.c.id.in_(caption_ids)))

        self.worklist.settle(self.write(write))
        self.remember("rating", change_id)
        return [replace(group, values={**group.values, **new})
                for (group, _), new in zip(changes, changed, strict=True)]

    def _write(self, connection: Connection, annotator_id: int, caption_id: int,
               values: dict[str, object], change_id: str, *, action: str,
               reverts: str | None = None) -> int | None:
        """Upsert this annotator's rating of one caption and log old -> new per field;
        returns the rating's id where the write completed it (it was not complete before)."""
        rating = Rating.__table__
        now = utcnow()
        row = connection.execute(
            select(rating).where(rating.c.caption_id == caption_id,
                                 rating.c.annotator_id == annotator_id,
                                 rating.c.stage == int(self.stage))
        ).one_or_none()
        if row is None:
            old = dict(EMPTY_RATING)
            rating_id = connection.execute(
                rating.insert().values(
                    caption_id=caption_id, annotator_id=annotator_id, stage=int(self.stage),
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
        if self._after_write is not None:
            self._after_write(connection, annotator_id, caption_id, values.keys())
        return rating_id if not is_complete(old) and is_complete({**old, **values}) else None

    def _time_first_passes(self, connection: Connection, annotator_id: int, image_id: int,
                           completed: Collection[int]) -> None:
        """Give each rating just completed that has no time yet (never complete before;
        an imported one keeps its own) its first pass: the image's time so far less the
        time its earlier first passes took, shared evenly among them. A caption's time is
        then from opening the image (or the last first completion there) to its first
        complete rating, and the time an annotator spends on the image afterwards, paging
        back through it, stays in the assignment's time only (the monitor's revisits). A
        measurement like the assignment's time, not a value: not in the event log, and an
        undo leaves it."""
        if not completed:
            return
        rating, caption = Rating.__table__, Caption.__table__
        spent = connection.execute(select(Assignment.__table__.c.seconds).where(
            self.mine(image_id, annotator_id))).scalar_one_or_none()
        if spent is None:  # rated without opening the image: no time recorded
            return
        rows = connection.execute(
            select(rating.c.id, rating.c.seconds)
            .join(caption, rating.c.caption_id == caption.c.id)
            .where(caption.c.image_id == image_id, rating.c.annotator_id == annotator_id,
                   rating.c.stage == int(self.stage))).all()
        untimed = [row.id for row in rows if row.id in completed and not row.seconds]
        share = max(0.0, spent - sum(row.seconds for row in rows)) / max(1, len(untimed))
        if untimed and share > 0:
            connection.execute(update(rating).where(rating.c.id.in_(untimed))
                               .values(seconds=share))

    def remember(self, kind: str, change_id: str) -> None:
        """Record a change of this session for undo (`kind`: one with an undoer)."""
        self._changes.append((kind, change_id))

    def add_undoer(self, kind: str, undoer: Callable[[str], Undone | None]) -> None:
        """Let undo take back changes of `kind` (the undoer gets their change id and
        returns what it took back, or None when it was taken back already)."""
        self._undoers[kind] = undoer

    def undo(self) -> Undone | None:
        """Take back the last change this desk made that is not undone yet (a rating change
        or a broken-image flag; never one of an earlier session), logged as an undo."""
        event = Event.__table__
        while self._changes:
            kind, change_id = self._changes[-1]
            with self.engine.connect() as connection:
                reverted = connection.execute(select(event.c.id).where(
                    event.c.reverts == change_id).limit(1)).first() is not None
            try:
                done = None if reverted else self._undoers[kind](change_id)
            except ChangedSince:
                self._changes.pop()  # superseded: it can never be taken back
                raise
            self._changes.pop()  # (another refusal above raised first: the change stays)
            if done is not None:
                return done
        return None

    def _undo_flag(self, change_id: str) -> Undone | None:
        image_id = self.write(lambda connection, _: take_back(connection, change_id,
                                                              self.annotator))
        if image_id is None:
            return None
        self.flagged.discard(image_id)
        return Undone(image_id, [], flag=True)

    def _undo_rating(self, change_id: str) -> Undone | None:
        event, rating = Event.__table__, Rating.__table__

        def undo(connection: Connection, me: int
                 ) -> tuple[list, dict[int, int], dict[int, set[int]]] | None:
            events = connection.execute(
                select(event.c.row_id, event.c.field_name, event.c.old_value,
                       event.c.new_value)
                .where(event.c.change_id == change_id)
                .order_by(event.c.id.desc())
            ).all()
            if not events:
                return None
            _refuse_if_changed_since(connection, events)
            restore: dict[int, dict[str, object]] = {}
            for row in events:
                restore.setdefault(row.row_id, {})[row.field_name] = json.loads(row.old_value)
            caption_of = dict(
                connection.execute(
                    select(rating.c.id, rating.c.caption_id).where(rating.c.id.in_(restore))
                ).all()
            )
            touched = sorted(images_of(connection, caption_of.values()))
            for image_id in touched:
                check_may_rate(connection, self.annotator, self.stage, image_id)  # a change
            undo_id = uuid.uuid4().hex
            for rating_id, values in restore.items():
                self._write(connection, me, caption_of[rating_id], values, undo_id,
                            action="undo", reverts=change_id)
            return events, caption_of, self._complete_in(connection, me, touched)

        done = self.write(undo)
        if done is None:
            return None
        events, caption_of, complete = done
        self.worklist.settle(complete)
        fields = list(dict.fromkeys(row.field_name for row in reversed(events)))
        caption_id = next(iter(caption_of.values()))
        with self.engine.connect() as connection:
            image_id = images_of(connection, [caption_id]).pop()
        return Undone(image_id, fields, caption_id,
                      caption_ids=tuple(sorted(set(caption_of.values()))))


class ChangedSince(ProtocolError):
    """A change that its ratings no longer show: something changed them later (another
    session of the same annotator, say), and undoing it would overwrite that."""


def _refuse_if_changed_since(connection: Connection, events: Sequence[Row]) -> None:
    """Raise ChangedSince unless each field a change set still holds what it set (read in
    the undo's own transaction, so that no write can come between)."""
    rating = Rating.__table__
    current = {row.id: row._mapping for row in connection.execute(
        select(rating).where(rating.c.id.in_({e.row_id for e in events})))}
    for change in events:
        now = current[change.row_id][change.field_name]
        if now != json.loads(change.new_value):
            raise ChangedSince(
                f"{change.field_name} was changed since (now {now!r}), in another session or "
                "by another command; undo would overwrite that, so this change stays")


def images_of(connection: Connection, caption_ids: Iterable[int]) -> set[int]:
    caption = Caption.__table__
    return set(connection.execute(select(caption.c.image_id).where(
        caption.c.id.in_(list(caption_ids)))).scalars())


class DeskFront:
    """The interface the rating screens use, each member one line to the session's `desk`:
    it holds no state and no rule of its own (the stage's rules are the session's)."""

    desk: RatingDesk

    @property
    def engine(self) -> Engine:
        return self.desk.engine

    @property
    def annotator(self) -> str:
        return self.desk.annotator

    @property
    def stage(self) -> Stage:
        return self.desk.stage

    @property
    def rubric(self) -> Rubric:
        return self.desk.rubric

    @property
    def annotator_id(self) -> int | None:
        """The annotator's id; None until their first write where they are new."""
        return self.desk.annotator_id

    @property
    def images(self) -> list[ImageItem]:
        return self.desk.images

    @images.setter
    def images(self, images: list[ImageItem]) -> None:
        self.desk.images = images

    @property
    def flagged(self) -> set[int]:
        """Ids of the images this annotator flagged as broken."""
        return self.desk.flagged

    def is_complete(self, image: ImageItem) -> bool:
        return self.desk.is_complete(image)

    def next_unrated(self, after: int) -> int | None:
        """Index of the next image after `after` (wrapping around) that is not complete
        and not flagged as broken by this annotator."""
        return self.desk.next_unrated(after)

    def flag_broken(self, index: int, reason: str) -> None:
        """Record that the image cannot be rated (and why); "next image" skips it now, and
        review and the report leave it out. `undo` takes the flag back."""
        self.desk.flag_broken(index, reason)

    def resume_position(self) -> tuple[int, int]:
        """(image index, focused caption) where this annotator last was; else the first
        image not yet complete."""
        return self.desk.resume_position()

    def progress(self) -> Progress:
        return self.desk.worklist.progress()

    def look_at(self, index: int) -> None:
        """Record that the annotator has this image open: whatever scores the screen shows
        count as seen from now on (the image's stage 1 is closed)."""
        self.desk.look_at(index)

    def remember_position(self, index: int, focus: int) -> None:
        """Store where the annotator is and add the time spent on the image so far."""
        self.desk.remember_position(index, focus)

    def validate(self, values: dict[str, object]) -> None:
        self.desk.validate(values)

    def set_values(self, group: CaptionGroup, values: dict[str, object], *,
                   image_index: int, focus: int) -> CaptionGroup:
        """Apply `values` to every caption of the group, commit, and log each field change:
        one transaction that first checks the protocol under the image's lock. Raises
        ProtocolError where the protocol refuses, DatabaseBusy when the database stays
        locked; nothing is written then."""
        return self.desk.set_values(group, values, image_index=image_index, focus=focus)

    def set_many(self, changes: Sequence[tuple[CaptionGroup, dict[str, object]]], *,
                 image_index: int, focus: int) -> list[CaptionGroup]:
        """`set_values` for several groups of the open image as one action: one
        transaction, and one change that one undo takes back whole."""
        return self.desk.set_many(changes, image_index=image_index, focus=focus)

    def undo(self) -> Undone | None:
        """Revert the latest change of this session not yet undone: a rating change (the
        fields reverted and one caption it touched, so the screen can show it) or a
        broken-image flag. None when this session has nothing left to undo (changes of an
        earlier session are not undone). Raises ProtocolError where the protocol no longer
        allows the change (e.g. stage 1 of an image opened for review)."""
        return self.desk.undo()

    def group_for_caption(self, caption_id: int) -> CaptionGroup:
        """The caption with the identical captions of its image (rated together, as
        `open_image` shows them), with this annotator's values at this stage."""
        return self.desk.group_for_caption(caption_id)

    def index_of(self, image_id: int) -> int:
        return self.desk.index_of(image_id)

    def image_index_of_caption(self, caption_id: int) -> int:
        return self.desk.image_index_of_caption(caption_id)
