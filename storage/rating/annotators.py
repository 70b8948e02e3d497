"""Who an annotator is: their row (made on their first write) and whether they are a native
English speaker. `registration` only reads, so a session can refuse at start-up what its
first write would refuse; `register` writes, inside the caller's transaction."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, Engine, Row, select, text, update

from storage.db.engine import run_write
from storage.events import log_change
from storage.models import Annotator, FluencyCheck, utcnow
from storage.rating.protocol import ProtocolError, may_check_fluency, served_by_team


def registration(connection: Connection, name: str, native_english: bool | None
                 ) -> Row | None:
    """The annotator's row (None when new). Raises ProtocolError where recording
    `native_english` is refused: by an annotator's own role on a team database (the lead
    records it), and for an annotator who gave fluency-round verdicts as a native speaker
    (they stay one)."""
    table, check = Annotator.__table__, FluencyCheck.__table__
    row = connection.execute(select(table).where(table.c.name == name)).one_or_none()
    recorded = None if row is None else row.native_english
    if (native_english is not None and native_english != recorded
            and not _may_record_native_language(connection)):
        raise ProtocolError("on a team database the lead records whether you are a native "
                            f"English speaker (thumb annotator add {name} --native)")
    if (row is not None and native_english is not None
            and native_english != row.native_english
            and not may_check_fluency(native_english)
            and connection.execute(select(check.c.id).where(check.c.checker_id == row.id)
                                   ).first()):
        raise ProtocolError(f"{name} gave fluency-round verdicts as a native English "
                            "speaker; that record stays")
    return row


def _may_record_native_language(connection: Connection) -> bool:
    """Whether this connection's role may record an annotator's native language: not a
    team annotator's own role (`storage.team`: the fluency round is open to native
    speakers, so it is the lead's to record); anyone on SQLite."""
    return connection.dialect.name != "postgresql" or connection.execute(text(
        "SELECT has_column_privilege('annotator', 'native_english', 'UPDATE')")).scalar_one()


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


@dataclass(frozen=True)
class AnnotatorInfo:
    """One annotator as `thumb annotator list` shows them."""

    name: str
    native_english: bool | None
    created_at: datetime
    retired_at: datetime | None


def annotators(engine: Engine) -> list[AnnotatorInfo]:
    """Every annotator of the project, retired ones included, sorted by name."""
    table = Annotator.__table__
    with engine.connect() as connection:
        return [AnnotatorInfo(row.name, row.native_english, row.created_at, row.retired_at)
                for row in connection.execute(
                    select(table.c.name, table.c.native_english, table.c.created_at,
                           table.c.retired_at).order_by(table.c.name))]


def _row_of(connection: Connection, name: str) -> Row:
    """The annotator's row; ValueError for a name the project does not know."""
    table = Annotator.__table__
    row = connection.execute(select(table).where(table.c.name == name)).one_or_none()
    if row is None:
        raise ValueError(f"no annotator {name!r} in this project")
    return row


def rename_annotator(engine: Engine, old: str, new: str, *, actor: str) -> None:
    """Give the annotator another name; their ratings, claims and history follow (they
    hold the annotator's id, not the name), and the change is logged. ValueError where
    `new` is taken, and on a team database, where the name is the annotator's login role
    (`storage.team`)."""
    table = Annotator.__table__

    def rename(connection: Connection) -> None:
        row = _row_of(connection, old)
        if served_by_team(connection, "thumb_me"):
            raise ValueError("on a team database an annotator's name is their login role: "
                             "it cannot be renamed")
        if connection.execute(select(table.c.id).where(table.c.name == new)).first():
            raise ValueError(f"there is an annotator {new!r} already")
        connection.execute(update(table).where(table.c.id == row.id).values(name=new))
        log_change(connection, actor=actor, action="rename", table="annotator",
                   row_id=row.id, old={"name": old}, new={"name": new})

    run_write(engine, rename)


def retire_annotator(engine: Engine, name: str, *, actor: str) -> bool:
    """Retire the annotator: from now on the protocol gives them no new image
    (`storage.rating.protocol.is_retired`); their work, claims and history stay. Logged. Returns
    False where they were retired already (nothing changes)."""
    table = Annotator.__table__

    def retire(connection: Connection) -> bool:
        row = _row_of(connection, name)
        if row.retired_at is not None:
            return False
        now = utcnow()
        connection.execute(update(table).where(table.c.id == row.id).values(retired_at=now))
        log_change(connection, actor=actor, action="retire", table="annotator",
                   row_id=row.id, old={"retired_at": None}, new={"retired_at": now.isoformat()})
        return True

    return run_write(engine, retire)
