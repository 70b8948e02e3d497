"""The match-verification screen as a new user met it at 80x24: an answer while another
process holds the database says so and is given again, a crash ends `thumb match annotate`
non-zero, a long caption scrolls under a scale that stays on screen, and a user's keymap
shows in the scale, the key bar and the help. Each test drives the screen with Pilot and
checks the screen and the database."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import select
from textual.app import App
from textual.widgets import Static

from storage.models import Caption, Event, MatchHold, MatchVerification
from tests.app_helpers import LONG_CAPTION, lengthen_captions, screen_text
from tests.match_helpers import fixed_session, match_project, thumb
from thumb_tui.app import ThumbApp
from thumb_tui.screens.help import HelpScreen
from thumb_tui.screens.match import MatchScreen

SIZE = (80, 24)


def message(app: ThumbApp) -> str:
    return str(app.screen.query_one("#match-message", Static).content)


def flat(app: ThumbApp) -> str:
    """The screen's text with its line breaks and runs of spaces as single spaces."""
    return " ".join(screen_text(app).split())


def right_pane(app: ThumbApp) -> str:
    """The words of the screen's right half (question, caption, scale), box lines left
    out: the caption's text as it reads, whatever the image pane beside it shows."""
    rows = " ".join(line[40:] for line in screen_text(app).splitlines())
    return " ".join(rows.replace("│", " ").split())


def answers(engine) -> dict[int, int | None]:
    table = MatchVerification.__table__
    with engine.connect() as connection:
        return dict(connection.execute(select(table.c.item_id, table.c.answer)).all())


def answer_events(engine) -> int:
    with engine.connect() as connection:
        return len(connection.execute(select(Event.__table__.c.id).where(
            Event.__table__.c.table_name == "match_verification")).all())


@contextmanager
def write_locked(db: Path) -> Iterator[None]:
    """Another process's write transaction on the SQLite file (as `sqlite3` or a backup
    tool holds it) until the block ends."""
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


# -- 1: a busy database ------------------------------------------------------------------------

@pytest.fixture
def short_lock_waits(monkeypatch):
    """A keystroke gives up on a locked database after 4 x 50 ms, not 4 x 500 ms: the
    busy path is the same, the test waits less."""
    import storage.db.engine

    monkeypatch.setattr(storage.db.engine, "WRITE_LOCK_WAIT_MS", 50)


async def test_an_answer_and_an_undo_on_a_locked_database_say_busy_and_go_through_later(
        tmp_path, short_lock_waits):
    db, engine = match_project(tmp_path, size=5)
    session = fixed_session(engine, "ann")
    app = ThumbApp(screen=MatchScreen(session, "none"))
    async with app.run_test(size=SIZE) as pilot:
        first = session.items[app.screen.index].item_id
        with write_locked(Path(db)):
            await pilot.press("1")
            await pilot.pause()
            assert app.is_running
            assert message(app) == ("database busy, your answer is not saved yet — press "
                                    "the key again")
            assert "pair 1/5" in flat(app)  # still on the pair that was not answered
            assert answers(engine) == {} and answer_events(engine) == 0
        await pilot.press("1")  # the same key again, the database free
        await pilot.pause()
        assert message(app) == "saved: 100% yes"
        assert answers(engine) == {first: 1}
        with write_locked(Path(db)):
            await pilot.press("u")
            await pilot.pause()
            assert message(app) == ("database busy, your undo is not saved yet — press the "
                                    "key again")
            assert answers(engine) == {first: 1}
        await pilot.press("u")
        await pilot.pause()
        assert message(app) == "undid your last answer"
        await pilot.press("q")
    assert answers(engine) == {first: None}
    with engine.connect() as connection:
        seconds = connection.execute(select(MatchVerification.__table__.c.seconds)).scalar()
    assert seconds > 0  # the time on the pair before the busy attempt was kept


