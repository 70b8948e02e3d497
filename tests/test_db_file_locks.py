"""A `thumb` process keeps SQLite's locks on the database for as long as it has it open
(issue: a refused `thumb match annotate`, then a --take-over, corrupted the database).
POSIX locks belong to a process, and closing any descriptor of the file drops them all:
a command that looked at the file again (its header) while its own engine was open lost
SQLite's shared lock, so the next process to close the database believed itself the
last, folded the write-ahead log in and deleted it, -shm included, under the live one."""

from __future__ import annotations

import sqlite3
import sys
from contextlib import closing, suppress
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest

from storage.rating.annotators import register_annotator
from tests.match_helpers import match_project

pytestmark = [pytest.mark.skipif(sys.platform == "win32", reason="POSIX locks"),
              pytest.mark.slow]
MEET_S = 120  # a spawned `thumb` starts in seconds; a dead one breaks the barrier instead


def _thumb(arguments: list[str]) -> None:
    """`thumb ARGUMENTS` in this process (its exit status is the process's)."""
    from thumb_tui.cli import app

    app(arguments, prog_name="thumb")


def _in_a_screen(arguments: list[str], in_screen: Barrier, go_on: Barrier,
                 answer: int | None = None) -> None:
    """`thumb ARGUMENTS` whose screen, instead of reading keys, meets the test at
    `in_screen`, waits for `go_on`, then (a `match annotate`) answers the first pair with
    `answer`, if any (one refused because the batch was taken over is the screen's to say)."""
    from storage.match import HoldLost
    from thumb_tui.app import ThumbApp

    def run(app: ThumbApp) -> None:
        in_screen.wait(MEET_S)
        go_on.wait(MEET_S)
        if answer is not None:
            with suppress(HoldLost):
                app.first_screen.session.answer(0, answer)

    ThumbApp.run = run  # type: ignore[method-assign]
    _thumb(arguments)


def _inode(path: Path) -> int | None:
    """The file's inode (os.stat: no descriptor of the database is opened here)."""
    return path.stat().st_ino if path.exists() else None


def test_a_refused_process_and_a_take_over_leave_the_database_whole(tmp_path):
    """The trial's steps: z1 verifies in a first process; a second one is refused; a
    third takes over, and the first and third answer the same pair at once."""
    import multiprocessing

    db, engine = match_project(tmp_path, size=20)
    register_annotator(engine, "z1", None)
    engine.dispose()  # this process must hold no lock of its own on the file
    log = Path(f"{db}-wal")
    annotate = ["--db", str(db), "match", "annotate", "--annotator", "z1"]
    context = multiprocessing.get_context("spawn")
    a_in_screen, b_in_screen = context.Barrier(2), context.Barrier(2)
    answer_now = context.Barrier(3)
    first = context.Process(target=_in_a_screen, args=(annotate, a_in_screen, answer_now, 1))
    refused = context.Process(target=_thumb, args=(annotate,))
    second = context.Process(target=_in_a_screen,
                             args=([*annotate, "--take-over"], b_in_screen, answer_now, 2))
    try:
        first.start()
        a_in_screen.wait(MEET_S)  # the first process holds the batch and has the file open
        live_log = _inode(log)
        refused.start()
        refused.join(MEET_S)
        assert refused.exitcode == 2  # z1 verifies in the first process
        assert _inode(log) == live_log is not None  # the log was not deleted under it
        second.start()
        b_in_screen.wait(MEET_S)
        answer_now.wait(MEET_S)  # both answer the same pair at once
        for process in (first, second):
            process.join(MEET_S)
        assert (first.exitcode, second.exitcode) == (0, 0)
    finally:
        for process in (first, refused, second):
            if process.is_alive():
                process.kill()
    with closing(sqlite3.connect(db)) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        answers = connection.execute("SELECT answer FROM match_verification").fetchall()
    assert answers == [(2,)]  # the take-over's: the first process's answer was refused


@pytest.mark.parametrize("screen", [["match", "annotate"], ["annotate"]])
def test_a_screen_keeps_its_write_ahead_log_while_other_commands_come_and_go(tmp_path, screen):
    """Any command that ends while a screen is open elsewhere (the lead's `thumb status`)
    leaves the screen's log alone: rating and verifying keep SQLite's locks alike."""
    import multiprocessing

    db, engine = match_project(tmp_path, size=20)
    register_annotator(engine, "z1", None)
    engine.dispose()
    log = Path(f"{db}-wal")
    context = multiprocessing.get_context("spawn")
    in_screen, go_on = context.Barrier(2), context.Barrier(2)
    working = context.Process(target=_in_a_screen, args=(
        ["--db", str(db), *screen, "--annotator", "z1"], in_screen, go_on))
    visitor = context.Process(target=_thumb, args=(["--db", str(db), "status"],))
    try:
        working.start()
        in_screen.wait(MEET_S)
        live_log = _inode(log)
        visitor.start()
        visitor.join(MEET_S)
        assert visitor.exitcode == 0
        assert _inode(log) == live_log is not None
        go_on.wait(MEET_S)
        working.join(MEET_S)
        assert working.exitcode == 0
    finally:
        for process in (working, visitor):
            if process.is_alive():
                process.kill()
