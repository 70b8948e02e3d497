"""Engine, write transactions and retries. SQLite by default; any SQLAlchemy URL works
unchanged.

Writes that check the THUMB protocol hold the write lock from their first statement, so
that no other process can change what the check read before the write lands: on SQLite a
`BEGIN IMMEDIATE` transaction (SQLAlchemy's documented pysqlite recipe: the driver's own
deferred BEGIN is switched off and the engine emits BEGIN itself); on PostgreSQL the
protocol locks the image's row (`SELECT … FOR UPDATE`, see `storage.rating.protocol`).

On SQLite, our own processes' write transactions also queue on an OS lock first (see
`_writers_turn`): SQLite's lock has no queue, and a writer that polls for it wakes late."""

from __future__ import annotations

import os
import random
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from operator import itemgetter
from pathlib import Path
from typing import TypeVar
from urllib.parse import parse_qsl, quote_plus, unquote, urlsplit
from weakref import WeakKeyDictionary

from sqlalchemy import Connection, Engine, Insert, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError
from sqlmodel import create_engine

try:
    import fcntl
except ImportError:  # Windows: writers wait on SQLite's lock alone
    fcntl = None  # type: ignore[assignment]

T = TypeVar("T")

SQLITE_BUSY_TIMEOUT_MS = 10_000
# How long one attempt of a retried write waits for a lock, and how many attempts it makes:
# a rating keystroke gives up after about two seconds with "database busy" instead of
# freezing the screen while, say, a large import holds the lock.
WRITE_LOCK_WAIT_MS = 500
WRITE_ATTEMPTS = 4
BULK_CACHE_KIB = 64 * 1024
INSERT_CHUNK = 20_000  # rows per executemany: fast, and bounded in memory
_WRITE = "thumb_write_lock_wait_ms"  # execution option: this transaction writes

_SQLITE_BUSY = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED (primary result codes)
LOCK_NOT_AVAILABLE = "55P03"  # PostgreSQL: lock_timeout ran out
# serialization failure, deadlock detected, lock not available
_POSTGRESQL_BUSY = {"40001", "40P01", LOCK_NOT_AVAILABLE}
_POSTGRESQL_UNIQUE = "23505"  # another process inserted the same row first


