"""Stage 2, resolution, the fluency round and blind double rating: the protocol's rules
asserted on the database, and the screens driven with Pilot."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from sqlalchemy import select, update
from textual.widgets import SelectionList, Static

from storage import Annotator, Event, Rating, final_scores
from storage.models import Caption, FluencyCheck, Image, Resolution, Stage
from storage.rating.project_queues import (
    ProtocolError,
    assign_double,
    disagreements,
    fluency_queue,
    primary_first_ratings,
    record_fluency_check,
    record_resolution,
)
from storage.rating.protocol import check_may_rate
from storage.rating.rating_sessions import AnnotationSession, FluencyRoundSession, ResolutionSession
from tests.app_helpers import first_caption_id, review_lowering_first_recall, sample_engine
from thumb_tui.app import ThumbApp
from thumb_tui.screens.annotate import ReviewScreen
from thumb_tui.screens.fluency_round import FluencyRoundScreen
from thumb_tui.screens.resolve import ResolveScreen


@pytest.fixture
def engine(tmp_path):
    return sample_engine(tmp_path)


def rate_everything(session: AnnotationSession, seed: int, note: str = "") -> None:
    """Give every caption of every open image seeded P/R scores through the session API."""
    rng = random.Random(seed)
    for index in range(len(session.images)):
        for group in session.open_image(index):
            values = {"precision": rng.randint(3, 5), "recall": rng.randint(2, 5)}
            if note:
                values["note"] = note
            session.set_values(group, values, image_index=index, focus=0)


def stage_rows(engine, stage: int) -> list:
    with engine.connect() as connection:
        return connection.execute(
            select(Rating.__table__).where(Rating.__table__.c.stage == stage)).all()


def test_stage_one_annotator_cannot_review_their_own_image(engine):
    alice = AnnotationSession(engine, "alice")
    rate_everything(alice, 1)
    assert AnnotationSession(engine, "alice", stage=Stage.SECOND).images == []
    bob = AnnotationSession(engine, "bob", stage=Stage.SECOND)
    assert len(bob.images) == 15
    # written around the screens, the API refuses too
    intruder = AnnotationSession(engine, "alice", stage=Stage.SECOND)
    intruder.images = bob.images
    group = bob.open_image(0)[0]
    with pytest.raises(ProtocolError, match="you rated this image at stage 1"):
        intruder.set_values(group, {"precision": 1}, image_index=0, focus=0)
    assert stage_rows(engine, 2) == []


def test_blind_pairs_cannot_see_each_other(engine):
    marked = assign_double(engine, 0.2, seed=3, actor="lead").marked
    assert len(marked) == 3
    alice = AnnotationSession(engine, "alice")
    rate_everything(alice, 1, note="alice was here")
    bob = AnnotationSession(engine, "bob")
    with engine.connect() as connection:
        doubles = set(connection.execute(select(Image.__table__.c.id).where(
            Image.__table__.c.double_rating.is_(True))).scalars())
    assert {image.id for image in bob.images} == doubles  # only the double images are open
    assert sorted(image.key for image in bob.images) == marked
    for index in range(len(bob.images)):
        for group in bob.open_image(index):
            assert group.reference is None
            assert group.values["precision"] is None and group.values["note"] == ""
    rate_everything(bob, 2)
    carol = AnnotationSession(engine, "carol")
    assert carol.images == []  # two blind ratings already: nobody else rates them


def test_double_rating_never_goes_to_someone_who_saw_the_scores(engine):
    first = assign_double(engine, 0.2, seed=3, actor="lead")
    assert len(first.marked) == 3
    assert assign_double(engine, 0.2, seed=9, actor="lead").added == []  # share reached
    rate_everything(AnnotationSession(engine, "alice"), 1)
    bob = AnnotationSession(engine, "bob", stage=Stage.SECOND)
    assert not {image.key for image in bob.images} & set(first.marked)  # 1 of 2 blind
    reviewed = []
    for index, image in enumerate(bob.images[:4]):
        for group in bob.open_image(index):
            bob.set_values(group, dict(group.reference), image_index=index, focus=0)
        reviewed.append(image.key)
    carol = AnnotationSession(engine, "carol", stage=Stage.SECOND)
    carol.open_image(0)  # carol looks at alice's scores of one image, saves nothing
    looked = carol.images[0].key
    later = assign_double(engine, 0.6, seed=3, actor="lead")  # 9 of 15 images
    assert len(later.added) == 6 and not set(later.added) & {*reviewed, looked}
    assert later.seen == 5 and set(first.marked) <= set(later.marked)
    blind = AnnotationSession(engine, "bob")  # stage 1: the blind second ratings
    assert sorted(image.key for image in blind.images) == later.marked
    image = Image.__table__
    with engine.begin() as connection:  # marked around the API: still refused
        connection.execute(update(image).where(image.c.key.in_([looked, reviewed[0]]))
                           .values(double_rating=True))
        ids = dict(connection.execute(select(image.c.key, image.c.id)).all())
        for name, key in (("carol", looked), ("alice", reviewed[0])):
            with pytest.raises(ProtocolError, match="opened for review: its stage 1 is closed"):
                check_may_rate(connection, name, Stage.FIRST, ids[key])
    assert looked not in {i.key for i in AnnotationSession(engine, "carol").images}


@pytest.mark.slow
async def test_review_screen_confirms_and_changes_stage_one_scores(engine):
    rate_everything(AnnotationSession(engine, "alice"), 1)
    before = sorted((r.caption_id, r.precision, r.recall) for r in stage_rows(engine, 1))
    session = AnnotationSession(engine, "bob", stage=Stage.SECOND)
    app = ThumbApp(screen=ReviewScreen(session, "none"))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        groups = list(screen.groups)
        assert all(g.reference is not None for g in groups)
        await pilot.press("a")  # caption 1: confirm stage 1
        await pilot.press("1", "1")  # caption 2: change to P1 R1
        await pilot.press("A")  # the rest: confirm
        await pilot.pause()
        text = app.export_screenshot()
        assert "stage" in text
    second = {r.caption_id: r for r in stage_rows(engine, 2)}
    assert len(second) == len({c for g in groups for c in g.caption_ids})
    changed = groups[1].caption_ids[0]
    assert (second[changed].precision, second[changed].recall) == (1, 1)
    kept = groups[0].caption_ids[0]
    assert (second[kept].precision, second[kept].recall) == (
        groups[0].reference["precision"], groups[0].reference["recall"])
    assert sorted((r.caption_id, r.precision, r.recall) for r in stage_rows(engine, 1)) == before
    assert any(d.caption_id == changed for d in disagreements(engine))


def review_with_changes(engine) -> None:
    """Alice rates everything, Bob reviews it and changes P of one caption on each of the
    first three images (fixed shuffles, so the same captions every run)."""
    rate_everything(AnnotationSession(engine, "alice", seed_source=lambda: 1), 1)
    bob = AnnotationSession(engine, "bob", stage=Stage.SECOND, seed_source=lambda: 2)
    for index in range(len(bob.images)):
        for number, group in enumerate(bob.open_image(index)):
            values = {k: group.reference[k] for k in ("precision", "recall")}
            if index < 3 and number == 0:
                values["precision"] = 1 if values["precision"] > 2 else 5
            bob.set_values(group, values, image_index=index, focus=0)


@pytest.mark.slow
async def test_resolve_screen_sets_final_values_and_reasons(engine):
    review_with_changes(engine)
    queue = disagreements(engine)
    assert len(queue) == 3 and queue[0].severity >= queue[-1].severity
    session = ResolutionSession(engine, "carol")
    app = ThumbApp(screen=ResolveScreen(session, queue, "none"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("a", "]")  # values taken, but moving on without reasons
        message = str(app.screen.query_one("#message", Static).content)
        assert "disagreement 1 has values but no reasons (r): still unresolved" in message
        await pilot.press("[")  # back, from an untouched disagreement: nothing to warn of
        assert str(app.screen.query_one("#message", Static).content) == ""
        await pilot.press("a")  # take the stage-1 values
        message = str(app.screen.query_one("#message", Static).content)
        assert message == "saved; now r: the reasons, to resolve it"
        await pilot.press("r")
        reasons = app.screen.query_one(SelectionList)
        assert reasons.selected == ["first-right"]  # pre-ticked: the side taken
        lines = [reasons.render_line(y).text for y in range(2)]
        assert "X" in lines[0] and "X" not in lines[1]  # an unticked box is empty
        await pilot.press("enter")
        await pilot.pause()
        compare = str(app.screen.query_one("#compare", Static).content)
        assert "reasons: first-right" in compare
        await pilot.press("]", "2", "2", "r")  # values neither side gave: "both wrong"
        assert app.screen.query_one(SelectionList).selected == ["both-wrong"]
        await pilot.press("escape")
    first = queue[0]
    with engine.connect() as connection:
        resolution = connection.execute(select(Resolution.__table__)).one()
        final = connection.execute(select(Rating.__table__).where(
            Rating.__table__.c.stage == 3, Rating.__table__.c.caption_id == queue[0].caption_id
        )).one()
    assert resolution.caption_id == first.caption_id and resolution.reasons == "first-right"
    assert (final.precision, final.recall) == (first.first["precision"], first.first["recall"])
    scores = final_scores(engine).set_index("caption_id")
    assert scores.loc[first.caption_id, "final_source"] == "resolution"
    assert len(disagreements(engine)) == 2


@pytest.mark.slow
async def test_fluency_round_sets_the_final_fluency(engine):
    with engine.begin() as connection:
        connection.execute(Annotator.__table__.insert().values(
            name="dave", native_english=True, created_at=__import__("datetime").datetime.now()))
    review_with_changes(engine)  # alice and bob: native_english unknown, so not native
    queue = fluency_queue(engine)
    distinct = final_scores(engine).groupby(["image_id", "caption"]).ngroups
    assert len(queue) == distinct < 60  # identical captions of an image come once
    rating = Rating.__table__
    with engine.begin() as connection:  # alice saw a spelling error that bob then removed
        connection.execute(update(rating).where(
            rating.c.id == queue[0].first["id"]).values(fluency=0.2, fluency_type="spelling"))
    queue = fluency_queue(engine)
    assert queue[0].first["fluency"] == pytest.approx(0.2) and not queue[0].second["fluency"]
    with pytest.raises(ProtocolError, match="only native English speakers"):
        record_fluency_check(engine, queue[0].caption_id, "alice", 0.0, None)
    app = ThumbApp(screen=FluencyRoundScreen(FluencyRoundSession(engine, "dave"), queue))
    async with app.run_test(size=(80, 24)) as pilot:
        shown = str(app.screen.query_one("#round-caption", Static).content)
        assert "stage 1 fluency penalty: 0.2 (spelling)" in shown
        assert "stage 2 fluency penalty: none" in shown
        await pilot.press("f", "enter")  # obvious spelling error: 0.1
        message = str(app.screen.query_one("#round-message", Static).content)
        assert message == f"saved; {distinct - 1} to check (] next)"
        await pilot.press("x")  # the verdict moved on: the next caption is fluent
        await pilot.pause()
        await pilot.press("z")  # a key that does nothing says so
        message = str(app.screen.query_one("#round-message", Static).content)
        assert message == "the key z does nothing here; ? lists the keys"
        opened = []
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("webbrowser.open", lambda uri: opened.append(uri) or True)
            await pilot.press("o")
        assert len(opened) == 1 and "in the system viewer" in str(
            app.screen.query_one("#round-message", Static).content)
    twins = next(item for item in queue[2:] if len(item.caption_ids) > 1)
    later = [twins, next(item for item in queue[2:] if item is not twins)]
    app = ThumbApp(screen=FluencyRoundScreen(FluencyRoundSession(engine, "dave"), later))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("x", "x")
        message = str(app.screen.query_one("#round-message", Static).content)
        assert message == "saved; all 2 captions checked: q quits"
    with engine.connect() as connection:
        checks = {r.caption_id: r for r in connection.execute(
            select(FluencyCheck.__table__))}
    assert all(checks[c].fluency == 0.0 for c in twins.caption_ids)  # one verdict, both
    assert checks[queue[0].caption_id].fluency == pytest.approx(0.1)
    assert checks[queue[0].caption_id].fluency_type == "spelling"
    assert checks[queue[1].caption_id].fluency == 0.0
    scores = final_scores(engine).set_index("caption_id")
    row = scores.loc[queue[0].caption_id]
    assert row["fluency"] == pytest.approx(0.1) and row["final_source"].endswith("fluency round")
    assert row["total"] == pytest.approx((row["precision"] + row["recall"]) / 2 - 0.1)
    assert len(fluency_queue(engine)) == distinct - 4
    from reports.thumb.tables import build_report

    header = build_report(engine, bootstrap=0).header
    assert "dave" in header["annotators_of_final_scores"] and "dave" in header["annotators"]


def test_native_speakers_skip_the_fluency_round(engine):
    with engine.begin() as connection:
        connection.execute(update(Annotator.__table__).values(native_english=True))
    review_with_changes(engine)
    with engine.begin() as connection:
        connection.execute(update(Annotator.__table__).where(
            Annotator.__table__.c.name == "alice").values(native_english=True))
    assert fluency_queue(engine) == []


def test_the_fluency_round_waits_for_a_complete_review_and_its_rubric(engine):
    """A half-scored review is not a review yet (`is_complete`); a verdict's amount and
    error types are checked by the review's rubric (`Rubric.penalty_problem`)."""
    from storage.rating.rating_sessions import register_annotator

    rate_everything(AnnotationSession(engine, "alice", seed_source=lambda: 1), 1)
    register_annotator(engine, "dave", True)
    bob = AnnotationSession(engine, "bob", stage=Stage.SECOND, seed_source=lambda: 2)
    group = bob.open_image(0)[0]
    caption_id = group.caption_ids[0]
    bob.set_values(group, {"precision": group.reference["precision"]}, image_index=0,
                   focus=0)
    assert caption_id not in {c for item in fluency_queue(engine) for c in item.caption_ids}
    with pytest.raises(ProtocolError, match="comes after review"):
        record_fluency_check(engine, caption_id, "dave", 0.1, "spelling")
    group = bob.open_image(0)[0]
    bob.set_values(group, {"recall": group.reference["recall"]}, image_index=0, focus=0)
    assert caption_id in {c for item in fluency_queue(engine) for c in item.caption_ids}
    with pytest.raises(ValueError, match=r"fluency penalty 0\.4 does not match error type"):
        record_fluency_check(engine, caption_id, "dave", 0.4, "spelling")
    with pytest.raises(ValueError, match="unknown fluency error type 'typo'"):
        record_fluency_check(engine, caption_id, "dave", 0.1, "typo")
    record_fluency_check(engine, caption_id, "dave", 0.1, "spelling")
    with engine.connect() as connection:
        check = connection.execute(select(FluencyCheck.__table__)).one()
    assert (check.caption_id, check.fluency, check.fluency_type) == (caption_id, 0.1,
                                                                     "spelling")


