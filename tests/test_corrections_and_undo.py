"""Corrections and undo on the rating screens, each driven with Pilot at 80x24 and
asserted on the database: reasons withdrawn when the final values they justified change,
an accept-all that one undo takes back whole, a correction that goes P then R (the last
caption included), and undo in the fluency round."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import select
from textual.widgets import Static

from storage import import_captions
from storage.models import Event, FluencyCheck, Rating, Resolution, Stage
from storage.rating.annotators import register_annotator
from storage.rating.project_queues import disagreements, fluency_queue
from storage.rating.rating_sessions import AnnotationSession, FluencyRoundSession, ResolutionSession
from tests.app_helpers import sample_engine
from tests.conftest import SAMPLE_CSV
from tests.team_helpers import team_on
from tests.test_workflow import review_with_changes
from thumb_tui.app import ThumbApp
from thumb_tui.screens.annotate import AnnotateScreen, ReviewScreen
from thumb_tui.screens.fluency_round import FluencyRoundScreen
from thumb_tui.screens.resolve import ResolveScreen


def message(app: ThumbApp) -> str:
    return str(app.screen.query_one("#message", Static).content)


def resolutions(engine) -> dict[int, str]:
    with engine.connect() as connection:
        return dict(connection.execute(select(Resolution.__table__.c.caption_id,
                                              Resolution.__table__.c.reasons)).all())


def ratings(engine, stage: Stage) -> dict[int, tuple[object, object]]:
    rating = Rating.__table__
    with engine.connect() as connection:
        return {row.caption_id: (row.precision, row.recall) for row in connection.execute(
            select(rating).where(rating.c.stage == int(stage)))}


@pytest.mark.slow
async def test_taking_the_other_side_withdraws_the_reasons_given(tmp_path):
    engine = sample_engine(tmp_path)
    review_with_changes(engine)
    queue = disagreements(engine)
    first = queue[0]
    app = ThumbApp(screen=ResolveScreen(ResolutionSession(engine, "carol"), queue, "none"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("a", "r", "enter")  # stage 1's values, "first-right" pre-ticked
        await pilot.pause()
        assert resolutions(engine) == {first.caption_id: "first-right"}
        await pilot.press("b")  # now stage 2's values: "first-right" no longer stands
        await pilot.pause()
        assert resolutions(engine) == {}
        assert ratings(engine, Stage.FINAL)[first.caption_id] == (
            first.second["precision"], first.second["recall"])
        assert "reasons were withdrawn" in message(app)
        compare = str(app.screen.query_one("#compare", Static).content)
        assert "reasons: - (press r)" in compare
        title = str(app.screen.query_one("#title", Static).content)
        assert f"0/{len(queue)} resolved" in title
        assert first.caption_id in {d.caption_id for d in disagreements(engine)}
        await pilot.press("r", "enter")  # reasons again: "second-right" is pre-ticked now
        await pilot.pause()
        assert resolutions(engine) == {first.caption_id: "second-right"}
        await pilot.press("u")  # undoing the values withdraws them too
        await pilot.pause()
        assert resolutions(engine) == {}
        assert "reasons: - (press r)" in str(app.screen.query_one("#compare", Static).content)


def test_a_note_leaves_the_reasons_and_an_edit_withdraws_them_in_storage(tmp_path):
    engine = sample_engine(tmp_path)
    review_with_changes(engine)
    item = disagreements(engine)[0]
    carol = ResolutionSession(engine, "carol")
    group = carol.group_for_caption(item.caption_id)
    index = carol.image_index_of_caption(item.caption_id)
    group = carol.set_values(group, {"precision": 2, "recall": 2}, image_index=index, focus=0)
    carol.record_reasons(group, ["both-wrong"])
    group = carol.set_values(group, {"note": "checked twice"}, image_index=index, focus=0)
    assert carol.recorded_reasons(item.caption_id) == ["both-wrong"]
    carol.set_values(group, {"recall": 3}, image_index=index, focus=0)
    assert carol.recorded_reasons(item.caption_id) == []
    assert item.caption_id not in resolutions(engine)


async def test_one_undo_takes_back_a_whole_accept_all(tmp_path):
    engine = sample_engine(tmp_path)
    alice = AnnotationSession(engine, "alice")
    for group in alice.open_image(0):
        alice.set_values(group, {"precision": 4, "recall": 4}, image_index=0, focus=0)
    app = ThumbApp(screen=ReviewScreen(AnnotationSession(engine, "bob", stage=Stage.SECOND),
                                       "none"))
    async with app.run_test(size=(80, 24)) as pilot:
        shown = len(app.screen.groups)
        await pilot.press("A")
        await pilot.pause()
        assert sorted(set(ratings(engine, Stage.SECOND).values())) == [(4, 4)]
        await pilot.press("u")
        await pilot.pause()
        assert set(ratings(engine, Stage.SECOND).values()) == {(None, None)}
        assert f"on {shown} captions of" in message(app)


@pytest.mark.slow
async def test_correcting_the_last_caption_goes_p_then_r(tmp_path):
    engine = sample_engine(tmp_path)
    app = ThumbApp(screen=AnnotateScreen(AnnotationSession(engine, "ann"), "none"))
    async with app.run_test(size=(80, 24)) as pilot:
        groups = len(app.screen.groups)
        await pilot.press(*["4"] * (2 * groups - 1), "3")  # every caption, the last R 3
        await pilot.pause()
        last = app.screen.groups[-1].caption_ids[0]
        assert ratings(engine, Stage.FIRST)[last] == (4, 3)
        await pilot.press("1", "2")  # correct the last caption: its P, then its R
        await pilot.pause()
        assert ratings(engine, Stage.FIRST)[last] == (1, 2)


@pytest.mark.slow
async def test_correcting_a_middle_caption_stays_on_it_for_r(tmp_path):
    engine = sample_engine(tmp_path)
    app = ThumbApp(screen=AnnotateScreen(AnnotationSession(engine, "ann"), "none"))
    async with app.run_test(size=(80, 24)) as pilot:
        groups = len(app.screen.groups)
        await pilot.press(*["4"] * (2 * groups))
        await pilot.press(*["up"] * (groups - 1), "1", "2")  # caption 1: new P and R
        await pilot.pause()
        first, second = (group.caption_ids[0] for group in app.screen.groups[:2])
        rated = ratings(engine, Stage.FIRST)
        assert (rated[first], rated[second]) == ((1, 2), (4, 4))


def fluency_checks(engine) -> dict[int, tuple[float, str | None]]:
    table = FluencyCheck.__table__
    with engine.connect() as connection:
        return {row.caption_id: (row.fluency, row.fluency_type)
                for row in connection.execute(select(table))}


@pytest.mark.slow
async def test_fluency_round_undo_takes_back_the_last_verdict(tmp_path):
    engine = sample_engine(tmp_path)
    register_annotator(engine, "dave", native_english=True)
    review_with_changes(engine)  # alice and bob: not known to be native speakers
    queue = fluency_queue(engine)[:2]
    first, second = (item.caption_id for item in queue)
    app = ThumbApp(screen=FluencyRoundScreen(FluencyRoundSession(engine, "dave"), queue))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("x", "f", "enter")  # 1: fluent; 2: a spelling error
        await pilot.pause()
        assert fluency_checks(engine)[second] == (0.1, "spelling")
        await pilot.press("[", "f", "enter")  # back to 1 (the round stops at 2): spelling
        await pilot.pause()
        assert fluency_checks(engine)[first] == (0.1, "spelling")
        await pilot.press("u")  # back to caption 1's verdict before: fluent
        await pilot.pause()
        assert fluency_checks(engine)[first] == (0.0, None)
        assert str(app.screen.query_one("#round-message", Static).content) == (
            "undid the verdict on 1/2")
        assert "your verdict: 0 (no errors)" in str(
            app.screen.query_one("#round-caption", Static).content)
        await pilot.press("u", "u")  # caption 2's verdict, then caption 1's first: none
        await pilot.pause()
        assert fluency_checks(engine) == {}
        await pilot.press("u")
        assert str(app.screen.query_one("#round-message", Static).content) == (
            "nothing to undo in this session")
    with engine.connect() as connection:
        undos = connection.execute(select(Event.__table__).where(
            Event.__table__.c.table_name == "fluency_check",
            Event.__table__.c.action == "undo")).all()
    assert {row.actor for row in undos} == {"dave"} and all(row.reverts for row in undos)


@pytest.mark.postgres
@pytest.mark.slow
def test_a_team_member_withdraws_their_reasons_and_undoes_their_verdict():
    """On a team database the server lets each one delete only their own rows: the
    resolver's reasons when their values change, the native speaker's undone verdict."""
    url = os.environ.get("THUMB_TEST_POSTGRES")
    if not url:
        pytest.skip("THUMB_TEST_POSTGRES is not set")
    people = {"alice": False, "bob": False, "carol": False, "lead": True}
    with team_on(url, people) as team:
        import_captions(team.engine("lead"), SAMPLE_CSV, actor="lead")
        alice = AnnotationSession(team.engine("alice"), team.names["alice"])
        for group in alice.open_image(0):
            alice.set_values(group, {"precision": 4, "recall": 4}, image_index=0, focus=0)
        bob = AnnotationSession(team.engine("bob"), team.names["bob"], stage=Stage.SECOND)
        for group in bob.open_image(0):
            bob.set_values(group, {"precision": 2, "recall": 4}, image_index=0, focus=0)
        carol = ResolutionSession(team.engine("carol"), team.names["carol"])
        item = carol.queue()[0]
        index = carol.image_index_of_caption(item.caption_id)
        group = carol.set_values(carol.group_for_caption(item.caption_id),
                                 {"precision": 3, "recall": 4}, image_index=index, focus=0)
        carol.record_reasons(group, ["both-wrong"])
        carol.set_values(group, {"precision": 4}, image_index=index, focus=0)
        assert carol.recorded_reasons(item.caption_id) == []
        assert resolutions(team.engine("lead")) == {}
        register_annotator(team.engine("lead"), team.names["carol"], True)
        checker = FluencyRoundSession(team.engine("carol"), team.names["carol"])
        waiting = checker.queue()
        checker.record(waiting[0], 0.0, None)
        assert checker.undo() == list(waiting[0].caption_ids)
        assert fluency_checks(team.engine("lead")) == {}
