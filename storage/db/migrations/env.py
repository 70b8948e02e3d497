"""Alembic's environment: runs the revisions in `versions/` on the connection that
`storage.db.migrations` hands over, or, from the `alembic` command line, on the database
named by `-x db=PATH_OR_URL` or `THUMB_DB` (default `thumb.db`)."""

from __future__ import annotations

import os

from alembic import context
from sqlmodel import SQLModel

import storage.models  # noqa: F401  (registers every table on SQLModel.metadata)
from storage.db.engine import make_engine


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=SQLModel.metadata,
        render_as_batch=True,  # SQLite alters a table by copying it; Alembic's batch mode
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    target = context.get_x_argument(as_dictionary=True).get("db") or os.environ.get(
        "THUMB_DB", "thumb.db"
    )
    engine = make_engine(target)
    with engine.connect() as own_connection:
        _run(own_connection)
        own_connection.commit()
    engine.dispose()