@pytest.mark.slow
def test_end_to_end_two_annotators_to_agreement_export(engine, tmp_path):
    from typer.testing import CliRunner

    from thumb_tui.cli import app

    assign_double(engine, 0.2, seed=1, actor="lead")
    rate_everything(AnnotationSession(engine, "alice"), 1)
    rate_everything(AnnotationSession(engine, "bob"), 2)
    assert AnnotationSession(engine, "bob", stage=Stage.SECOND).images  # alice's alone
    review_lowering_first_recall(engine, "bob")
    carol = ResolutionSession(engine, "carol")
    for item in disagreements(engine)[:5]:
        group = carol.group_for_caption(item.caption_id)
        carol.set_values(group, {"precision": item.second["precision"],
                                 "recall": item.second["recall"]},
                         image_index=carol.image_index_of_caption(item.caption_id), focus=0)
        from storage.rating.project_queues import record_resolution

        record_resolution(engine, item.caption_id, "carol", ["second-right"], "",
                          ["second-right"])
    db = str(engine.url.database)
    out = tmp_path / "agreement.json"
    result = CliRunner().invoke(app, ["--db", db, "agreement", "--format", "json",
                                      "--out", str(out), "--bootstrap", "100"])
    assert result.exit_code == 0, result.output
    records = json.loads(out.read_text(encoding="utf-8"))
    assert {r["kind"] for r in records} == {"blind", "stage1-vs-stage2"}
    assert set(records[0]) == {"dimension", "annotator_a", "annotator_b", "kind", "statistic",
                               "value", "ci_low", "ci_high", "n", "images", "note",
                               "ci_warning"}
    blind = [r for r in records if r["kind"] == "blind"
             and (r["annotator_a"], r["annotator_b"]) == ("alice", "bob")
             and r["dimension"] == "precision" and r["statistic"] == "kappa_quadratic"]
    assert blind and blind[0]["n"] == 12
    status = CliRunner().invoke(app, ["--db", db, "status"])
    assert "resolution" in status.output and "fluency round" in status.output
    table = CliRunner().invoke(app, ["--db", db, "agreement", "--bootstrap", "100"])
    assert "SAW the first's scores" in table.output and "independent" in table.output


