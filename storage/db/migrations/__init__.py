"""Schema migrations with Alembic: the revisions in `versions/` take any database made by
thumb-tui (back to 0.1.0, which kept its own `schema_version` table) to the current schema.

`prepare_database` runs when a command opens a database: a new one gets every revision, a
SQLite file behind the code is copied aside (`<file>.backup-<revision>-<time>`) and then
upgraded, and a PostgreSQL database behind the code is refused until an administrator runs
`thumb db upgrade`. Each upgrade runs in one transaction that holds the database's write
lock, so two processes opening a new database at once do not both build it.

A database at the head revision is also checked against the models (`storage.db.schema_check`):
every command checks cheaply that the tables, columns, indexes and triggers are there;
`thumb db upgrade` compares the whole schema. A damaged database raises `SchemaDamaged`,
which names every difference, and nothing is changed (an upgrade that fails, its result
damaged or the database locked by another process, is rolled back, and its backup copy
removed).
ARCHITECTURE.md ("A schema change") says how to add a revision."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, inspect, text

from storage.db.backup import copy_sqlite
from storage.db.engine import begin_writing

if TYPE_CHECKING:  # Alembic loads only when a database is behind the code
    from alembic.config import Config

SCRIPTS = Path(__file__).resolve().parent
# The revision that holds the schema of thumb-tui 0.1.0 (`schema_version` 1).
RELEASE_0_1_0 = "0001"
# Any constant: the PostgreSQL advisory lock that serialises migrations.
_PG_MIGRATION_LOCK = 0x7468756D62


class SchemaError(RuntimeError):
    """The database's schema does not match this thumb-tui and cannot be used as it is."""


class SchemaDamaged(SchemaError):
    """The database claims a revision but its schema is not that revision's: `problems`
    says what differs, one sentence each."""

    def __init__(self, revision: str, problems: list[str]) -> None:
        self.revision, self.problems = revision, problems
        count = f"{len(problems)} difference{'s' if len(problems) != 1 else ''}"
        super().__init__(
            f"the database is damaged: its schema is not revision {revision}'s ({count}); "
            "nothing was changed. Restore it from a backup (SQLite: a copy of the file, "
            "e.g. a *.backup-* file next to it; PostgreSQL: pg_dump), or drop what someone "
            "added with the SQL named, after checking what it did; what differs:\n"
            + "\n".join(f"  - {problem}" for problem in problems))


@dataclass(frozen=True)
class Upgrade:
    """What `prepare_database` or `upgrade_database` did."""

    from_revision: str | None  # None: the database was new
    to_revision: str
    backup: Path | None = None

    @property
    def changed(self) -> bool:
        return self.from_revision != self.to_revision

    def __str__(self) -> str:
        if not self.changed:
            return f"the database schema is current (revision {self.to_revision})"
        if self.from_revision is None:
            return f"created the database schema (revision {self.to_revision})"
        kept = f"; the old file is kept as {self.backup}" if self.backup else ""
        return (f"upgraded the database schema from revision {self.from_revision} to "
                f"{self.to_revision}{kept}")


@cache
def _config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(SCRIPTS))
    return config


def head_revision() -> str:
    """The revision this thumb-tui's code expects."""
    from alembic.script import ScriptDirectory

    heads = ScriptDirectory.from_config(_config()).get_heads()
    if len(heads) != 1:
        raise SchemaError(f"the migration scripts have {len(heads)} heads ({', '.join(heads)}); "
                          "a revision's down_revision must name the latest one")
    return heads[0]


def _known(revision: str) -> bool:
    from alembic.script import ScriptDirectory

    try:
        return ScriptDirectory.from_config(_config()).get_revision(revision) is not None
    except Exception:  # alembic raises several kinds for an unknown id
        return False


def current_revision(connection: Connection) -> str | None:
    """The database's revision; `RELEASE_0_1_0` for a 0.1.0 database; None when empty."""
    tables = set(inspect(connection).get_table_names())
    if "alembic_version" in tables:
        from alembic.runtime.migration import MigrationContext

        return MigrationContext.configure(connection).get_current_revision()
    if "schema_version" in tables:
        version = connection.execute(text("SELECT max(version) FROM schema_version")).scalar()
        if version != 1:
            raise SchemaError(f"database schema_version {version} is unknown to this thumb-tui")
        return RELEASE_0_1_0
    if tables:
        raise SchemaError("this database has tables but is not a thumb-tui database")
    return None


def _lock(connection: Connection) -> None:
    """Hold the database's write lock until the transaction ends (call it first)."""
    begin_writing(connection)  # SQLite: the transaction begins IMMEDIATE
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})


