"""Schema versions. A new database gets the current schema at once; an older one is upgraded
step by step. Each later schema change appends a step to `UPGRADES`."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, Engine, inspect, select, text
from sqlmodel import SQLModel

from storage import models

# version -> function that upgrades a database from version - 1.
UPGRADES: dict[int, Callable[[Connection], None]] = {}
CURRENT_VERSION = 1

_APPEND_ONLY_SQLITE = [
    f"""CREATE TRIGGER IF NOT EXISTS event_log_no_{verb}
        BEFORE {verb.upper()} ON event_log
        BEGIN SELECT RAISE(ABORT, 'event_log is append-only'); END"""
    for verb in ("update", "delete")
]
_APPEND_ONLY_POSTGRESQL = [
    """CREATE OR REPLACE FUNCTION event_log_append_only() RETURNS trigger AS $$
        BEGIN RAISE EXCEPTION 'event_log is append-only'; END $$ LANGUAGE plpgsql""",
    "DROP TRIGGER IF EXISTS event_log_append_only ON event_log",
    """CREATE TRIGGER event_log_append_only BEFORE UPDATE OR DELETE ON event_log
        FOR EACH ROW EXECUTE FUNCTION event_log_append_only()""",
]


def _protect_event_log(connection: Connection) -> None:
    statements = {
        "sqlite": _APPEND_ONLY_SQLITE,
        "postgresql": _APPEND_ONLY_POSTGRESQL,
    }.get(connection.dialect.name, [])
    for statement in statements:
        connection.execute(text(statement))


def schema_version(engine: Engine) -> int | None:
    """The stored schema version, or None for a database thumb-tui has not created."""
    if not inspect(engine).has_table("schema_version"):
        return None
    with engine.connect() as connection:
        table = models.SchemaVersion.__table__
        return connection.execute(select(table.c.version).order_by(table.c.id.desc())).scalar()


def migrate(engine: Engine) -> int:
    """Bring the database to `CURRENT_VERSION` in one transaction; return that version."""
    version = schema_version(engine)
    if version is not None and version > CURRENT_VERSION:
        raise RuntimeError(
            f"database schema version {version} is newer than this thumb-tui "
            f"({CURRENT_VERSION}); upgrade thumb-tui"
        )
    if version == CURRENT_VERSION:
        return version
    with engine.begin() as connection:
        if version is None:
            SQLModel.metadata.create_all(connection)
            _protect_event_log(connection)
        else:
            for step in range(version + 1, CURRENT_VERSION + 1):
                UPGRADES[step](connection)
        connection.execute(
            models.SchemaVersion.__table__.insert().values(
                version=CURRENT_VERSION, applied_at=models.utcnow()
            )
        )
    return CURRENT_VERSION
