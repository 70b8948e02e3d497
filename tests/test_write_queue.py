"""Our writers of one SQLite file queue on OS locks (`storage.db.engine._writers_turn`, issue
#29's commit latency): the turn is held from before BEGIN IMMEDIATE until the
transaction has ended, however it ends (commit, rollback, a killed process), a waiting
writer goes on the moment it is free, the writer that let go cannot take it back before
the one waiting for it, and a turn not had in time leaves SQLite's own lock to decide, as
before the queue."""

from __future__ import annotations

import os
import threading
import time
from multiprocessing import get_context

import pytest
from sqlalchemy import Engine

from storage.db.engine import WriteQueue, make_engine, run_write, write_transaction

fcntl = pytest.importorskip("fcntl")  # no queue where the OS has no flock (Windows)


@pytest.fixture
def database(tmp_path):
    path = tmp_path / "queue.db"
    engine = make_engine(path)
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE t (x INTEGER)")
    engine.dispose()
    return path


def queue_is_taken(database, place: str = "turn") -> bool:
    """Whether someone holds the writers' turn (or `next_in_line`), tried without
    waiting from a descriptor of this test's own."""
    descriptor = os.open(getattr(WriteQueue.of(database), place), os.O_RDONLY | os.O_CREAT)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)
    return False


def insert(engine: Engine, x: int) -> list[int]:
    """Insert `x` in a retried write; what the table held before."""
    def work(connection) -> list[int]:
        seen = [row[0] for row in connection.exec_driver_sql("SELECT x FROM t ORDER BY x")]
        connection.exec_driver_sql(f"INSERT INTO t VALUES ({int(x)})")
        return seen
    return run_write(engine, work, lock_wait_ms=10_000)


def rows(database) -> list[int]:
    engine = make_engine(database)
    with engine.connect() as connection:
        found = [row[0] for row in connection.exec_driver_sql("SELECT x FROM t ORDER BY x")]
    engine.dispose()
    return found


def _hold_a_write(database, barrier, hold_s: float, committed_at) -> None:
    """Another process: write 1, meet the test at the barrier holding the lock, commit
    `hold_s` later and say when."""
    engine = make_engine(database)
    with write_transaction(engine) as connection:
        connection.exec_driver_sql("INSERT INTO t VALUES (1)")
        barrier.wait()
        time.sleep(hold_s)
    committed_at.value = time.monotonic()  # system-wide on Linux: comparable across processes
    engine.dispose()


def _hold_until_killed(database, held) -> None:
    """Another process: take a write transaction, write 1 and never end it."""
    engine = make_engine(database)
    with write_transaction(engine) as connection:
        connection.exec_driver_sql("INSERT INTO t VALUES (1)")
        held.set()
        time.sleep(120)


def test_the_turn_is_held_until_the_transaction_commits_or_rolls_back(database):
    engine = make_engine(database)
    assert not queue_is_taken(database)
    with write_transaction(engine) as connection:
        assert queue_is_taken(database)
        connection.exec_driver_sql("INSERT INTO t VALUES (1)")
    assert not queue_is_taken(database)
    with pytest.raises(RuntimeError, match="refused"), write_transaction(engine) as connection:
        connection.exec_driver_sql("INSERT INTO t VALUES (2)")
        raise RuntimeError("refused")
    assert not queue_is_taken(database)
    engine.dispose()
    assert rows(database) == [1]


def test_the_writer_that_lets_go_cannot_take_the_turn_back_before_the_one_waiting(database):
    """Without a second lock the releasing writer, still running, would take the turn
    again before the woken waiter gets a CPU; here it waits to be next."""
    engine = make_engine(database)
    with write_transaction(engine) as connection:
        connection.exec_driver_sql("INSERT INTO t VALUES (1)")
        waiter = threading.Thread(target=insert, args=(engine, 2))
        waiter.start()
        deadline = time.monotonic() + 10
        while not queue_is_taken(database, "next_in_line") and time.monotonic() < deadline:
            time.sleep(0.005)  # until the waiter is next in line
    seen = insert(engine, 3)  # at once, as the screen's next keystroke would
    waiter.join(timeout=10)
    engine.dispose()
    assert seen == [1, 2]
    assert rows(database) == [1, 2, 3]


