"""The app in a real pseudo-terminal, killed with SIGKILL mid-image, then restarted."""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import select

from storage import Rating
from storage.models import Assignment
from storage.rating.annotators import register_annotator
from storage.rating.rating_sessions import AnnotationSession
from tests.app_helpers import sample_engine

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pty")


class TerminalApp:
    """`thumb annotate` (or another screen's command) running in a pty of 80x24, its output
    drained in a thread."""

    def __init__(self, db: Path, annotator: str, command: tuple[str, ...] = ("annotate",)
                 ) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "thumb_tui", "--db", str(db), *command,
             "--annotator", annotator, "--image-mode", "none"],
            stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT,
            start_new_session=True,
        )
        os.close(slave)
        self.master = master
        self.output = bytearray()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.output.extend(chunk)

    def press(self, *keys: str) -> None:
        for key in keys:
            os.write(self.master, key.encode())
            time.sleep(0.15)

    def quit(self) -> int:
        """Press q and wait for the app to end; returns its exit status."""
        self.press("q")
        return self.process.wait(timeout=15)

    def kill(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        os.close(self.master)


def wait_for(condition: Callable[[], object], what: str, timeout: float = 30.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
def test_sigkill_loses_nothing_and_restart_resumes_in_place(tmp_path):
    engine = sample_engine(tmp_path)
    db = tmp_path / "app.db"
    rating, assignment = Rating.__table__, Assignment.__table__

    def scores() -> dict[int, tuple]:
        with engine.connect() as connection:
            return {row.caption_id: (row.precision, row.recall)
                    for row in connection.execute(select(rating))}

    def last_view():
        with engine.connect() as connection:
            return connection.execute(
                select(assignment.c.last_viewed_at).order_by(assignment.c.last_viewed_at.desc())
            ).first()

    register_annotator(engine, "carol", None)  # `thumb annotate` refuses unknown names
    first = TerminalApp(db, "carol")
    try:
        wait_for(last_view, "the app to open its first image")
        time.sleep(1.0)
        first.press("5", "4", "3")  # caption 1: P5 R4; caption 2: P3
        groups = AnnotationSession(engine, "carol").open_image(0)
        one, two = groups[0].caption_ids[0], groups[1].caption_ids[0]
        wait_for(lambda: scores().get(two) == (3, None), "the third key to be committed")
    finally:
        first.kill()
    assert scores()[one] == (5, 4) and scores()[two] == (3, None)
    seen_before = last_view()

    second = TerminalApp(db, "carol")
    try:
        wait_for(lambda: last_view() != seen_before, "the restarted app to open")
        time.sleep(1.0)
        second.press("2")  # same image, same caption, recall is next
        wait_for(lambda: scores().get(two) == (3, 2), "the resumed key to be committed")
        assert scores()[one] == (5, 4)
        assert second.quit() == 0
    finally:
        if second.process.poll() is None:
            second.kill()