class DatabaseBusy(RuntimeError):
    """The database stayed locked by other processes through every attempt; nothing of
    the attempted change was written. `holders`: the database roles whose open
    transactions held the lock, where known (`LockHeld`), so that the screen can say who
    keeps the others waiting."""

    def __init__(self, message: str, holders: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.holders = tuple(holders)


class LockHeld(DatabaseBusy):
    """A row lock not granted within its wait, with the roles whose open transactions hold
    the rows (`storage.rating.protocol.lock_images` reads them on PostgreSQL): `run_write` tries
    again, as for any busy database, and names them when every attempt fails."""

    def __init__(self, holders: Sequence[str]) -> None:
        super().__init__(f"the rows are locked{_held_by(holders)}; nothing was saved",
                         holders)


def _held_by(holders: Sequence[str]) -> str:
    return f" by the open transaction of {', '.join(holders)}" if holders else ""


def is_url(target: str | Path) -> bool:
    """Whether `target` is a SQLAlchemy URL (else it is the path of a SQLite file)."""
    return "://" in str(target)


def sqlite_file(target: str | Path) -> Path | None:
    """The SQLite file `target` names, or None for a URL."""
    return None if is_url(target) else Path(target).expanduser()


# The query keys of a `sqlite:///` URL that SQLAlchemy hands to the driver; with `uri=true`
# every other key goes into the URI that SQLite opens (`?mode=rwc`).
_DRIVER_KEYS = ("uri", "timeout", "isolation_level", "detect_types", "check_same_thread",
                "cached_statements")
_IN_MEMORY = ("", ":memory:")


def sqlite_path(target: str | Path) -> Path | None:
    """The SQLite file that `target` opens, read as SQLAlchemy and SQLite read it: a path,
    a `sqlite:///…` URL (any driver), or one with `uri=true`, whose name SQLite reads as a
    `file:` URI (`sqlite:///file:x.db?mode=rwc&uri=true` opens x.db, creating it) or else
    takes with the URI's query as the file name; so that every form is checked alike and
    none lets a read command create a database. None for other databases and an in-memory
    one (`:memory:`, `mode=memory`, `vfs=memdb`)."""
    path = sqlite_file(target)
    if path is not None:
        return path
    try:
        url = make_url(str(target))
    except ArgumentError:
        return None
    if url.get_backend_name() != "sqlite":
        return None
    name = url.database or ""
    query = {key: value if isinstance(value, str) else value[-1]
             for key, value in url.query.items()}
    if query.get("uri", "").lower() not in ("true", "1", "yes", "on", "y", "t"):
        return None if name in _IN_MEMORY else Path(name)
    options = {key: query[key] for key in sorted(query) if key not in _DRIVER_KEYS}
    if not name.startswith("file:"):  # not a URI: the file name is taken as it is
        name += "?" + "&".join(f"{k}={v}" for k, v in options.items()) if options else ""
        return None if name in _IN_MEMORY else Path(name)
    uri = urlsplit(name)
    options.update(parse_qsl(uri.query))
    path = unquote(uri.path)
    if path in _IN_MEMORY or options.get("mode") == "memory" or options.get("vfs") == "memdb":
        return None
    return Path(path)


# A query key whose value is a secret: libpq's `password` and `sslpassword`, a token, a
# client secret; matched anywhere in the key, in any letter case.
_SECRET_KEY = re.compile("password|secret|token", re.IGNORECASE)
MASK = "***"
# The same two secrets in a text that is no URL SQLAlchemy reads: `user:pw@` and a query
# value whose key names a secret.
_USER_PASSWORD = re.compile(r"(://[^/?#@:]*:)[^/?#@]*@")
_SECRET_VALUE = re.compile(r"([?&][^=&#]*(?:password|secret|token)[^=&#]*=)[^&#]*",
                           re.IGNORECASE)


def shown_url(target: str) -> str:
    """`target` as it may be printed: a URL's password (`user:pw@`) and the value of every
    query key that names a secret (`?password=`, `sslpassword=`, any key holding
    "password", "secret" or "token") as `***`; anything else as it was given. The one
    masking of `--db` for headers, messages and printed command lines."""
    try:
        url = make_url(target)
    except ArgumentError:
        return _SECRET_VALUE.sub(rf"\g<1>{MASK}", _USER_PASSWORD.sub(rf"\g<1>{MASK}@", target))
    secret_keys = [key for key in url.query if _SECRET_KEY.search(key)]
    if url.password is None and not secret_keys:
        return target
    query = "&".join(
        f"{quote_plus(key)}={MASK if key in secret_keys else quote_plus(value)}"
        for key, values in url.query.items()
        for value in ((values,) if isinstance(values, str) else values))
    shown = url.set(query={}).render_as_string(hide_password=True)
    return f"{shown}?{query}" if query else shown


def database_url(target: str | Path) -> str:
    """A SQLAlchemy URL for `target`: itself if it is a URL, else a SQLite file path."""
    path = sqlite_file(target)
    return str(target) if path is None else f"sqlite:///{path.resolve()}"


# The tables by which a SQLite file is thumb-tui's (`storage.db.migrations.current_revision`
# reads each): a file with tables but neither is another program's, refused unchanged.
_OWN_TABLES = ("alembic_version", "schema_version")


def _configure_sqlite(dbapi_connection, _record) -> None:
    dbapi_connection.isolation_level = None  # the engine emits BEGIN (see _begin_sqlite)
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    # WAL (which rewrites the file's header) only for a new file or one of ours
    ours = cursor.execute("SELECT count(*) = 0 OR sum(name IN (?, ?)) > 0 FROM sqlite_master "
                          "WHERE type = 'table'", _OWN_TABLES).fetchone()[0]
    if ours:
        cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _begin_sqlite(connection: Connection) -> None:
    """Reads begin deferred (in WAL mode they never block a writer). A write transaction
    begins IMMEDIATE, asking for the write lock every half millisecond or so until its
    lock wait is over: SQLite's own busy wait sleeps longer the longer it has waited (up to
    100 ms a try), so under many writers an early waiter keeps losing to later ones."""
    wait = connection.get_execution_options().get(_WRITE)
    if wait is None:
        connection.exec_driver_sql("BEGIN")
        return
    driver = connection.connection.driver_connection
    deadline = time.monotonic() + wait / 1000
    driver.execute("PRAGMA busy_timeout=0")
    try:
        while True:
            try:
                driver.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF not in _SQLITE_BUSY:
                    raise
                if time.monotonic() >= deadline:  # as SQLAlchemy wraps a statement's error
                    raise OperationalError("BEGIN IMMEDIATE", None, exc) from exc
            time.sleep(random.uniform(0.0002, 0.0008))
    finally:
        driver.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")


@dataclass(frozen=True)
class WriteQueue:
    """The two empty files next to a SQLite database on which our writers queue, by
    `flock` (see `_writers_turn`). Like SQLite's -wal and -shm files, the last engine to
    close the database removes them; one deleted while in use only lets two writers past
    the queue at once, where SQLite's lock still decides."""

    database: Path
    turn: Path  # held by the writer, from before BEGIN IMMEDIATE until its transaction ends
    next_in_line: Path  # held by the one writer waiting for the turn

    @classmethod
    def of(cls, database: Path) -> WriteQueue:
        return cls(database, database.with_name(f"{database.name}-writer.lock"),
                   database.with_name(f"{database.name}-next-writer.lock"))

    def remove_if_last(self, _engine: Engine) -> None:
        """Remove the files unless the database is still open somewhere (SQLite removes
        its -wal file when the last connection closes) or a writer holds one of them."""
        if Path(f"{self.database}-wal").exists():
            return
        for path in (self.turn, self.next_in_line):
            if not path.exists():
                continue
            descriptor = _take_flock(path, 0.0)
            if descriptor is None:
                continue  # held by a writer
            try:
                path.unlink(missing_ok=True)
            except OSError:
                pass  # not ours to remove (another user's, in a sticky folder)
            finally:
                os.close(descriptor)


_WRITE_QUEUES: WeakKeyDictionary[Engine, WriteQueue] = WeakKeyDictionary()


# Set on each PostgreSQL connection of ours: the team's change-log trigger
# (`storage.team.CHANGE_LOG_TRIGGER`) leaves a lead's writes through thumb-tui to the
# tool's own event-log rows, and logs what a lead changes from any other client.
APPLICATION_SETTING = "thumb.application"


def _mark_application(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute(f"SET {APPLICATION_SETTING} = 'on'")  # for the session, past commits
    cursor.close()
    dbapi_connection.commit()


def make_engine(target: str | Path) -> Engine:
    """Create an engine; on SQLite turn on foreign keys, WAL, a busy timeout, the
    engine's own BEGIN and, for a file where the OS has `flock`, the writers' queue; on
    PostgreSQL mark each connection as thumb-tui's (`APPLICATION_SETTING`)."""
    engine = create_engine(database_url(target))
    if engine.dialect.name == "postgresql":
        event.listen(engine, "connect", _mark_application)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _configure_sqlite)
        event.listen(engine, "begin", _begin_sqlite)
        database = sqlite_path(target)
        if database is not None and fcntl is not None:
            queue = _WRITE_QUEUES[engine] = WriteQueue.of(database.resolve())
            event.listen(engine, "engine_disposed", queue.remove_if_last)
    return engine


def begin_writing(connection: Connection, lock_wait_ms: int = SQLITE_BUSY_TIMEOUT_MS) -> None:
    """Make the connection's next transaction a write transaction (call it before the
    transaction begins): on SQLite it begins IMMEDIATE, waiting up to `lock_wait_ms`."""
    connection.execution_options(**{_WRITE: lock_wait_ms})


class _FlockWait:
    """A blocking `flock` in a thread of its own, so that the waiter wakes the moment the
    lock is free and yet gives up at a deadline (flock itself has no timeout). A wait
    given up leaves the thread to take the lock and let it go at once."""

    def __init__(self, descriptor: int) -> None:
        self.descriptor = descriptor
        self.settled = threading.Lock()  # the thread's outcome against the waiter's deadline
        self.done = threading.Event()
        self.granted = self.abandoned = False

    def _take(self) -> None:
        try:
            fcntl.flock(self.descriptor, fcntl.LOCK_EX)
            granted = True
        except OSError:
            granted = False
        with self.settled:
            if self.abandoned:
                os.close(self.descriptor)  # releases the lock, if taken
            else:
                self.granted = granted
                self.done.set()

    def within(self, seconds: float) -> int | None:
        """The descriptor, holding the lock, or None when the lock was not had within
        `seconds` (the descriptor is then closed, now or by the thread)."""
        threading.Thread(target=self._take, name="thumb-write-queue", daemon=True).start()
        try:
            self.done.wait(seconds)
        except BaseException:  # interrupted (Ctrl-C): the lock must not stay taken
            self._let_go()
            raise
        with self.settled:
            if self.done.is_set() and self.granted:
                return self.descriptor
        self._let_go()
        return None

    def _let_go(self) -> None:
        with self.settled:
            if self.done.is_set():
                os.close(self.descriptor)
            else:
                self.abandoned = True


def _take_flock(path: Path, seconds: float) -> int | None:
    """An open descriptor of `path` holding its exclusive flock, or None when the lock was
    not had within `seconds` or the file cannot be opened (a read-only folder, say)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError:
        return None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return descriptor
    except BlockingIOError:
        if seconds > 0:
            return _FlockWait(descriptor).within(seconds)
    except OSError:
        pass
    os.close(descriptor)
    return None


@contextmanager
def _writers_turn(engine: Engine, lock_wait_ms: int) -> Iterator[int]:
    """Wait for this write transaction's turn among our processes' writers of the same
    SQLite file, and hold it until the transaction has ended: an exclusive `flock` of
    `WriteQueue.turn`, which the kernel hands over the moment the holder lets go (or
    dies), where a writer polling SQLite's lock sleeps on after it is free. One lock alone
    would have no queue: the writer that just let go takes it again before a woken waiter
    runs. So a writer first takes `next_in_line`, and lets it go only once it has the
    turn: the one writer that can wait for the turn gets it next, the others wait to be
    next. Yields what is left of `lock_wait_ms` for BEGIN IMMEDIATE, which stays the
    guarantee (against other programs too): a turn not had in time, or an engine without
    a queue (PostgreSQL, in-memory SQLite, no `fcntl` as on Windows), leaves SQLite's
    lock alone to decide."""
    queue = _WRITE_QUEUES.get(engine)
    if queue is None:
        yield lock_wait_ms
        return
    deadline = time.monotonic() + lock_wait_ms / 1000
    next_in_line = _take_flock(queue.next_in_line, lock_wait_ms / 1000)
    try:
        turn = _take_flock(queue.turn, max(0.0, deadline - time.monotonic()))
    finally:
        if next_in_line is not None:
            os.close(next_in_line)  # lets the lock go
    try:
        yield max(0, round(1000 * (deadline - time.monotonic())))
    finally:
        if turn is not None:
            os.close(turn)


@contextmanager
def write_transaction(engine: Engine, lock_wait_ms: int = SQLITE_BUSY_TIMEOUT_MS
                      ) -> Iterator[Connection]:
    """One transaction that may write: on SQLite it holds the write lock from the start
    (BEGIN IMMEDIATE, after its turn among our writers); on PostgreSQL it waits at most
    `lock_wait_ms` for a row lock."""
    with engine.connect() as connection, _writers_turn(engine, lock_wait_ms) as left_ms:
        begin_writing(connection, left_ms)
        with connection.begin():
            if connection.dialect.name == "postgresql":
                connection.exec_driver_sql(f"SET LOCAL lock_timeout = {int(lock_wait_ms)}")
            yield connection


@contextmanager
def large_cache(connection: Connection) -> Iterator[None]:
    """A bulk write's page cache: on SQLite, BULK_CACHE_KIB while it runs (the default
    2 MiB makes a million-row import spill pages over and over), then the default again.
    Durability is the commit's, unchanged."""
    if connection.dialect.name != "sqlite":
        yield
        return
    before = connection.exec_driver_sql("PRAGMA cache_size").scalar()
    connection.exec_driver_sql(f"PRAGMA cache_size=-{BULK_CACHE_KIB}")
    try:
        yield
    finally:
        connection.exec_driver_sql(f"PRAGMA cache_size={int(before)}")