def _backup_sqlite(engine: Engine, revision: str) -> Path:
    """A consistent copy of the SQLite file next to it, made with SQLite's backup API."""
    source_path = Path(engine.url.database)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target_path = source_path.with_name(f"{source_path.name}.backup-{revision}-{stamp}")
    copy_sqlite(source_path, target_path)
    return target_path


def _check_known(revision: str | None) -> None:
    if revision is not None and not _known(revision):
        raise SchemaError(f"database schema revision {revision} is newer than this thumb-tui "
                          f"(which knows up to {head_revision()}); upgrade thumb-tui")


@cache
def _head_in_files() -> str | None:
    """The head revision as the version files name it (the one no other revision revises),
    read without loading Alembic; None unless there is exactly one."""
    revisions, revised = set(), set()
    for path in (SCRIPTS / "versions").glob("*.py"):
        source = path.read_text(encoding="utf-8")
        revision = re.search(r'^revision = "([^"]+)"$', source, re.MULTILINE)
        down = re.search(r'^down_revision = (?:"([^"]+)"|None)$', source, re.MULTILINE)
        if revision is None or down is None:
            return None  # a form this reader does not know: let Alembic decide
        revisions.add(revision.group(1))
        revised.add(down.group(1))
    heads = revisions - revised
    return heads.pop() if len(heads) == 1 else None


def _verify(connection: Connection, revision: str, *, full: bool) -> None:
    """Raise SchemaDamaged unless the schema is the models' (`full`: the whole comparison;
    else the cheap check of names, and the whole comparison only to say what is wrong)."""
    from storage.db.schema_check import quick_damage, schema_damage

    if full or quick_damage(connection):
        problems = schema_damage(connection)
        if problems:
            raise SchemaDamaged(revision, problems)


def _at_head(engine: Engine, *, full_check: bool) -> str | None:
    """The head revision when the database is already there (the usual case, checked
    with one query, and its schema checked against the models), else None."""
    head = _head_in_files()
    if head is None:
        return None
    with engine.connect() as connection:
        if not inspect(connection).has_table("alembic_version"):
            return None
        stored = connection.execute(text("SELECT version_num FROM alembic_version")).all()
        if [row[0] for row in stored] != [head]:
            return None
        _verify(connection, head, full=full_check)
    return head


def _run_upgrade(engine: Engine, *, allow_existing: bool, full_check: bool = False
                 ) -> Upgrade:
    if (current := _at_head(engine, full_check=full_check)) is not None:
        return Upgrade(current, current)
    from alembic import command

    head = head_revision()
    with engine.connect() as connection:
        revision = current_revision(connection)
        _check_known(revision)
        if revision == head:
            _verify(connection, head, full=full_check)
            return Upgrade(revision, head)
        if revision is not None and not allow_existing:
            raise SchemaError(
                f"database schema is at revision {revision}, this thumb-tui needs {head}; "
                f"an administrator upgrades it (after a backup, e.g. pg_dump) with "
                f"`thumb --db URL db upgrade`"
            )
    backup = None
    if revision is not None and engine.dialect.name == "sqlite":
        backup = _backup_sqlite(engine, revision)
    try:
        with engine.connect() as connection:
            _lock(connection)
            revision = current_revision(connection)  # another process may have upgraded it
            _check_known(revision)
            if revision == head and backup is not None:  # and kept the copy it reported
                backup.unlink(missing_ok=True)
                backup = None
            if revision != head:
                config = _config()
                config.attributes["connection"] = connection
                try:
                    if revision == RELEASE_0_1_0 and not inspect(connection).has_table(
                        "alembic_version"
                    ):
                        command.stamp(config, RELEASE_0_1_0)
                    command.upgrade(config, "head")
                finally:
                    del config.attributes["connection"]
            # what the revisions built (or what another process left) is the models'
            # schema, or the transaction is rolled back: nothing changed. A new database
            # gets the cheap check (tests build hundreds); an upgraded one the whole.
            _verify(connection, head, full=full_check or revision not in (None, head))
            connection.commit()
    except BaseException:  # damaged, locked by another process, interrupted: rolled back,
        if backup is not None:  # so the database is the copy; retries must not pile copies
            backup.unlink(missing_ok=True)
        raise
    return Upgrade(revision, head, backup)


def prepare_database(engine: Engine) -> Upgrade:
    """Make the database usable by this code: build a new one, upgrade SQLite (after a
    backup copy), refuse a PostgreSQL database that an administrator must upgrade."""
    return _run_upgrade(engine, allow_existing=engine.dialect.name == "sqlite")


def upgrade_database(engine: Engine) -> Upgrade:
    """`thumb db upgrade`: bring any thumb-tui database to the current schema, and check
    the whole schema against the models (SchemaDamaged names every difference)."""
    return _run_upgrade(engine, allow_existing=True, full_check=True)
