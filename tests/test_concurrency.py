"""Several annotators on one database, step by step (the races themselves are in
test_races.py): opening an image claims it, the second annotator is moved on with a
message and true totals, a busy database never crashes a screen or loses a score, and
every change records who made it (the name given, the OS login, on PostgreSQL the role)."""

from __future__ import annotations

import getpass
import time

import pytest
from sqlalchemy import select
from textual.widgets import Static

from storage import Event, Rating, import_captions
from storage.db.engine import DatabaseBusy, write_transaction
from storage.errors import InputError
from storage.models import Assignment, Caption
from storage.rating.protocol import ImageTaken
from storage.rating.rating_sessions import AnnotationSession
from tests.app_helpers import make_app, sample_engine, screen_text
from thumb_tui.app import ThumbApp


@pytest.fixture
def engine(tmp_path):
    return sample_engine(tmp_path)


def ratings(engine) -> list:
    with engine.connect() as connection:
        return connection.execute(select(Rating.__table__)).all()


@pytest.mark.slow
def test_opening_an_image_claims_it_until_left_untouched(engine):
    alice, bob = AnnotationSession(engine, "alice"), AnnotationSession(engine, "bob")
    assert len(alice.images) == len(bob.images) == 15
    alice.open_image(0)
    with pytest.raises(ImageTaken, match="another annotator took this image"):
        bob.open_image(0)
    assert len(bob.images) == 14 and bob.progress().images_total == 14  # totals stay true
    assert AnnotationSession(engine, "carol").progress().images_total == 14
    alice.open_image(1)  # alice leaves image 1 of 15 without rating it: the claim goes
    assert len(AnnotationSession(engine, "carol").images) == 14  # image 2 is alice's now
    groups = alice.open_image(2)
    alice.set_values(groups[0], {"precision": 4}, image_index=2, focus=0)
    alice.open_image(3)  # a rated image stays hers
    assert alice.images[2].id not in {i.id for i in AnnotationSession(engine, "dan").images}
    alice.close()  # quitting on an untouched image gives it up too
    assert len(AnnotationSession(engine, "dan").images) == 14


@pytest.mark.slow
async def test_the_second_annotator_is_moved_to_the_next_free_image(engine):
    bob_app = make_app(engine, "bob")  # both start at the first image
    alice = AnnotationSession(engine, "alice")
    alice.open_image(0)  # alice's screen opens it first
    async with bob_app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = bob_app.screen
        message = str(screen.query_one("#message", Static).content)
        assert message == "another annotator took this image; moving to the next"
        assert screen.session.images[screen.image_index].id != alice.images[0].id
        assert "Image 1/14" in screen_text(bob_app) and "images 0/14" in screen_text(bob_app)
        await pilot.press("5", "4")
    rated = {row.caption_id for row in ratings(engine)}
    with engine.connect() as connection:
        images = set(connection.execute(select(Assignment.__table__.c.image_id).where(
            Assignment.__table__.c.released_at.is_(None))).scalars())
    assert len(rated) == 1 and alice.images[0].id in images


@pytest.mark.slow  # waits out the real lock waits (about 2 s), which it bounds
async def test_a_busy_database_keeps_the_score_unsaved_and_the_screen_alive(engine):
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        with write_transaction(engine):  # as another process would, it holds the lock
            start = time.monotonic()
            await pilot.press("5")
            waited = time.monotonic() - start
            message = str(app.screen.query_one("#message", Static).content)
        assert message == "database busy, your score is not saved yet — press the key again"
        assert waited < 5 and ratings(engine) == []  # bounded wait, nothing half-written
        await pilot.press("5")  # the lock is free: the same key saves
        await pilot.pause()
    assert [row.precision for row in ratings(engine)] == [5]


@pytest.mark.slow  # waits out the real lock waits (about 2 s)
def test_set_values_raises_database_busy_and_writes_nothing(engine):
    alice = AnnotationSession(engine, "alice")
    group = alice.open_image(0)[0]
    with write_transaction(engine), pytest.raises(DatabaseBusy):
        alice.set_values(group, {"precision": 3}, image_index=0, focus=0)
    assert ratings(engine) == []
    with engine.connect() as connection:
        assert not connection.execute(select(Event.__table__).where(
            Event.__table__.c.table_name == "rating")).all()


def test_every_change_records_the_os_login(engine):
    alice = AnnotationSession(engine, "alice")
    group = alice.open_image(0)[0]
    alice.set_values(group, {"precision": 3}, image_index=0, focus=0)
    with engine.connect() as connection:
        logged = connection.execute(select(Event.__table__)).all()
    assert {row.os_login for row in logged} == {getpass.getuser()}
    assert {row.actor for row in logged} == {"setup", "alice"}  # the names given
    assert {row.db_role for row in logged} == {None}  # SQLite has no roles


def test_import_obeys_the_claims_of_open_sessions(engine, tmp_path):
    alice = AnnotationSession(engine, "alice")
    alice.open_image(0)  # claimed at stage 1, nothing rated yet
    key = alice.images[0].key
    with engine.connect() as connection:
        system, text = connection.execute(select(Caption.__table__.c.system,
                                                 Caption.__table__.c.text)
                                          .where(Caption.__table__.c.image_id ==
                                                 alice.images[0].id)).first()
    late = tmp_path / "late.csv"
    late.write_text("image_id,system,caption,annotator,stage,precision,recall\n"
                    f'{key},{system},"{text}",dan,1,4,4\n', encoding="utf-8")
    with pytest.raises(InputError, match=rf"late.csv:2: image '{key}': 2 annotators rate "
                                         r"it at stage 1 \(alice, dan\) but it takes 1"):
        import_captions(engine, late, actor="t")
    assert ratings(engine) == []


def test_a_command_ends_non_zero_when_its_screen_crashes(engine, monkeypatch):
    import typer
    from textual.app import App

    from thumb_tui.cli.common import run_app

    class Crashing(ThumbApp):
        def on_mount(self) -> None:
            raise RuntimeError("boom")

    app = Crashing(AnnotationSession(engine, "alice"), "none")
    monkeypatch.setattr(app, "run", lambda: App.run(app, headless=True))
    with pytest.raises(typer.Exit) as ended:
        run_app(app)
    assert ended.value.exit_code == 1