class BulkInsert:
    """An INSERT for many rows, run through the driver's executemany on plain tuples in
    chunks of INSERT_CHUNK. SQLAlchemy compiles it once for the connection's dialect
    (quoting, placeholders, a sub-select that looks up a key) and converts the values the
    driver cannot take as they are (SQLite keeps DATETIME as text) through each column's
    bind processor; a Core executemany of dictionaries instead processes every parameter
    of every row, several times the cost for a million rows.

    `names` are the parameters in the order the rows give them: the statement's columns
    and the bound parameters of its sub-selects, every one it has (a column left out
    would silently get no default here)."""

    def __init__(self, connection: Connection, statement: Insert, names: Sequence[str]
                 ) -> None:
        dialect = connection.dialect
        compiled = statement.inline().compile(dialect=dialect, column_keys=list(names))
        order = compiled.positiontup or list(compiled.binds)
        if sorted(order) != sorted(names):
            raise ValueError(f"the statement takes parameters {order}, not {list(names)}")
        self.connection, self.names, self.sql = connection, tuple(names), str(compiled)
        self._processors = []
        for position, name in enumerate(self.names):
            process = compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect)
            if process is not None:
                self._processors.append((position, process))
        # the rows as the driver's paramstyle wants them (None: as they come)
        self._arrange: Callable[[tuple], object] | None = None
        if not dialect.positional:
            self._arrange = lambda row: dict(zip(self.names, row, strict=True))
        elif list(order) != list(self.names):
            self._arrange = itemgetter(*(self.names.index(name) for name in order))

    def driver_values(self, values: tuple, first: int = 0) -> tuple:
        """`values` of the parameters `names[first:]` (or a first part of them) as the
        driver takes them: worth keeping where rows repeat them."""
        converted = list(values)
        for position, process in self._processors:
            if first <= position < first + len(converted):
                converted[position - first] = process(converted[position - first])
        return tuple(converted)

    def __call__(self, rows: Iterable[tuple], *, converted: bool = False) -> int:
        """Insert `rows` (tuples in the order of `names`; `converted`: made of
        `driver_values` already); returns how many."""
        if not converted and self._processors:
            rows = map(self.driver_values, rows)
        if self._arrange is not None:
            rows = map(self._arrange, rows)
        done, rows = 0, iter(rows)
        while chunk := list(islice(rows, INSERT_CHUNK)):
            self.connection.exec_driver_sql(self.sql, chunk)
            done += len(chunk)
        return done


