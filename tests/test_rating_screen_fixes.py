"""The rating screens as a new user met them at 80x24: a restart resumes on the caption the
focus is on, review keys act on the stage-1 values shown, the resolver's values and
reasons stay on screen, every way out of the app leaves as `q` does, a resolve undo says it
withdrew the reasons, the fluency round stops at its end, gold feedback is read whole, and
the help, the rubric panel and the note dialog show what they name. Each test drives the
screen with Pilot and checks the screen and the database."""

from __future__ import annotations

import pytest
from sqlalchemy import select, update
from textual.widgets import OptionList, Static

from storage.models import Assignment, Event, FluencyCheck, Rating, Resolution, Stage
from storage.rating.gold import import_gold, is_gold
from storage.rating.project_queues import disagreements, fluency_queue
from storage.rating.rating_sessions import (
    AnnotationSession,
    FluencyRoundSession,
    ResolutionSession,
    register_annotator,
)
from tests.app_helpers import (
    LONG_CAPTION,
    lengthen_captions,
    make_app,
    sample_engine,
    screen_text,
)
from tests.test_gold import answers, gold_file
from tests.test_workflow import review_with_changes
from thumb_tui.app import ThumbApp
from thumb_tui.screens.annotate import AnnotateScreen, ReviewScreen
from thumb_tui.screens.fluency import FluencyScreen
from thumb_tui.screens.fluency_round import FluencyRoundScreen
from thumb_tui.screens.help import HelpScreen
from thumb_tui.screens.note import NoteScreen
from thumb_tui.screens.resolve import ResolveScreen

SIZE = (80, 24)


def message(app: ThumbApp, widget: str = "#message") -> str:
    return str(app.screen.query_one(widget, Static).content)


def flat(app: ThumbApp) -> str:
    """The screen's text with its line breaks and runs of spaces as single spaces."""
    return " ".join(screen_text(app).split())


def stage_values(engine, stage: Stage, caption_id: int) -> dict:
    rating = Rating.__table__
    with engine.connect() as connection:
        row = connection.execute(select(rating).where(
            rating.c.caption_id == caption_id, rating.c.stage == int(stage))).one()
    return dict(row._mapping)


# -- 1: a restart resumes where the focus is -------------------------------------------------

@pytest.mark.slow
async def test_a_killed_session_resumes_on_the_caption_the_focus_moved_on_to(tmp_path):
    engine = sample_engine(tmp_path)
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        groups = list(screen.groups)
        assert len(groups) >= 3
        await pilot.press("4", "3", "5", "2")  # captions 1 and 2 done: the focus is on 3
        await pilot.pause()
        assert screen.focus_index == 2
        image = screen.image_index
        # what a process started now (the first one killed, no `q`) reads as the place
        assert AnnotationSession(engine, "alice").resume_position() == (image, 2)
    with engine.connect() as connection:
        assert connection.execute(select(Assignment.__table__.c.focus)).scalar_one() == 2
    restarted = make_app(engine)
    async with restarted.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = restarted.screen
        assert (screen.image_index, screen.focus_index) == (image, 2)
        assert ">3/" in screen_text(restarted) and ">2/" not in screen_text(restarted)
        await pilot.press("1", "1")  # meant for caption 3, and there they go
        await pilot.pause()
    third, second = (stage_values(engine, Stage.FIRST, groups[n].caption_ids[0])
                     for n in (2, 1))
    assert (third["precision"], third["recall"]) == (1, 1)
    assert (second["precision"], second["recall"]) == (5, 2)


# -- 2: at review the keys act on the stage-1 values shown -------------------------------------

def stage_one_with_penalties(engine) -> None:
    """Alice rates every caption P4 R4 with a spelling error and a redundancy."""
    alice = AnnotationSession(engine, "alice")
    for index in range(len(alice.images)):
        for group in alice.open_image(index):
            alice.set_values(group, {"precision": 4, "recall": 4, "fluency": 0.1,
                                     "fluency_type": "spelling", "conciseness": 0.5,
                                     "conciseness_type": "redundant"},
                             image_index=index, focus=0)