@pytest.mark.slow
async def test_the_next_batch_that_a_locked_database_kept_closed_opens_with_g(
        tmp_path, monkeypatch, short_lock_waits):
    db, engine = match_project(tmp_path, size=5)
    session = fixed_session(engine, "ann")
    first_claim = session.claim_id
    claim_next = session.claim_next

    def claim_while_locked() -> int | None:
        """The database is taken between the batch's last answer and the next claim."""
        monkeypatch.setattr(session, "claim_next", claim_next)
        with write_locked(Path(db)):
            return claim_next()

    monkeypatch.setattr(session, "claim_next", claim_while_locked)
    app = ThumbApp(screen=MatchScreen(session, "none"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("1", "1", "1", "1", "1")  # the last pair: saved, no next batch
        await pilot.pause()
        assert message(app) == ("saved: 100% yes · database busy, the next batch did not "
                                "open — press g to try again")
        assert list(answers(engine).values()) == [1] * 5
        assert session.claim_id == first_claim
        await pilot.press("g")
        await pilot.pause()
        assert message(app).endswith("batch complete; here is the next one")
        assert session.claim_id != first_claim and "Batch 2 · pair 1/" in flat(app)
        await pilot.press("q")


# -- 2: the exit status after a crash ------------------------------------------------------------

def test_match_annotate_ends_non_zero_after_an_unhandled_error(tmp_path, monkeypatch):
    db, engine = match_project(tmp_path, size=5)
    assert thumb(db, "annotator", "ann").exit_code == 0

    def crash(screen: MatchScreen) -> None:
        raise RuntimeError("injected failure")

    monkeypatch.setattr(MatchScreen, "on_mount", crash)
    monkeypatch.setattr(ThumbApp, "run", lambda app: App.run(app, headless=True))
    result = thumb(db, "match", "annotate", "--annotator", "ann", "--image-mode", "none")
    assert result.exit_code == 1, result.output
    with engine.connect() as connection:  # the hold was given back all the same
        assert connection.execute(select(MatchHold.__table__)).all() == []


# -- 3: a long caption ---------------------------------------------------------------------------

@pytest.mark.slow
async def test_a_long_caption_scrolls_by_key_under_an_answer_scale_that_stays_shown(tmp_path):
    _db, engine = match_project(tmp_path, size=5)
    with engine.connect() as connection:
        lengthen_captions(engine, list(connection.execute(
            select(Caption.__table__.c.id)).scalars()))
    session = fixed_session(engine, "ann")
    app = ThumbApp(screen=MatchScreen(session, "none"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        shown = flat(app)
        for line in ("1 100% yes", "2 partially yes", "3 mostly no", "4 100% no"):
            assert line in shown
        assert "⇧↑↓ scroll text" in shown
        caption = right_pane(app)
        assert LONG_CAPTION[:40] in caption and "The end of the long caption." not in caption
        for _ in range(10):
            await pilot.press("J")
        await pilot.pause()
        caption = right_pane(app)
        assert "The end of the long caption." in caption and "4 100% no" in caption
        assert message(app) == "at the end of the caption"
        await pilot.press("K")
        await pilot.pause()
        assert answers(engine) == {}  # scrolling answers nothing
        first = session.items[app.screen.index].item_id
        await pilot.press("3")
        await pilot.pause()
        assert answers(engine) == {first: 3}
        # the next pair's caption starts at its top again
        assert LONG_CAPTION[:40] in right_pane(app)
        await pilot.press("q")


# -- 5: a user's keymap --------------------------------------------------------------------------

@pytest.mark.slow
async def test_a_keymap_shows_in_the_scale_the_key_bar_and_the_help(tmp_path):
    _db, engine = match_project(tmp_path, size=5)
    session = fixed_session(engine, "ann")
    app = ThumbApp(screen=MatchScreen(session, "none"),
                   keymap={"match-undo": "z", "match-answer-1": "y"})
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        shown = flat(app)
        assert "y 2 3 4 answer" in shown and "z undo" in shown and "u undo" not in shown
        assert "y 100% yes" in shown and "2 partially yes" in shown
        first = session.items[app.screen.index].item_id
        await pilot.press("y")
        await pilot.pause()
        assert answers(engine) == {first: 1}
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        help_text = app.screen.markdown
        assert "z undoes your last one" in help_text.replace("`", "")
        assert "u undoes" not in help_text.replace("`", "")
        for line in ("`y`: answer 1 · 100% yes (id `match-answer-1`)",
                     "`4`: answer 4 · 100% no (id `match-answer-4`)",
                     "`z`: undo (id `match-undo`)"):
            assert line in help_text
        await pilot.press("escape", "z")
        await pilot.pause()
        assert message(app) == "undid your last answer"
        await pilot.press("q")
    assert answers(engine) == {first: None}