def _failure(error: DBAPIError) -> str | None:
    """'busy' for a lock the database could not grant in time, 'conflict' for a row
    another process inserted first (both worth another attempt), else None."""
    code = getattr(error.orig, "sqlite_errorcode", None)
    if code is not None:
        return "busy" if code & 0xFF in _SQLITE_BUSY else None
    state = getattr(error.orig, "sqlstate", None)
    if state in _POSTGRESQL_BUSY:
        return "busy"
    return "conflict" if state == _POSTGRESQL_UNIQUE else None


def run_write(engine: Engine, work: Callable[[Connection], T], *,
              attempts: int | None = None, lock_wait_ms: int | None = None) -> T:
    """Run `work` in a write transaction and commit; when the database is busy (a lock
    not granted in time, a deadlock, a serialization failure) or another process
    inserted the same row first, roll back and run it again after a random, growing
    pause. Raise DatabaseBusy when every attempt found the database busy. `work` may run
    more than once, so it must not change anything outside the transaction. Unless given,
    `attempts` and `lock_wait_ms` are WRITE_ATTEMPTS and WRITE_LOCK_WAIT_MS as they are
    when it is called."""
    attempts = WRITE_ATTEMPTS if attempts is None else attempts
    lock_wait_ms = WRITE_LOCK_WAIT_MS if lock_wait_ms is None else lock_wait_ms
    for attempt in range(1, attempts + 1):
        try:
            with write_transaction(engine, lock_wait_ms) as connection:
                return work(connection)
        except (DBAPIError, LockHeld) as exc:
            failure = "busy" if isinstance(exc, LockHeld) else _failure(exc)
            if failure is None:
                raise
            if attempt == attempts:
                if failure == "busy":
                    holders = exc.holders if isinstance(exc, LockHeld) else ()
                    raise DatabaseBusy(
                        f"the database is busy: {attempts} attempts found it locked by "
                        f"another process{_held_by(holders)}; nothing was saved",
                        holders) from exc
                raise
        time.sleep(random.uniform(0.5, 1.0) * 0.02 * 2 ** attempt)
    raise AssertionError("unreachable")