@pytest.mark.slow
async def test_the_first_review_key_adds_to_and_takes_from_the_stage_one_values(tmp_path):
    engine = sample_engine(tmp_path)
    stage_one_with_penalties(engine)
    app = ThumbApp(screen=ReviewScreen(AnnotationSession(engine, "bob", stage=Stage.SECOND),
                                       "none"))
    async with app.run_test(size=SIZE) as pilot:
        groups = list(app.screen.groups)
        await pilot.press("f")
        assert isinstance(app.screen, FluencyScreen)
        assert "Fluency errors now: spelling" in flat(app)  # stage 1's, not "none"
        options = app.screen.query_one(OptionList)
        options.highlighted = options.get_option_index("casing")
        await pilot.press("enter")
        await pilot.pause()
        await pilot.press("down", "c")  # caption 2: the one redundancy goes, at one key
        await pilot.pause()
        cards = app.screen.cards
        assert "fluency: spelling, casing" in str(cards[0].scores.content)
        assert " C - " in str(cards[1].scores.content)
    first = stage_values(engine, Stage.SECOND, groups[0].caption_ids[0])
    assert (first["fluency"], first["fluency_type"]) == (0.2, "spelling,casing")
    assert (first["precision"], first["recall"], first["conciseness"]) == (4, 4, 0.5)
    second = stage_values(engine, Stage.SECOND, groups[1].caption_ids[0])
    assert (second["conciseness"], second["conciseness_type"]) == (0.0, None)
    assert (second["precision"], second["fluency"], second["fluency_type"]) == (
        4, 0.1, "spelling")


# -- 3: the resolver's values and reasons stay on screen ---------------------------------------