@pytest.mark.slow
async def test_review_edits_start_from_stage_one_and_accept_all_keeps_them(engine):
    alice = AnnotationSession(engine, "alice")
    for index in range(len(alice.images)):
        for group in alice.open_image(index):
            alice.set_values(group, {"precision": 4, "recall": 4, "fluency": 0.2,
                                     "fluency_type": "punctuation", "conciseness": 0.5,
                                     "conciseness_type": "redundant"},
                             image_index=index, focus=0)
    session = AnnotationSession(engine, "bob", stage=Stage.SECOND)
    app = ThumbApp(screen=ReviewScreen(session, "none"))
    async with app.run_test(size=(80, 24)) as pilot:
        groups = list(app.screen.groups)
        await pilot.press("3", "3")  # caption 1: new P and R, penalties kept
        # caption 2: only an inclusive penalty (the penalty keys act on the caption just
        # scored until a move, here P/R)
        await pilot.press("tab", "i")
        await pilot.press("A")  # the rest: accepted; captions 1 and 2 keep their edits
        await pilot.pause()
    second = {r.caption_id: r for r in stage_rows(engine, 2)}
    first_row = second[groups[0].caption_ids[0]]
    assert (first_row.precision, first_row.recall, first_row.fluency,
            first_row.conciseness) == (3, 3, 0.2, 0.5)
    edited = second[groups[1].caption_ids[0]]
    assert (edited.precision, edited.inclusive, edited.conciseness) == (4, 0.5, 0.5)
    rest = [second[g.caption_ids[0]] for g in groups[2:]]
    assert all((r.precision, r.recall, r.inclusive) == (4, 4, 0.0) for r in rest)


