"""Images flagged as broken by an annotator: recorded with the reason (and in the event
log), skipped by that annotator's "next image", listed by `thumb status`. A flag is taken
back by the flagger's undo (`take_back`) or by the lead (`unflag`), each logged.

The one rule "a flagged image is out of review and of the report" is `not_flagged` (SQL)
and `flagged_image_ids`: the review queue (`storage.rating.protocol.open_images`) and the report's
final scores (`storage.rating.rating_frames.final_scores(..., flagged=False)`) call them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, Connection, Engine, Select, delete, select

from storage.db.engine import run_write
from storage.events import log_change
from storage.models import Annotator, Event, Image, ImageFlag, utcnow


@dataclass(frozen=True)
class BrokenImage:
    key: str
    path: str | None
    reason: str
    annotator: str


class UnflagError(ValueError):
    """`thumb image unflag` named an image that is unknown or not flagged (as asked)."""


def flag_image(connection: Connection, image_id: int, annotator_id: int, actor: str,
               reason: str, flagged_at: datetime | None = None) -> str | None:
    """Record (once per annotator) that the image cannot be rated, and why; when, if not
    now (`flagged_at`: an import keeps an exported flag's time). Returns the change id of
    its event-log row (None when the annotator had flagged it already)."""
    table = ImageFlag.__table__
    exists = connection.execute(select(table.c.id).where(
        table.c.image_id == image_id, table.c.annotator_id == annotator_id)).scalar()
    if exists is not None:
        return None
    row_id = connection.execute(table.insert().values(
        image_id=image_id, annotator_id=annotator_id, reason=reason,
        created_at=flagged_at or utcnow())
    ).inserted_primary_key[0]
    return log_change(connection, actor=actor, action="insert", table="image_flag",
                      row_id=row_id, new={"reason": reason})


def _remove(connection: Connection, flag_id: int, reason: str, *, actor: str, action: str,
            reverts: str | None = None) -> None:
    """Delete one flag row and log it (its reason, old -> null)."""
    connection.execute(delete(ImageFlag.__table__).where(ImageFlag.__table__.c.id == flag_id))
    log_change(connection, actor=actor, action=action, table="image_flag", row_id=flag_id,
               old={"reason": reason}, new={"reason": None}, reverts=reverts)


def flag_of_change(connection: Connection, change_id: str) -> tuple[int, int] | None:
    """(flag row id, image id) of the flag that this change inserted, while it stands."""
    event, table = Event.__table__, ImageFlag.__table__
    return connection.execute(
        select(table.c.id, table.c.image_id).join(event, event.c.row_id == table.c.id)
        .where(event.c.change_id == change_id, event.c.table_name == "image_flag",
               event.c.action == "insert")).one_or_none()


def take_back(connection: Connection, change_id: str, actor: str) -> int | None:
    """Undo the flag that `change_id` inserted: its row deleted, logged as an undo that
    reverts the change. Returns the image id (None when the flag is gone already)."""
    found = flag_of_change(connection, change_id)
    if found is None:
        return None
    flag_id, image_id = found
    reason = connection.execute(select(ImageFlag.__table__.c.reason)
                                .where(ImageFlag.__table__.c.id == flag_id)).scalar_one()
    _remove(connection, flag_id, reason, actor=actor, action="undo", reverts=change_id)
    return image_id


def unflag(engine: Engine, image_key: str, actor: str,
           annotator: str | None = None) -> tuple[list[str], list[str]]:
    """The lead takes back the broken-image flags of an image (all, or only `annotator`'s),
    each deletion logged with `actor`. Returns the names whose flag was removed and those
    whose flag stays; raises UnflagError when the image is unknown or has no such flag."""
    image, flag, people = Image.__table__, ImageFlag.__table__, Annotator.__table__

    def remove(connection: Connection) -> tuple[list[str], list[str]]:
        image_id = connection.execute(select(image.c.id).where(image.c.key == image_key)
                                      ).scalar()
        if image_id is None:
            raise UnflagError(f"no image {image_key!r} in this project")
        query = (select(flag.c.id, flag.c.reason, people.c.name)
                 .join(people, people.c.id == flag.c.annotator_id)
                 .where(flag.c.image_id == image_id).order_by(people.c.name))
        every = connection.execute(query).all()
        rows = [row for row in every if annotator is None or row.name == annotator]
        if not every:
            raise UnflagError(f"image {image_key!r} is not flagged as broken")
        if not rows:
            by = ", ".join(repr(row.name) for row in every)
            raise UnflagError(f"image {image_key!r} is not flagged by {annotator!r} "
                              f"(flagged by {by})")
        for row in rows:
            _remove(connection, row.id, row.reason, actor=actor, action="delete")
        return [row.name for row in rows], [row.name for row in every if row not in rows]

    return run_write(engine, remove)


def flagged_images_query() -> Select:
    """Ids of the images that someone flagged as broken (a sub-query)."""
    return select(ImageFlag.__table__.c.image_id).distinct()


def not_flagged(image_id: ColumnElement[int]) -> ColumnElement[bool]:
    """SQL: the image (by its id column) is not flagged as broken by anyone, so it goes to
    review and into the report."""
    return image_id.not_in(flagged_images_query())


def flagged_image_ids(connection: Connection) -> set[int]:
    """Ids of the images that someone flagged as broken: out of review and the report."""
    return set(connection.execute(flagged_images_query()).scalars())


def flagged_by(connection: Connection, annotator_id: int) -> set[int]:
    """Ids of the images this annotator flagged."""
    table = ImageFlag.__table__
    return set(connection.execute(
        select(table.c.image_id).where(table.c.annotator_id == annotator_id)).scalars())


def broken_images(engine: Engine) -> list[BrokenImage]:
    """Every flag, by image key then annotator."""
    flag, image, annotator = ImageFlag.__table__, Image.__table__, Annotator.__table__
    with engine.connect() as connection:
        rows = connection.execute(
            select(image.c.key, image.c.path, flag.c.reason, annotator.c.name)
            .join(image, image.c.id == flag.c.image_id)
            .join(annotator, annotator.c.id == flag.c.annotator_id)
            .order_by(image.c.key, annotator.c.name)).all()
    return [BrokenImage(*row) for row in rows]
