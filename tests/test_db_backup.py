"""`thumb db backup`: a copy of a SQLite database in use is the database at one moment
(another process writing between the copy's steps changes nothing in it), checked before
it is kept; an existing file is replaced only with --force, a damaged database leaves no
copy behind."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from storage.db import backup
from storage.db.backup import checked_copy, copy_sqlite
from tests.app_helpers import sample_engine
from thumb_tui.cli import app

runner = CliRunner()
WRITES = 50  # transactions the other process commits while the copy is under way


def _pairs_database(path: Path, rows: int) -> None:
    """A write-ahead-log database whose two tables always hold as many rows each: every
    transaction adds one to both."""
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("CREATE TABLE left_side (payload BLOB)")
    connection.execute("CREATE TABLE right_side (payload BLOB)")
    for table in ("left_side", "right_side"):
        connection.executemany(f"INSERT INTO {table} VALUES (randomblob(3000))",
                               [()] * rows)
    connection.commit()
    connection.close()


def _counts(path: Path) -> tuple[int, int]:
    connection = sqlite3.connect(path)
    try:
        return tuple(connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                     for table in ("left_side", "right_side"))
    finally:
        connection.close()


def _write_pairs(path: str, started: multiprocessing.Barrier,
                 written: multiprocessing.Event) -> None:
    started.wait()
    connection = sqlite3.connect(path, timeout=10)
    for _ in range(WRITES):
        connection.execute("INSERT INTO left_side VALUES (randomblob(3000))")
        connection.execute("INSERT INTO right_side VALUES (randomblob(3000))")
        connection.commit()
    connection.close()
    written.set()


@pytest.mark.slow
def test_a_copy_made_while_another_process_writes_is_one_moment(tmp_path, monkeypatch):
    source, target = tmp_path / "live.db", tmp_path / "copy.db"
    _pairs_database(source, 400)  # about 600 pages: many steps of 8
    monkeypatch.setattr(backup, "STEP_PAGES", 8)
    context = multiprocessing.get_context("spawn")
    started, written = context.Barrier(2), context.Event()
    writer = context.Process(target=_write_pairs, args=(str(source), started, written))
    writer.start()
    steps: list[tuple[int, int]] = []

    def step(done: int, total: int) -> None:
        if not steps:  # after the first step: the writer commits all of its rows now
            started.wait(timeout=30)
            assert written.wait(timeout=60)
        steps.append((done, total))

    try:
        copy_sqlite(source, target, progress=step)
    finally:
        writer.join(timeout=60)
    assert writer.exitcode == 0
    assert _counts(source) == (400 + WRITES, 400 + WRITES)  # the writes landed meanwhile
    assert _counts(target) == (400, 400)  # and the copy is the moment it began
    assert len(steps) > 10 and steps[-1][0] == steps[-1][1]  # each step reported, to the end
    copied = [done for done, _ in steps]
    assert copied == sorted(set(copied))  # never started again
    assert checked_copy(target).pages == steps[-1][1]


def test_backup_command_copies_the_project_and_replaces_only_with_force(tmp_path):
    sample_engine(tmp_path).dispose()
    db, out = tmp_path / "app.db", tmp_path / "copy.db"
    made = runner.invoke(app, ["--db", str(db), "db", "backup", str(out)])
    assert made.exit_code == 0, made.output
    assert "integrity check ok" in made.output and "schema revision 00" in made.output
    status = runner.invoke(app, ["--db", str(out), "status", "--format", "json"])
    assert '"images": 15' in status.output and '"captions": 60' in status.output

    out.write_bytes(b"someone's file")
    again = runner.invoke(app, ["--db", str(db), "db", "backup", str(out)])
    assert again.exit_code == 2 and "add --force" in again.output
    assert out.read_bytes() == b"someone's file"
    forced = runner.invoke(app, ["--db", str(db), "db", "backup", str(out), "--force"])
    assert forced.exit_code == 0, forced.output
    assert out.read_bytes().startswith(b"SQLite format 3\x00")


@pytest.mark.parametrize("name", ["app.db", "app.db-wal"])
def test_backup_command_refuses_to_write_over_the_database(tmp_path, name):
    sample_engine(tmp_path).dispose()
    db = tmp_path / "app.db"
    before = db.read_bytes()
    refused = runner.invoke(app, ["--db", str(db), "db", "backup", str(tmp_path / name),
                                  "--force"])
    assert refused.exit_code == 2 and "the database itself" in refused.output
    assert db.read_bytes() == before


def test_a_damaged_database_leaves_no_copy(tmp_path):
    db, out = tmp_path / "damaged.db", tmp_path / "copy.db"
    connection = sqlite3.connect(db)
    connection.execute("CREATE TABLE t (x INTEGER)")
    connection.executemany("INSERT INTO t VALUES (?)", [(n,) for n in range(2000)])
    # the index loses its entries while the table keeps its rows (an index made empty,
    # then declared whole): what SQLite reports as "row N missing from index"
    connection.execute("CREATE INDEX t_x ON t (x) WHERE x < 0")
    connection.execute("PRAGMA writable_schema = ON")
    connection.execute("UPDATE sqlite_master SET sql = 'CREATE INDEX t_x ON t (x)' "
                       "WHERE name = 't_x'")
    connection.commit()
    connection.close()
    refused = runner.invoke(app, ["--db", str(db), "db", "backup", str(out)])
    assert refused.exit_code == 2, refused.output
    assert "damaged" in refused.output and "missing from index" in refused.output
    assert not out.exists() and list(tmp_path.iterdir()) == [db]


def test_backup_of_a_server_database_names_its_tool():
    refused = runner.invoke(app, ["--db", "postgresql://lead:secret@db.example/thumb", "db",
                                  "backup", "copy.db"])
    assert refused.exit_code == 2 and "pg_dump" in refused.output
    assert "secret" not in refused.output