@pytest.mark.slow
async def test_resolve_keeps_the_values_and_reasons_in_view_under_long_texts(tmp_path):
    engine = sample_engine(tmp_path)
    review_with_changes(engine)
    item = disagreements(engine)[0]
    lengthen_captions(engine, [item.caption_id])
    rating = Rating.__table__
    with engine.begin() as connection:
        for stage in (1, 2):
            connection.execute(update(rating).where(
                rating.c.caption_id == item.caption_id, rating.c.stage == stage).values(
                note=f"stage {stage} says the sails are wrong and so is the sun; " * 6
                + f"END-{stage}"))
    queue = disagreements(engine)
    app = ThumbApp(screen=ResolveScreen(ResolutionSession(engine, "carol"), queue, "none"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        shown = flat(app)
        for line in ("stage 1: P", "stage 2: P", "final: P -", "reasons: - (press r)"):
            assert line in shown
        await pilot.press("a")  # stage 1's values: the final line shows them at once
        await pilot.pause()
        assert f"final: P {item.first['precision']} R {item.first['recall']}" in flat(app)
        assert "reasons: - (press r)" in flat(app)
        seen = ""
        for _ in range(12):  # the whole caption and both whole notes, by key
            await pilot.press("shift+down")
            await pilot.pause()
            seen += flat(app)
        assert "The end of the long caption." in seen and "END-1" in seen and "END-2" in seen
        assert message(app) == "at the end of the caption"
        assert "reasons: - (press r)" in flat(app)
    final = stage_values(engine, Stage.FINAL, item.caption_id)
    assert (final["precision"], final["recall"]) == (item.first["precision"],
                                                      item.first["recall"])


# -- 4: ctrl+q leaves as q does ----------------------------------------------------------------

async def test_ctrl_q_gives_up_the_untouched_claim_and_saves_the_place(tmp_path):
    engine = sample_engine(tmp_path)
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("right_square_bracket")  # the first image left untouched: released
        await pilot.pause()
        image = app.screen.image_index
        table = Assignment.__table__
        with engine.connect() as connection:
            held = connection.execute(select(table.c.image_id).where(
                table.c.released_at.is_(None))).all()
        assert len(held) == 1  # the image open now is claimed
        await pilot.press("ctrl+q")
        await pilot.pause()
    with engine.connect() as connection:
        assert connection.execute(select(table.c.image_id).where(
            table.c.released_at.is_(None))).all() == []
    assert AnnotationSession(engine, "alice").resume_position() == (image, 0)


# -- 5: a resolve undo says it withdrew the reasons --------------------------------------------

@pytest.mark.slow
async def test_resolve_undo_says_the_reasons_were_withdrawn(tmp_path):
    engine = sample_engine(tmp_path)
    review_with_changes(engine)
    queue = disagreements(engine)
    app = ThumbApp(screen=ResolveScreen(ResolutionSession(engine, "carol"), queue, "none"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a", "r", "enter")
        await pilot.pause()
        with engine.connect() as connection:
            assert len(connection.execute(select(Resolution.__table__)).all()) == 1
        await pilot.press("u")
        await pilot.pause()
        assert message(app).endswith(
            "; the reasons were withdrawn with them: r gives them again")
        assert message(app).startswith("undid P, R")
        assert "reasons: - (press r)" in flat(app)
        assert f"0/{len(queue)} resolved" in message(app, "#title")
    with engine.connect() as connection:
        assert connection.execute(select(Resolution.__table__)).all() == []


# -- 6: the fluency round stops at its last caption --------------------------------------------

async def test_the_fluency_round_stops_at_the_last_caption(tmp_path):
    engine = sample_engine(tmp_path)
    register_annotator(engine, "dave", native_english=True)
    review_with_changes(engine)
    queue = fluency_queue(engine)[:2]
    app = ThumbApp(screen=FluencyRoundScreen(FluencyRoundSession(engine, "dave"), queue))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("x", "x")
        await pilot.pause()
        assert message(app, "#round-message") == "saved; all 2 captions checked: q quits"
        with engine.connect() as connection:
            logged = connection.execute(select(Event.__table__)).all()
        await pilot.press("right_square_bracket")
        assert message(app, "#round-message") == "all 2 captions checked: q quits"
        await pilot.press("x")  # the caption shown: still the last
        await pilot.pause()
        assert app.screen.position == 1
        assert "round 2/2" in str(app.screen.query_one("#round-title", Static).content)
        with engine.connect() as connection:
            again = connection.execute(select(Event.__table__).where(
                Event.__table__.c.id > max(row.id for row in logged))).all()
            checks = dict(connection.execute(select(
                FluencyCheck.__table__.c.id, FluencyCheck.__table__.c.caption_id)).all())
        assert again and {checks.get(row.row_id) for row in again} == {queue[1].caption_id}
        await pilot.press("left_square_bracket", "left_square_bracket")
        assert message(app, "#round-message") == "this is the first caption"


# -- 7: the gold feedback is read whole --------------------------------------------------------

@pytest.mark.slow
async def test_long_gold_feedback_is_read_whole_in_a_dialog(tmp_path):
    engine = sample_engine(tmp_path)
    reason = "because the picture shows something else and the rubric says so; " * 3
    four = "image,caption,precision,recall,reason\n" + "".join(
        f"gq,Caption number {n} of q.,4-5,3-5,{reason}REASON-{n}.\n" for n in range(4))
    import_gold(engine, gold_file(tmp_path, four), actor="lead", rate=0.5, feedback=True)
    session = AnnotationSession(engine, "alice", seed_source=lambda: 1)
    gold_index = next(i for i, image in enumerate(session.images) if is_gold(image.id))
    app = ThumbApp(session, "none")
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        screen.load_image(gold_index)
        await pilot.pause()
        for _ in screen.groups:
            await pilot.press("1", "1")  # P1 is out of range: every answer is wrong
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        seen = flat(app)
        for _ in range(6):
            await pilot.press("pagedown")
            await pilot.pause()
            seen += flat(app)
        for n in range(4):
            assert f"REASON-{n}." in seen
        assert "gold" not in seen.lower()
        await pilot.press("escape")
        assert isinstance(app.screen, AnnotateScreen)
    assert len(answers(engine)) == 4


# -- 8: the help, the rubric panel and the note dialog -----------------------------------------

@pytest.mark.slow
async def test_help_names_every_digit_key_alike_and_the_rubric_panel_ends_whole(tmp_path):
    engine = sample_engine(tmp_path)
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        panel = " ".join(str(app.screen.query_one("#rubric Static", Static).content).split())
        rules = [" ".join(rule.text.split()) for rule in app.screen.session.rubric.rules]
        assert "? lists" in panel  # it says what it leaves to the help
        assert all(rule in panel or rule[:12] not in panel for rule in rules)
        await pilot.press("question_mark", "end")
        await pilot.pause()
        keys = flat(app)
        for level in range(1, 6):
            assert f"{level}: score P/R (id score-{level})" in keys
        assert "score 2" not in keys


@pytest.mark.slow
async def test_the_note_dialog_scrolls_a_long_caption_to_its_end(tmp_path):
    engine = sample_engine(tmp_path)
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        first = app.screen.groups[0]
        caption_ids = list(first.caption_ids)
        # 1,400 characters: more than the box; its own text first, so that it keeps its
        # place among the image's captions (a session lists them by text, then shuffles)
        lengthen_captions(engine, caption_ids, f"{first.text} "
                          + LONG_CAPTION.replace("The end", "Not the end") + " " + LONG_CAPTION)
        app.screen.load_image(app.screen.image_index)
        await pilot.pause()
        await pilot.press("n")
        assert isinstance(app.screen, NoteScreen)
        assert "The end of the" not in flat(app)
        await pilot.press("shift+down", "shift+down", "shift+down")
        await pilot.pause()
        assert "The end of the" in flat(app)  # (its last words wrap to the next line)
        box = app.screen.query_one("#note-caption")
        assert box.scroll_y == box.max_scroll_y > 0
        await pilot.press(*"seen", "enter")
        await pilot.pause()
    assert stage_values(engine, Stage.FIRST, caption_ids[0])["note"] == "seen"
