"""Images flagged as broken by an annotator: recorded with the reason (and in the event
log), skipped by that annotator's "next image", listed by `thumb status`."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, Engine, select

from storage.events import log_change
from storage.models import Annotator, Image, ImageFlag, utcnow


@dataclass(frozen=True)
class BrokenImage:
    key: str
    path: str | None
    reason: str
    annotator: str


def flag_image(connection: Connection, image_id: int, annotator_id: int, actor: str,
               reason: str) -> None:
    """Record (once per annotator) that the image cannot be rated, and why."""
    table = ImageFlag.__table__
    exists = connection.execute(select(table.c.id).where(
        table.c.image_id == image_id, table.c.annotator_id == annotator_id)).scalar()
    if exists is not None:
        return
    row_id = connection.execute(table.insert().values(
        image_id=image_id, annotator_id=annotator_id, reason=reason, created_at=utcnow())
    ).inserted_primary_key[0]
    log_change(connection, actor=actor, action="insert", table="image_flag", row_id=row_id,
               new={"reason": reason})


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