async def test_empty_review_queue_says_so(engine):
    app = ThumbApp(screen=ReviewScreen(AnnotationSession(engine, "bob", stage=Stage.SECOND),
                                       "none"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert "Nothing to review" in str(app.screen.query_one("#title", Static).content)


def test_review_shows_one_blind_rater_and_waits_for_both(engine):
    assign_double(engine, 1.0, seed=0, actor="lead")
    alice, bob = AnnotationSession(engine, "alice"), AnnotationSession(engine, "bob")
    groups = alice.open_image(0)
    alice.set_values(groups[0], {"precision": 1, "recall": 1}, image_index=0, focus=0)
    for group in bob.open_image(0):  # bob, blind, finishes the image first
        bob.set_values(group, {"precision": 5, "recall": 5}, image_index=0, focus=0)
    carol = AnnotationSession(engine, "carol", stage=Stage.SECOND)
    assert carol.images == []  # stage 1 of a double image ends with both blind ratings
    for group in groups[1:]:
        alice.set_values(group, {"precision": 2, "recall": 2}, image_index=0, focus=0)
    carol = AnnotationSession(engine, "carol", stage=Stage.SECOND)
    shown = [group.reference for group in carol.open_image(0)]
    assert {(r["precision"], r["recall"]) for r in shown} <= {(1, 1), (2, 2)}  # alice's only
    with engine.connect() as connection:
        first = primary_first_ratings(connection)
    assert {row["annotator_id"] for row in first.values()} == {alice.annotator_id}


@pytest.mark.slow
def test_resolution_is_by_someone_else_once_per_text_and_sets_the_final_score(engine):
    review_with_changes(engine)
    assert disagreements(engine, resolver="alice") == []  # alice rated every image
    assert disagreements(engine, resolver="bob") == []  # bob reviewed them
    with engine.connect() as connection, pytest.raises(ProtocolError, match="someone else"):
        check_may_rate(connection, "alice", Stage.FINAL, 1)
    # bob changes the goldfish caption written by two systems: one disagreement, not two
    goldfish = "A goldfish swimming in a bowl of water."
    bob = AnnotationSession(engine, "bob", stage=Stage.SECOND)
    with engine.connect() as connection:
        twins = connection.execute(select(Caption.__table__.c.id).where(
            Caption.__table__.c.text == goldfish)).scalars().all()
    assert len(twins) == 2
    group = bob.group_for_caption(twins[0])
    index = bob.image_index_of_caption(twins[0])
    bob.set_values(group, {"recall": 1 if group.values["recall"] != 1 else 2},
                   image_index=index, focus=0)
    queue = disagreements(engine, resolver="carol")
    listed = [d for d in queue if d.text == goldfish]
    assert len(listed) == 1 and set(listed[0].caption_ids) == set(twins)
    before = final_scores(engine).set_index("caption_id")
    erin = AnnotationSession(engine, "erin", stage=Stage.FINAL)  # starts, gives no reasons
    erin.set_values(erin.group_for_caption(twins[0]), {"precision": 1, "recall": 1},
                    image_index=erin.image_index_of_caption(twins[0]), focus=0)
    pending = final_scores(engine).set_index("caption_id")
    assert pending.loc[twins[0], "annotator"] == "bob"  # still stage 2: not resolved
    assert pending.loc[twins[0], "recall"] == before.loc[twins[0], "recall"]
    carol = ResolutionSession(engine, "carol")
    app = ThumbApp(screen=ResolveScreen(carol, [listed[0]], "none"))

    async def resolve() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("b", "r", "enter", "n")
            await pilot.press(*"ok", "enter")
            await pilot.pause()

    import asyncio

    asyncio.run(resolve())
    final = final_scores(engine).set_index("caption_id")
    for caption_id in twins:
        assert final.loc[caption_id, "annotator"] == "carol"
        assert final.loc[caption_id, "final_source"] == "resolution"
    with engine.connect() as connection:
        resolutions = connection.execute(select(Resolution.__table__)).all()
    assert {r.caption_id for r in resolutions} == set(twins)
    assert {(r.reasons, r.note) for r in resolutions} == {("second-right", "ok")}


@pytest.mark.slow
def test_the_protocol_holds_for_undo_resolutions_checks_and_native_flags(engine):
    from storage.rating.rating_sessions import register_annotator

    alice = AnnotationSession(engine, "alice")
    rate_everything(alice, 1)
    carol = ResolutionSession(engine, "carol")
    caption_id = carol.group_for_caption(first_caption_id(engine)).caption_ids[0]
    with pytest.raises(ProtocolError, match="not been reviewed: there is nothing to resolve"):
        carol.set_values(carol.group_for_caption(caption_id), {"precision": 3},
                         image_index=carol.image_index_of_caption(caption_id), focus=0)
    register_annotator(engine, "dave", True)
    with pytest.raises(ProtocolError, match="comes after review"):
        record_fluency_check(engine, caption_id, "dave", 0.1, "spelling")
    bob = AnnotationSession(engine, "bob", stage=Stage.SECOND)
    bob.open_image(0)  # opening it for review closes its stage 1: alice cannot undo there
    opened = bob.images[0].id
    last = alice.images[-1].id
    assert opened != last  # alice's latest change is on her last image, still open
    assert alice.undo() is not None
    with engine.connect() as connection:
        on_opened = set(connection.execute(select(Caption.__table__.c.id).where(
            Caption.__table__.c.image_id == opened)).scalars())

    def opened_scores() -> list:
        return [(r.caption_id, r.precision, r.recall) for r in stage_rows(engine, 1)
                if r.caption_id in on_opened]

    before, refusal = opened_scores(), None
    while refusal is None:  # undo back until a change on the image bob opened
        try:
            assert alice.undo() is not None, "undo went past the reviewed image"
        except ProtocolError as exc:
            refusal = str(exc)
    assert "opened for review: its stage 1 is closed" in refusal
    assert opened_scores() == before
    for group in bob.open_image(0):
        bob.set_values(group, dict(group.reference), image_index=0, focus=0)
    with pytest.raises(ProtocolError, match="someone else must resolve"):
        record_resolution(engine, caption_id, "alice", ["first-right"], "", ["first-right"])
    with pytest.raises(ProtocolError, match="set the final P and R before the reasons"):
        record_resolution(engine, caption_id, "carol", ["first-right"], "", ["first-right"])
    record_fluency_check(engine, caption_id, "dave", 0.1, "spelling")
    with pytest.raises(ProtocolError, match="gave fluency-round verdicts"):
        register_annotator(engine, "dave", False)
    register_annotator(engine, "alice", False)
    with engine.connect() as connection:
        logged = connection.execute(select(Event.__table__).where(
            Event.__table__.c.table_name == "annotator")).all()
    assert [(e.actor, e.field_name, e.new_value) for e in logged] == [
        ("alice", "native_english", "false")]


def add_context(engine, caption_id: int) -> None:
    """Stage-1 and stage-2 notes and error types on one caption, as raters leave them."""
    rating = Rating.__table__
    with engine.begin() as connection:
        for stage, values in ((1, {"note": "looks like a cat", "fluency": 0.1,
                                   "fluency_type": "spelling"}),
                              (2, {"note": "it is a dog", "conciseness": 0.5,
                                   "conciseness_type": "redundant"})):
            connection.execute(update(rating).where(
                rating.c.caption_id == caption_id, rating.c.stage == stage).values(**values))


@pytest.mark.slow
async def test_review_shows_the_stage_one_note_and_error_types(engine):
    alice = AnnotationSession(engine, "alice")
    rate_everything(alice, 1)
    first = alice.open_image(0)
    alice.set_values(first[0], {"note": "blurry", "fluency": 0.2, "fluency_type": "punctuation"},
                     image_index=0, focus=0)
    app = ThumbApp(screen=ReviewScreen(AnnotationSession(engine, "bob", stage=Stage.SECOND),
                                       "none"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        card = next(c for c in screen.cards if c.group.caption_ids == first[0].caption_ids)
        shown = str(card.scores.content)
        assert "stage 1: P" in shown and "(fluency: punctuation)" in shown
        assert "note: blurry" in shown
        assert "(to review)" in str(screen.query_one("#title", Static).content)


@pytest.mark.slow
async def test_resolve_shows_both_stages_notes_error_types_and_the_image(engine):
    review_with_changes(engine)
    add_context(engine, disagreements(engine)[0].caption_id)
    queue = disagreements(engine)
    session = ResolutionSession(engine, "carol")
    app = ThumbApp(screen=ResolveScreen(session, queue, "none", resolved_before=2))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        compare = str(app.screen.query_one("#compare", Static).content)
        assert "stage 1: P" in compare and "(fluency: spelling) note: looks like a cat" in compare
        assert "(conciseness: redundant) note: it is a dog" in compare
        title = str(app.screen.query_one("#title", Static).content)
        image = session.images[session.image_index_of_caption(queue[0].caption_id)]
        assert image.key in title or Path(image.path).name in title
        assert "2/5 resolved" in title


@pytest.mark.slow
async def test_resolve_stops_at_the_end_of_the_queue_and_says_all_done(engine):
    review_with_changes(engine)
    queue = disagreements(engine)
    session = ResolutionSession(engine, "carol")
    app = ThumbApp(screen=ResolveScreen(session, queue, "none"))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        await pilot.press("]", "]", "]")
        assert screen.position == 2  # no silent wrap to the first
        message = str(screen.query_one("#message", Static).content)
        assert message == "last disagreement; still to resolve: 1, 2, 3 ([ goes back)"
        await pilot.press("[", "[", "[")
        assert screen.position == 0
        assert str(screen.query_one("#message", Static).content) == (
            "this is the first disagreement")
        for _ in queue:
            await pilot.press("a", "r", "enter", "]")
        message = str(screen.query_one("#message", Static).content)
        assert message == "all done: the 3 disagreements of this session are resolved; q quits"
        assert "3/3 resolved" in str(screen.query_one("#title", Static).content)
    assert disagreements(engine, resolver="carol") == []


@pytest.mark.slow
def test_reasons_from_someone_who_never_rated_are_refused_not_a_crash(engine):
    review_with_changes(engine)
    with pytest.raises(ProtocolError, match="'zoe' has set no final P and R"):
        record_resolution(engine, 1, "zoe", ["first-right"], "", ["first-right"])
