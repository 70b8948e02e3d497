"""Copies of a SQLite database that is in use: `thumb db backup`, and the copy that an
upgrade makes first. A file copy (`cp`) of a database being written can mix pages of two
moments, and misses what the write-ahead log still holds; SQLite's backup API copies the
pages as one transaction sees them."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from storage.db.engine import SQLITE_BUSY_TIMEOUT_MS

# Pages copied between two progress reports (64 MiB of SQLite's default 4 KiB pages).
STEP_PAGES = 16_384


@dataclass(frozen=True)
class Copied:
    """What a checked copy holds: its size, and the schema revision it is at (None for a
    database older than the revisions, or not thumb-tui's)."""

    target: Path
    pages: int
    page_size: int
    revision: str | None

    @property
    def megabytes(self) -> float:
        return self.pages * self.page_size / 2**20


class CopyDamaged(RuntimeError):
    """The copy failed SQLite's integrity check: the source database is damaged."""


def copy_sqlite(source: Path, target: Path,
                progress: Callable[[int, int], None] | None = None) -> None:
    """Copy the SQLite database `source` into `target` (a new or empty file) with SQLite's
    backup API, while others go on rating: the copy is the database as one read
    transaction, held from the first page to the last, sees it (a backup that holds none
    starts again whenever another process writes, and under a busy campaign may never
    end). `progress(copied pages, total pages)` hears of each step."""
    reader = sqlite3.connect(source, timeout=SQLITE_BUSY_TIMEOUT_MS / 1000,
                             isolation_level=None)
    try:
        copy = sqlite3.connect(target)
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the snapshot
            reader.backup(copy, pages=STEP_PAGES, progress=None if progress is None else (
                lambda _status, remaining, total: progress(total - remaining, total)))
            reader.execute("COMMIT")
        finally:
            copy.close()
    finally:
        reader.close()


def checked_copy(target: Path) -> Copied:
    """Check a copy the way SQLite checks a whole database (every page, index and
    constraint: `PRAGMA integrity_check`), and read its size and schema revision.
    CopyDamaged names what SQLite found wrong."""
    copy = sqlite3.connect(target)  # read-write: closing it removes the -wal and -shm files
    try:                              # that reading a write-ahead-log database makes
        found = [row[0] for row in copy.execute("PRAGMA integrity_check(20)")]
        if found != ["ok"]:
            raise CopyDamaged("; ".join(found))
        pages = copy.execute("PRAGMA page_count").fetchone()[0]
        page_size = copy.execute("PRAGMA page_size").fetchone()[0]
        try:
            revision = copy.execute("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.OperationalError:  # no such table
            revision = None
    finally:
        copy.close()
    return Copied(target, pages, page_size, revision[0] if revision else None)
