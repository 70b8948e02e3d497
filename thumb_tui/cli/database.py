"""Database administration: `thumb db upgrade` brings the schema to this thumb-tui's and
checks that it is whole."""

from __future__ import annotations

import typer

from thumb_tui.cli.common import fail, state

app = typer.Typer(help="Database administration (schema upgrades).", no_args_is_help=True)


@app.command("upgrade")
def upgrade_command() -> None:
    """Upgrade the schema (SQLite: after a backup copy), then check all of it against this
    thumb-tui's: a damaged database (a table, column, index, constraint or trigger missing)
    is named difference by difference, exit status 2, and left as it was. On PostgreSQL,
    back up first (pg_dump) and run it once while nobody rates."""
    from storage.db import make_engine
    from storage.migrations import SchemaError, upgrade_database

    state.require_existing()
    engine = make_engine(state.db)
    try:
        result = upgrade_database(engine)
    except SchemaError as exc:
        fail(str(exc))
    finally:
        engine.dispose()
    typer.echo(str(result))
    typer.echo("checked: every table, column, index, constraint and trigger of the schema "
               "is there")