@pytest.mark.slow
def test_a_waiting_writer_goes_on_as_soon_as_the_holder_commits(database):
    context = get_context("spawn")
    barrier, committed_at = context.Barrier(2), context.Value("d", 0.0)
    holder = context.Process(target=_hold_a_write, args=(database, barrier, 0.5, committed_at))
    holder.start()
    engine = make_engine(database)
    try:
        barrier.wait(timeout=60)  # the holder has written 1 and not committed
        asked = time.monotonic()
        seen = insert(engine, 2)
        went_on = time.monotonic()
    finally:
        holder.join(timeout=60)
        engine.dispose()
    assert seen == [1]  # it waited for the commit, and then saw it
    assert went_on - asked >= 0.4
    assert went_on - committed_at.value < 0.25  # woken by the release, not by polling late
    assert rows(database) == [1, 2]


@pytest.mark.slow
def test_a_killed_writer_gives_its_turn_up_and_its_write_is_lost_alone(database):
    context = get_context("spawn")
    held = context.Event()
    holder = context.Process(target=_hold_until_killed, args=(database, held))
    holder.start()
    engine = make_engine(database)
    try:
        assert held.wait(timeout=60)
        assert queue_is_taken(database)
        holder.kill()
        holder.join(timeout=60)
        assert not queue_is_taken(database)  # the kernel let the lock go with the process
        start = time.monotonic()
        assert insert(engine, 2) == []  # the killed transaction's row was never committed
        assert time.monotonic() - start < 1.0
    finally:
        if holder.is_alive():
            holder.kill()
        engine.dispose()
    assert rows(database) == [2]


def test_a_turn_not_had_in_time_leaves_sqlite_to_decide_and_is_given_back(database):
    """A holder of the turn that holds no SQLite lock (stopped, or a tool that locks the
    file) delays a write by its lock wait, never refuses it; the abandoned wait takes the
    lock and lets it go once the holder does, leaking no descriptor."""
    engine = make_engine(database)
    with engine.connect():  # the pooled connection exists before descriptors are counted
        pass
    descriptors = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    stuck = os.open(WriteQueue.of(database).turn, os.O_RDONLY | os.O_CREAT)
    fcntl.flock(stuck, fcntl.LOCK_EX)
    start = time.monotonic()
    run_write(engine, lambda connection: connection.exec_driver_sql(
        "INSERT INTO t VALUES (1)"), lock_wait_ms=200)
    waited = time.monotonic() - start
    os.close(stuck)
    assert 0.2 <= waited < 2.0

    def given_back() -> bool:  # by the abandoned wait's thread: it takes the lock, lets it go
        return not queue_is_taken(database) and (
            descriptors is None or len(os.listdir("/proc/self/fd")) == descriptors)

    deadline = time.monotonic() + 5
    while not given_back() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert given_back()
    engine.dispose()
    assert rows(database) == [1]


def test_the_last_engine_to_close_the_database_removes_the_queue_files(database):
    """As SQLite removes its -wal and -shm files: a refused import or a failed command
    leaves no file behind."""
    first, second = make_engine(database), make_engine(database)
    insert(first, 1)
    insert(second, 2)
    first.dispose()
    queue = WriteQueue.of(database)
    assert queue.turn.exists() and queue.next_in_line.exists()  # still open in `second`
    second.dispose()
    assert sorted(p.name for p in database.parent.iterdir()) == [database.name]


def test_an_in_memory_database_has_no_queue_and_writes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    engine = make_engine("sqlite://")
    with write_transaction(engine) as connection:
        connection.exec_driver_sql("CREATE TABLE t (x INTEGER)")
    engine.dispose()
    assert list(tmp_path.iterdir()) == []
