"""Engine and session factory. SQLite by default; any SQLAlchemy URL works unchanged."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, event
from sqlmodel import create_engine

if TYPE_CHECKING:
    from storage.migrations import Upgrade

SQLITE_BUSY_TIMEOUT_MS = 10_000


def database_url(target: str | Path) -> str:
    """A SQLAlchemy URL for `target`: itself if it is a URL, else a SQLite file path."""
    text = str(target)
    if "://" in text:
        return text
    return f"sqlite:///{Path(text).expanduser().resolve()}"


def _configure_sqlite(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def make_engine(target: str | Path) -> Engine:
    """Create an engine; on SQLite turn on foreign keys, WAL and a busy timeout."""
    url = database_url(target)
    engine = create_engine(url)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _configure_sqlite)
    return engine


def open_database(
    target: str | Path, on_upgrade: Callable[[Upgrade], None] | None = None
) -> Engine:
    """Open a thumb-tui database: create a new one, upgrade an older SQLite file (after a
    backup copy; `on_upgrade` hears of it); an older PostgreSQL database raises
    `SchemaError` until `thumb db upgrade` has run."""
    from storage.migrations import prepare_database

    engine = make_engine(target)
    try:
        upgrade = prepare_database(engine)
    except BaseException:
        engine.dispose()
        raise
    if on_upgrade is not None and upgrade.from_revision is not None and upgrade.changed:
        on_upgrade(upgrade)
    return engine
