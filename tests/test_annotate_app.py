"""Pilot tests of the stage-1 annotation app, asserting on the database."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select
from textual.widgets import Static

from storage import Event, Rating
from storage.models import Assignment, Caption
from tests.app_helpers import (
    LONG_CAPTION,
    SYSTEM_MARK,
    first_caption_of_image_one,
    lengthen_captions,
    make_app,
    sample_engine,
    screen_text,
)
from thumb_tui.screens.annotate import AnnotateScreen


def ratings(engine, stage: int = 1) -> list:
    rating, caption = Rating.__table__, Caption.__table__
    with engine.connect() as connection:
        return connection.execute(
            select(rating, caption.c.image_id, caption.c.text)
            .join(caption, caption.c.id == rating.c.caption_id)
            .where(rating.c.stage == stage)
            .order_by(rating.c.caption_id)
        ).all()


def events(engine) -> list:
    with engine.connect() as connection:
        return connection.execute(
            select(Event.__table__).where(Event.__table__.c.table_name == "rating")
            .order_by(Event.__table__.c.id)
        ).all()


@pytest.fixture
def engine(tmp_path):
    return sample_engine(tmp_path)


@pytest.mark.slow
async def test_rate_a_whole_image_with_penalties_and_a_note(engine):
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        assert isinstance(screen, AnnotateScreen)
        texts = [group.text for group in screen.groups]
        assert len(texts) == 4
        # caption 1: P5 R4, then an obvious spelling error (first catalogue entry)
        await pilot.press("5", "4", "up", "f", "enter")
        # caption 2: P3 R3 and conciseness
        await pilot.press("down", "3", "3", "up", "c")
        # caption 3: P4 R5, inclusive (0.5 appearance) and a note
        await pilot.press("down", "4", "5", "up", "i", "n", *"odd wording", "enter")
        # caption 4: P2 R1
        await pilot.press("down", "2", "1")
        await pilot.pause()
        assert screen.session.is_complete(screen.session.images[0])
    rows = {row.text: row for row in ratings(engine)}
    assert set(rows) == set(texts)
    first, second, third, fourth = (rows[text] for text in texts)
    assert (first.precision, first.recall, first.fluency, first.fluency_type) == (
        5, 4, 0.1, "spelling")
    assert (second.precision, second.recall, second.conciseness, second.conciseness_type) == (
        3, 3, 0.5, "redundant")
    assert (third.inclusive, third.inclusive_type, third.note) == (0.5, "appearance",
                                                                    "odd wording")
    assert (fourth.precision, fourth.recall) == (2, 1)
    assert all(row.annotator_id == first.annotator_id and row.rubric == "thumb-1.0"
               for row in rows.values())
    logged = events(engine)
    assert {e.actor for e in logged} == {"alice"}
    fields = [(e.field_name, json.loads(e.old_value), json.loads(e.new_value)) for e in logged
              if e.row_id == first.id]
    assert fields == [("precision", None, 5), ("recall", None, 4), ("fluency", 0.0, 0.1),
                      ("fluency_type", None, "spelling")]
    with engine.connect() as connection:
        assignment = connection.execute(select(Assignment.__table__)).one()
    assert assignment.shuffle_seed == 1000 and assignment.seconds >= 0


@pytest.mark.slow
async def test_undo_reverts_and_is_logged(engine):
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5", "4", "up", "f", "enter")
        await pilot.press("u")  # undo the fluency change: both fields at once
        await pilot.pause()
        (row,) = ratings(engine)
        assert (row.precision, row.recall, row.fluency, row.fluency_type) == (5, 4, 0.0, None)
        await pilot.press("u", "u")
        await pilot.pause()
        (row,) = ratings(engine)
        assert (row.precision, row.recall) == (None, None)
        assert not app.screen.session.is_complete(app.screen.session.images[0])
        await pilot.press("u")
        await pilot.pause()
        assert "nothing to undo" in str(app.screen.query_one("#message", Static).content)
    undo_events = [e for e in events(engine) if e.action == "undo"]
    assert [e.field_name for e in undo_events] == ["fluency_type", "fluency", "recall",
                                                   "precision"]
    reverted = {e.change_id for e in events(engine) if e.action == "update"}
    assert {e.reverts for e in undo_events} == reverted


async def test_identical_captions_are_shown_once_and_rated_together(engine):
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        session = screen.session
        index = next(i for i, image in enumerate(session.images) if image.key == "img07")
        screen.load_image(index)
        await pilot.pause()
        merged = [g for g in screen.groups if len(g.caption_ids) == 2]
        assert len(screen.groups) == 3 and len(merged) == 1
        screen.focus_index = screen.groups.index(merged[0])
        screen.update_focus()
        await pilot.press("4", "4")
    rows = [row for row in ratings(engine) if row.caption_id in merged[0].caption_ids]
    assert len(rows) == 2 and all((r.precision, r.recall) == (4, 4) for r in rows)


async def test_shuffle_is_stable_per_annotator_and_image(engine):
    first = make_app(engine, "alice")
    async with first.run_test(size=(80, 24)):
        order = [g.caption_ids for g in first.screen.groups]
    again = make_app(engine, "alice")
    async with again.run_test(size=(80, 24)):
        assert [g.caption_ids for g in again.screen.groups] == order


@pytest.mark.slow
async def test_navigation_and_next_unrated(engine):
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        await pilot.press("]")
        assert screen.image_index == 1
        await pilot.press("[", "[")
        assert screen.image_index == len(screen.session.images) - 1
        await pilot.press("]")
        for _ in screen.groups:
            await pilot.press("3", "3")
        await pilot.press("g")
        assert screen.image_index == 1


async def test_missing_image_file_is_reported_not_a_crash(engine, tmp_path):
    from storage.models import Image

    with engine.begin() as connection:
        connection.execute(Image.__table__.update().values(path=str(tmp_path / "gone.png")))
    app = make_app(engine, image_mode="halfcell")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        text = str(app.screen.query_one(".image-missing").render())
        assert "image file not found" in text and "gone.png" in text
        await pilot.press("o")
        assert "image file not found" in str(app.screen.query_one("#message", Static).content)


@pytest.mark.slow
async def test_no_system_name_on_any_screen(tmp_path):
    engine = sample_engine(tmp_path, marked_systems=True)
    with engine.connect() as connection:
        systems = connection.execute(select(Caption.__table__.c.system)).scalars().all()
    assert systems and all(s.startswith(SYSTEM_MARK) for s in systems)
    app = make_app(engine)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        for _ in screen.session.images:
            await pilot.press("4", "4")
            assert SYSTEM_MARK not in app.export_screenshot()
            await pilot.press("]")
        for key in ("f", "escape", "n", "escape", "question_mark"):
            await pilot.press(key)
            await pilot.pause()
            assert SYSTEM_MARK not in app.export_screenshot()


@pytest.mark.slow
async def test_help_shows_worked_examples_and_every_key(engine):
    app = make_app(engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        markdown = app.screen.query_one("Markdown")
        source = markdown.source
        assert "1-B" not in source  # examples are shown by caption, not internal ids
        assert "A man and a woman riding camels on the beech." in source
        assert "total 4.4" in source and "total 3.5" in source
        for binding in AnnotateScreen.BINDINGS:
            if binding.show:
                assert binding.description in source
        await pilot.press("escape")
        assert isinstance(app.screen, AnnotateScreen)


async def test_recall_first_then_precision_stays_on_the_caption(engine):
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        first = screen.groups[0]
        await pilot.press("right", "2", "4")
        assert screen.focus_index == 1 and screen.dimension == "precision"
    (row,) = [r for r in ratings(engine) if r.caption_id in first.caption_ids]
    assert (row.precision, row.recall) == (4, 2)


async def test_undo_highlights_the_field_it_reverted(engine):
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        await pilot.press("5", "4", "]", "u")
        await pilot.pause()
        assert screen.image_index == 0 and screen.focus_index == 0
        assert screen.dimension == "recall"
        message = str(screen.query_one("#message", Static).content)
        assert message == "undid R on caption 1/4 of img01"  # issue 26: which change


async def test_empty_project_does_not_crash(tmp_path):
    from storage import open_database

    app = make_app(open_database(tmp_path / "empty.db"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("o", "g", "]", "5", "u", "f")
        await pilot.pause()
        assert "No image is open to you" in str(app.screen.query_one("#title",
                                                                        Static).content)


async def test_time_per_image_is_exported(engine, tmp_path):
    from storage.exporter import export_frame

    clock = iter(range(0, 1000, 7))
    from storage.rating.rating_sessions import AnnotationSession
    from thumb_tui.app import ThumbApp

    session = AnnotationSession(engine, "timer", seed_source=lambda: 1,
                                clock=lambda: float(next(clock)))
    app = ThumbApp(session, "none")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5", "4", "]")
    frame = export_frame(engine, tmp_path / "x.csv")
    timed = frame[frame["annotator"] == "timer"]
    assert len(timed) == 1 and timed["image_seconds"].iloc[0] > 0


@pytest.mark.slow
async def test_caption_keys_stop_at_the_first_and_last_caption(engine):
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        await pilot.press("up")
        assert screen.focus_index == 0
        await pilot.press(*["down"] * (len(screen.groups) + 2))
        assert screen.focus_index == len(screen.groups) - 1


def message(app) -> str:
    return str(app.screen.query_one("#message", Static).content)


@pytest.mark.slow
async def test_penalty_keys_act_on_the_caption_just_scored_until_the_user_moves(engine):
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        first, second, third = screen.groups[:3]
        await pilot.press("5", "4")  # caption 1 complete: the focus moves on to 2/4
        assert screen.focus_index == 1
        assert message(app) == "saved P 5 R 4 for 1/4 → now 2/4; f c i n still act on 1"
        assert "*1/4" in screen_text(app) and ">2/4" in screen_text(app)
        await pilot.press("c", "n", *"wordy", "enter")  # both still go to caption 1
        await pilot.press("3")  # scoring caption 2: from now on the keys act on it
        await pilot.press("i")
        await pilot.press("down", "c")  # a move: caption 3 gets the penalty
    rows = {row.caption_id: row for row in ratings(engine)}
    one, two, three = (rows[group.caption_ids[0]] for group in (first, second, third))
    assert (one.conciseness, one.note, one.inclusive) == (0.5, "wordy", 0.0)
    assert (two.precision, two.inclusive, two.conciseness) == (3, 0.5, 0.0)
    assert (three.precision, three.conciseness) == (None, 0.5)


@pytest.mark.slow
async def test_long_caption_keeps_its_score_line_on_screen_and_scrolls(engine):
    lengthen_captions(engine, [first_caption_of_image_one(engine)])
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        long_index = next(i for i, g in enumerate(screen.groups) if g.text == LONG_CAPTION)
        assert len(LONG_CAPTION) >= 650
        await pilot.press(*["down"] * long_index, "3")  # P of the long caption
        await pilot.pause()
        shown = screen_text(app)
        assert f">{long_index + 1}/4" in shown and "P 3  R -" in shown
        pane = screen.query_one("#captions").region
        card = screen.cards[long_index]
        assert pane.contains_region(card.scores.region)
        text = card.text
        assert text.is_cut and text.scroll_y == 0
        await pilot.press("shift+down")
        assert text.scroll_y > 0 and pane.contains_region(card.scores.region)
        await pilot.press("J", "J", "J", "J", "J")
        assert message(app) == "at the end of the caption"
        assert text.scroll_y == text.max_scroll_y > 0
        await pilot.press("f")  # the dialog fits: the caption scrolls, the list is there
        await pilot.pause()
        shown = screen_text(app)
        assert "Obvious spelling error" in shown and "Misleading spelling error" in shown


async def test_below_80x24_a_notice_shows_and_scoring_keys_wait(engine):
    app = make_app(engine)
    async with app.run_test(size=(70, 20)) as pilot:
        await pilot.press("5", "4", "c")
        await pilot.pause()
        assert "terminal too small (need 80×24, now 70×20)" in screen_text(app)
        assert ratings(engine) == []
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        await pilot.press("5")
        assert "terminal too small" not in screen_text(app)
    assert [row.precision for row in ratings(engine)] == [5]


async def test_a_key_that_does_nothing_says_so(engine):
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("z")
        assert message(app) == "the key z does nothing here; ? lists the keys"
        await pilot.press("5")
        assert message(app) == "saved"


async def test_a_digit_off_the_scale_says_which_scores_the_dimension_takes(engine):
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        for digit in ("6", "0", "9"):
            await pilot.press(digit)
            assert message(app) == "Precision takes 1–5: not saved"
        await pilot.press("s")  # THUMB's digits cover its scales: no typed entry
        assert message(app) == "the key s does nothing here; ? lists the keys"
    assert ratings(engine) == []


@pytest.mark.slow
@pytest.mark.parametrize("height", range(24, 30))
async def test_rubric_panel_never_ends_on_a_bare_heading(engine, height):
    app = make_app(engine)
    async with app.run_test(size=(80, height)) as pilot:
        await pilot.pause()
        panel = app.screen.query_one("#rubric")
        shown = screen_text(app).splitlines()[panel.region.y:panel.region.bottom]
        left = [line[:32].strip() for line in shown if line[:32].strip()]
        assert left[-1] not in ("Rules", "Rules:")
