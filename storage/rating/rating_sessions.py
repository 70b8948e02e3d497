"""The sessions behind the rating screens: what one annotator sees and changes.

Every change is committed as it is made, in one transaction with its event-log rows, so a
killed process loses nothing; undo reverts the last change of this session (a rating or a
broken-image flag; never an earlier session's) and is logged too.
Each write checks the THUMB protocol in its own transaction, under the image's lock, and
is retried while the database is busy (`storage.db.engine.run_write`).

What the sessions share is a `RatingDesk` each holds (`storage.rating.rating_desk`: the caption
groups, committing values with the event log, undo, the annotator's place and the one cache
of what is complete). Each session adds only its stage's rules: `AnnotationSession` at
stages 1 and 2 claims the image it opens (`Claims`), so two annotators never take the same
image at once, and shows the stage-1 values under review; `ResolutionSession` lists the
disagreements and records the reasons. Building a session writes nothing: the annotator is
registered by their first write, in its transaction."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection

from sqlalchemy import Connection, Engine, Row, update

from rubrics import Rubric
from storage.models import RATING_VALUE_FIELDS, Assignment, Stage, utcnow
from storage.rating.annotators import is_native_speaker, register_annotator
from storage.rating.gold import GoldFront, is_gold, seeds_for
from storage.rating.project_queues import (
    Disagreement,
    FluencyItem,
    disagreements,
    fluency_queue,
    fluency_verdict,
    primary_first_ratings,
    record_fluency_check,
    record_resolution,
    recorded_reasons,
    take_back_fluency_check,
    withdraw_resolution,
)
from storage.rating.protocol import ProtocolError, check_may_rate, has_rated, open_images
from storage.rating.rating_desk import (
    EMPTY_RATING,
    RATING_FIELDS,
    CaptionGroup,
    DeskFront,
    ImageItem,
    Progress,
    RatingDesk,
    shown_captions,
)
from storage.rubric_registry import project_rubric

__all__ = [
    "EMPTY_RATING",
    "RATING_FIELDS",
    "AnnotationSession",
    "CaptionGroup",
    "Claims",
    "FluencyRoundSession",
    "ImageItem",
    "Progress",
    "ResolutionSession",
    "fluency_value",
    "is_native_speaker",
    "register_annotator",
    "shown_captions",
]


def fluency_value(types: list[str], values: list[float]) -> tuple[float, str | None]:
    """The fluency penalty (sum) and type list stored for a list of fluency errors."""
    return round(sum(values), 6), ",".join(types) or None


class Claims:
    """The rule of stages 1 and 2 that opening an image claims it: taken, or taken again
    once released, only where the protocol allows (under the image's lock, so a second
    annotator opening it at the same moment is refused); leaving it untouched gives the
    claim up."""

    def __init__(self, desk: RatingDesk) -> None:
        self.desk = desk

    def check(self, connection: Connection, annotator_id: int | None, image_id: int, *,
              lock: bool) -> Row | None:
        """This annotator's assignment of the image; raises ProtocolError when opening the
        image would take a claim (none held yet, or released) that the protocol refuses."""
        row = self.desk.assignment_row(connection, annotator_id, image_id)
        if row is None or row.released_at is not None:
            check_may_rate(connection, self.desk.annotator, self.desk.stage, image_id,
                           lock=lock)
        return row

    def take(self, connection: Connection, annotator_id: int,
             image_id: int) -> dict[str, object]:
        """The claim: the annotator's assignment of the image, made or taken again."""
        row = self.check(connection, annotator_id, image_id, lock=True)
        if row is None:
            return self.desk.make_assignment(connection, annotator_id, image_id)
        if row.released_at is not None:
            connection.execute(update(Assignment.__table__)
                               .where(self.desk.mine(image_id, annotator_id))
                               .values(released_at=None))
        return dict(row._mapping)

    def release_if_untouched(self, connection: Connection, annotator_id: int,
                             image_id: int) -> None:
        """Leaving an image without having rated any of it gives up the claim on it."""
        table = Assignment.__table__
        if not has_rated(connection, annotator_id, image_id, self.desk.stage):
            connection.execute(update(table).where(
                self.desk.mine(image_id, annotator_id), table.c.released_at.is_(None))
                .values(released_at=utcnow()))


