"""Database administration: `thumb db upgrade` brings the schema to this thumb-tui's and
checks that it is whole; `thumb db backup` copies a SQLite database that is in use."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Annotated

import typer

from thumb_tui.cli.common import fail, progress_bar, read_only_folder_hint, state
from thumb_tui.cli.outputs import ForceOption, Outputs

app = typer.Typer(help="Database administration (schema upgrades, backups).",
                  no_args_is_help=True)


@app.command("upgrade")
def upgrade_command() -> None:
    """Upgrade the schema (SQLite: after a backup copy), then check all of it against this
    thumb-tui's: a damaged database (a table, column, index, constraint or trigger missing;
    a trigger, view, rule, function or policy someone added, named with the SQL that drops
    it) is named difference by difference, exit status 2, and left as it was. On
    PostgreSQL, back up first (pg_dump) and run it once while nobody rates."""
    from storage.db.engine import make_engine
    from storage.db.migrations import SchemaError, upgrade_database

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
               "is there, and no trigger, view, rule, function or policy was added")


@app.command("backup")
def backup_command(
    out: Annotated[Path, typer.Argument(help="The copy to write (a new file; an existing "
                                              "one only with --force).")],
    force: ForceOption = False,
) -> None:
    """Copy the SQLite database whole (ratings, flags, gold, annotators, the event log),
    while annotators go on rating: the copy is the database at one moment, checked page
    by page before it is kept. Restore it by copying it over the database file once
    nobody has the project open, or use it with --db. On PostgreSQL, use pg_dump."""
    from storage.db.backup import CopyDamaged, checked_copy, copy_sqlite
    from storage.db.engine import sqlite_path

    shown = state.require_existing()
    source = sqlite_path(state.db)
    if source is None:
        fail(f"--db {shown} is a server database: back it up with the server's own tool "
             "(PostgreSQL: pg_dump --format=custom), which copies it at one moment too")
    taken = {Path(f"{source}{suffix}").resolve() for suffix in ("", "-wal", "-shm",
                                                                 "-journal")}
    if out.resolve() in taken:
        fail(f"{out} is the database itself (or one of its files): name another file")
    with progress_bar() as bar, Outputs(force) as files:
        task = bar.add_task("copying the database", total=None)
        temporary = files.file(out, "OUT")
        try:
            copy_sqlite(source, temporary, progress=lambda done, total: bar.update(
                task, completed=done, total=total))
            copied = checked_copy(temporary)
        except CopyDamaged as exc:
            fail(f"the database at {shown} is damaged, so no copy was kept: SQLite's "
                 f"integrity check says: {exc}")
        except sqlite3.Error as exc:  # a full disk, a database SQLite cannot read
            fail(f"cannot copy the database at {shown}, so no copy was kept: {exc}"
                 f"{read_only_folder_hint(source)}")
    revision = copied.revision or "none (not a thumb-tui database of any revision)"
    typer.echo(f"backed up {shown} to {out}: {copied.megabytes:.1f} MB, schema revision "
               f"{revision}, integrity check ok")

