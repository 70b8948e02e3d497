"""Database administration: `thumb db upgrade` brings the schema to this thumb-tui's."""

from __future__ import annotations

import typer

from storage import make_engine
from storage.migrations import SchemaError, upgrade_database
from thumb_tui.cli.common import fail, state

app = typer.Typer(help="Database administration (schema upgrades).", no_args_is_help=True)


@app.command("upgrade")
def upgrade_command() -> None:
    """Upgrade the schema (SQLite: after a backup copy). On PostgreSQL, back up first
    (pg_dump) and run it once while nobody rates."""
    state.require_existing()
    engine = make_engine(state.db)
    try:
        result = upgrade_database(engine)
    except SchemaError as exc:
        fail(str(exc))
    finally:
        engine.dispose()
    typer.echo(str(result))
