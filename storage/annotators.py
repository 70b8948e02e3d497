"""Who an annotator is: their row (made on their first write) and whether they are a native
English speaker. `registration` only reads, so a session can refuse at start-up what its
first write would refuse; `register` writes, inside the caller's transaction."""

from __future__ import annotations

from sqlalchemy import Connection, Engine, Row, select, update

from storage.db import run_write
from storage.events import log_change
from storage.models import Annotator, FluencyCheck, utcnow
from storage.protocol import ProtocolError, may_check_fluency


def registration(connection: Connection, name: str, native_english: bool | None
                 ) -> Row | None:
    """The annotator's row (None when new). Raises ProtocolError where recording
    `native_english` is refused: an annotator who gave fluency-round verdicts as a native
    speaker stays one."""
    table, check = Annotator.__table__, FluencyCheck.__table__
    row = connection.execute(select(table).where(table.c.name == name)).one_or_none()
    if (row is not None and native_english is not None
            and native_english != row.native_english
            and not may_check_fluency(native_english)
            and connection.execute(select(check.c.id).where(check.c.checker_id == row.id)
                                   ).first()):
        raise ProtocolError(f"{name} gave fluency-round verdicts as a native English "
                            "speaker; that record stays")
    return row


def register(connection: Connection, name: str, native_english: bool | None
             ) -> tuple[int, bool | None]:
    """Create the annotator if new and record native_english when given (a change is
    logged), in the caller's transaction. Returns their id and what is recorded now."""
    table = Annotator.__table__
    row = registration(connection, name, native_english)
    if row is None:
        annotator_id = connection.execute(table.insert().values(
            name=name, native_english=native_english, created_at=utcnow())
        ).inserted_primary_key[0]
        return annotator_id, native_english
    if native_english is not None and native_english != row.native_english:
        connection.execute(update(table).where(table.c.id == row.id)
                           .values(native_english=native_english))
        log_change(connection, actor=name, action="update", table="annotator",
                   row_id=row.id, old={"native_english": row.native_english},
                   new={"native_english": native_english})
        return row.id, native_english
    return row.id, row.native_english


def register_annotator(engine: Engine, name: str, native_english: bool | None) -> bool | None:
    """Create the annotator if new; record native_english when given. Returns what is
    recorded now."""
    return run_write(engine, lambda connection: register(connection, name, native_english))[1]


def is_native_speaker(engine: Engine, name: str) -> bool:
    """Whether the annotator may do the fluency round: recorded as a native English
    speaker (unknown counts as no)."""
    table = Annotator.__table__
    with engine.connect() as connection:
        return may_check_fluency(connection.execute(
            select(table.c.native_english).where(table.c.name == name)).scalar())


def annotator_names(engine: Engine) -> list[str]:
    """Every annotator of the project (made by `thumb annotator NAME`, an import or their
    earlier work), sorted."""
    table = Annotator.__table__
    with engine.connect() as connection:
        return sorted(connection.execute(select(table.c.name)).scalars())