class AnnotationSession(GoldFront, DeskFront):
    """One annotator's session at one stage over the whole project: at stages 1 and 2 the
    images open to them, each claimed as it is opened; at the final stage every image."""

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
        claiming = stage in (Stage.FIRST, Stage.SECOND)
        self.desk = RatingDesk(
            engine, annotator, stage, rubric or project_rubric(engine),
            native_english=native_english, seed_source=seed_source, clock=clock,
            listed=(lambda connection: open_images(connection, annotator, stage))
            if claiming else (lambda _: None))
        self.claims = Claims(self.desk) if claiming else None
        self.gold = seeds_for(self.desk)  # gold images seeded at stage 1 (storage.rating.gold)

    def open_image(self, index: int) -> list[CaptionGroup]:
        """The image's captions as the annotator sees them: identical texts merged, then
        shuffled with the seed stored for this (image, annotator). At stages 1 and 2 this
        claims the image and gives up the one left untouched before it; the values under
        review are read in the same transaction, so they are what stage 1 keeps. Raises
        ProtocolError (ImageTaken when another annotator holds it) after taking the image
        out of this session's list when it is no longer open to the annotator."""
        desk, claims = self.desk, self.claims
        if claims is None:
            return desk.open_image(index)
        if (gold := self.open_gold(index, claims.release_if_untouched)) is not None:
            return gold
        image = desk.images[index]
        left = desk.opened if desk.opened != image.id and not is_gold(
            desk.opened or 0) else None
        reviewing = desk.stage == Stage.SECOND

        def open_it(connection: Connection, me: int) -> tuple[int, list, dict]:
            seed = int(claims.take(connection, me, image.id)["shuffle_seed"])
            if left is not None:
                claims.release_if_untouched(connection, me, left)
            rows = desk.image_rows(connection, me, image.id)
            reviewed = (primary_first_ratings(connection, [row.id for row in rows])
                        if reviewing else {})
            return seed, rows, reviewed

        try:  # refused on what is committed, without waiting for the write lock
            with desk.engine.connect() as connection:
                claims.check(connection, desk.annotator_id, image.id, lock=False)
            seed, rows, reviewed = desk.write(open_it)
        except ProtocolError:
            desk.worklist.drop(image.id)
            raise
        return desk.show(image.id, rows, seed, reviewed)

    def close(self) -> None:
        """Leave the session: the claim on the open image goes if it was left untouched,
        so quitting on an image one never rated does not keep it from others."""
        image_id, claims = self.desk.opened, self.claims
        if image_id is not None and claims is not None and not is_gold(image_id):
            self.desk.write(lambda connection, me: claims.release_if_untouched(
                connection, me, image_id))


class ResolutionSession(DeskFront):
    """A resolver's session: the disagreements they may settle, worst first (on images
    they neither rated nor reviewed), their final-stage values and the reasons."""

    def __init__(self, engine: Engine, resolver: str, *, rubric: Rubric | None = None) -> None:
        self.desk = RatingDesk(engine, resolver, Stage.FINAL, rubric or project_rubric(engine),
                               after_write=self._values_changed)

    def _values_changed(self, connection: Connection, resolver_id: int, caption_id: int,
                        fields: Collection[str]) -> None:
        """The reasons say why the final values are right: a change to the values (taking
        the other side, typing new ones, an undo; not the note) withdraws them in the
        same transaction, and the caption waits for reasons again."""
        if not set(fields).isdisjoint(RATING_VALUE_FIELDS):
            withdraw_resolution(connection, caption_id, resolver_id, self.annotator)

    def recorded_reasons(self, caption_id: int) -> list[str]:
        """This resolver's reasons that stand for the caption's final values (none:
        unresolved)."""
        return recorded_reasons(self.engine, caption_id, self.annotator)

    def open_image(self, index: int) -> list[CaptionGroup]:
        """The image's captions with this resolver's final values (nothing is claimed)."""
        return self.desk.open_image(index)

    def close(self) -> None:
        """Leave the session: the final stage holds no claims, so nothing to give up."""

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
        self.desk.register()  # a resolver new to the database is refused by the protocol
        record_resolution(self.engine, group.caption_ids, self.annotator, reasons,
                          str(group.values["note"]), codes)


class FluencyRoundSession:
    """A native English speaker's fluency round: the captions waiting for it and the
    verdicts, each setting the final fluency penalty of a caption and its twins; undo
    takes back this session's verdicts, last first (never an earlier session's)."""

    def __init__(self, engine: Engine, checker: str, rubric: Rubric | None = None) -> None:
        if not is_native_speaker(engine, checker):
            raise ProtocolError(f"{checker!r} is not recorded as a native English speaker "
                                "(set it with `thumb annotator NAME --native`)")
        self.engine, self.checker = engine, checker
        self.rubric = rubric or project_rubric(engine)
        self._changes: list[str] = []  # this session's verdicts, oldest first

    def queue(self) -> list[FluencyItem]:
        return fluency_queue(self.engine)

    def record(self, item: FluencyItem, fluency: float, types: str | None) -> None:
        self._changes.append(record_fluency_check(self.engine, item.caption_ids,
                                                  self.checker, fluency, types))

    def undo(self) -> list[int]:
        """Take back the last verdict of this session not undone yet: the captions it was
        on (none when nothing is left to undo), each back to the verdict before it, or
        to none."""
        while self._changes:
            if undone := take_back_fluency_check(self.engine, self._changes[-1], self.checker):
                self._changes.pop()
                return undone
            self._changes.pop()
        return []

    def verdict(self, caption_id: int) -> tuple[float, str | None] | None:
        """The fluency penalty and error types stored for the caption, if any."""
        return fluency_verdict(self.engine, caption_id)

    def image_of(self, item: FluencyItem) -> tuple[str, str | None]:
        """The key and file path of the image the caption describes."""
        from storage.rating.rating_frames import image_of_caption

        return image_of_caption(self.engine, item.caption_id)
