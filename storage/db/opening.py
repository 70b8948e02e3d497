"""`open_database`: an engine on a thumb-tui database that the migrations have prepared.

Here, above both the engine (`storage.db.engine`) and the migrations (which use the
engine), so that the engine never imports the migrations."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Engine

from storage.db.engine import make_engine
from storage.db.migrations import Upgrade, prepare_database


def open_database(
    target: str | Path, on_upgrade: Callable[[Upgrade], None] | None = None
) -> Engine:
    """Open a thumb-tui database: create a new one, upgrade an older SQLite file (after a
    backup copy; `on_upgrade` hears of it); an older PostgreSQL database raises
    `SchemaError` until `thumb db upgrade` has run."""
    engine = make_engine(target)
    try:
        upgrade = prepare_database(engine)
    except BaseException:
        engine.dispose()
        raise
    if on_upgrade is not None and upgrade.from_revision is not None and upgrade.changed:
        on_upgrade(upgrade)
    return engine
