"""`thumb match annotate` in a real pseudo-terminal, killed with SIGKILL between answers,
then restarted: nothing answered is lost and the screen comes back to the same pair."""

from __future__ import annotations

import sys
import time

import pytest
from sqlalchemy import select

from storage.match import MatchSession, verification_frame
from storage.models import MatchClaim, MatchVerification
from storage.rating.annotators import register_annotator
from tests.match_helpers import match_project
from tests.test_crash_resume import TerminalApp, wait_for

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pty")


@pytest.mark.slow
def test_sigkill_between_answers_loses_nothing_and_resumes_on_the_same_pair(tmp_path):
    db, engine = match_project(tmp_path, size=10)
    register_annotator(engine, "ann", None)  # `thumb match annotate` refuses unknown names

    def answers() -> list[int]:
        return verification_frame(engine)["answer"].tolist()

    def claim():
        with engine.connect() as connection:
            return connection.execute(select(MatchClaim.__table__)).first()

    first = TerminalApp(db, "ann", ("match", "annotate"))
    try:
        wait_for(claim, "the app to claim a batch")
        time.sleep(1.0)
        first.press("1", "3", "4")
        wait_for(lambda: len(answers()) == 3, "three answers to be committed")
    finally:
        first.kill()
    assert sorted(answers()) == [1, 3, 4]
    assert claim().focus == 3  # the fourth pair was on the screen
    # the killed process's hold is replaced at once (no process has its pid); this
    # look at the batch gives it back, as a screen that quits does
    probe = MatchSession(engine, "ann")
    fourth = probe.items[3].item_id  # same claim, same order
    probe.close()

    second = TerminalApp(db, "ann", ("match", "annotate"))
    try:
        time.sleep(3.0)
        second.press("2")
        wait_for(lambda: len(answers()) == 4, "the resumed answer to be committed")
        frame = verification_frame(engine)
        assert sorted(frame["answer"].tolist()) == [1, 2, 3, 4]
        assert frame["claim"].nunique() == 1  # the same batch, not a new claim
        with engine.connect() as connection:
            latest = connection.execute(
                select(MatchVerification.__table__.c.item_id, MatchVerification.__table__.c.answer)
                .order_by(MatchVerification.__table__.c.id.desc())).first()
        assert tuple(latest) == (fourth, 2)
        assert second.quit() == 0
    finally:
        if second.process.poll() is None:
            second.kill()
