"""Issue #26 item 3, slips taken back: flagging an image asks first and `u` undoes the
flag; `u` undoes exactly the last change of this session and says which; the lead unflags
with `thumb image unflag`; an unknown --annotator name is refused with a close match; and
an image flagged as broken is out of review and of the report (listed apart)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select
from textual.widgets import Static
from typer.testing import CliRunner

from storage import Event, Rating, import_captions
from storage.models import Annotator, Image, ImageFlag, Stage
from storage.rating.annotators import register_annotator
from storage.rating.dashboard import dashboard, work_for
from storage.rating.image_flags import flag_image
from storage.rating.rating_sessions import AnnotationSession
from tests.app_helpers import make_app, sample_engine
from tests.conftest import SAMPLE_CSV
from thumb_tui.cli import app as cli
from thumb_tui.screens.confirm_flag import ConfirmFlagScreen

runner = CliRunner()
SAMPLE_RATINGS = SAMPLE_CSV.parent / "example_ratings.csv"
SOUND_IMAGE = "the annotator sees no usable image"  # the reason x gives a sound image


@pytest.fixture
def engine(tmp_path):
    return sample_engine(tmp_path)


def flags(engine) -> list:
    with engine.connect() as connection:
        return connection.execute(select(ImageFlag.__table__)).all()


def flag_events(engine) -> list:
    event = Event.__table__
    with engine.connect() as connection:
        return connection.execute(select(event).where(event.c.table_name == "image_flag")
                                  .order_by(event.c.id)).all()


def scores(engine) -> list[tuple]:
    rating = Rating.__table__
    with engine.connect() as connection:
        return connection.execute(select(rating.c.caption_id, rating.c.precision,
                                         rating.c.recall).order_by(rating.c.caption_id)).all()


def message(app) -> str:
    return str(app.screen.query_one("#message", Static).content)


def rate_image(session: AnnotationSession, index: int) -> None:
    for number, group in enumerate(session.open_image(index)):
        session.set_values(group, {"precision": 4, "recall": 3}, image_index=index,
                           focus=number)


# -- 1. x asks first ------------------------------------------------------------------------

@pytest.mark.slow
async def test_x_asks_before_flagging_n_leaves_the_image_y_flags_it(engine):
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmFlagScreen)
        shown = " ".join(str(label.render()) for label in app.screen.query("Label"))
        assert "img01" in shown and SOUND_IMAGE in shown
        await pilot.press("n")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmFlagScreen)
        assert flags(engine) == [] and app.screen.image_index == 0
        assert message(app) == "img01 is not flagged"
        await pilot.press("x", "escape")  # Esc cancels too
        await pilot.pause()
        assert flags(engine) == []
        await pilot.press("x", "y")
        await pilot.pause()
        assert [row.reason for row in flags(engine)] == [SOUND_IMAGE]
        assert app.screen.image_index == 1
        assert message(app) == f"flagged img01 as broken ({SOUND_IMAGE}); moved on"


@pytest.mark.slow
async def test_enter_in_the_dialog_flags_too(engine):
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("x", "enter")
        await pilot.pause()
    assert len(flags(engine)) == 1


@pytest.mark.slow
def test_the_flag_dialog_fits_80x24(snap_compare, tmp_path):
    app = make_app(sample_engine(tmp_path), image_mode="halfcell")
    assert snap_compare(app, terminal_size=(80, 24), press=["x"])


# -- 2. u undoes the flag, and only this session's changes --------------------------------

@pytest.mark.slow
async def test_u_after_a_flag_takes_the_flag_back_and_leaves_older_ratings(engine):
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5", "4", "3")  # caption 1: P5 R4, then caption 2: P3
        await pilot.pause()
        rated = scores(engine)
        await pilot.press("x", "y")
        await pilot.pause()
        assert len(flags(engine)) == 1 and app.screen.image_index == 1
        await pilot.press("u")
        await pilot.pause()
        assert message(app) == "undid the broken-image flag on img01"
        assert flags(engine) == [] and scores(engine) == rated
        assert app.screen.image_index == 0  # back on the image, open to rate again
        assert app.screen.session.flagged == set()
        await pilot.press("u")  # the change before the flag: P of caption 2
        await pilot.pause()
        assert message(app) == "undid P on caption 2/4 of img01"
        assert sorted((s[1:] for s in scores(engine)), key=str) == [(5, 4), (None, None)]
    inserted, undone = flag_events(engine)
    assert (inserted.action, inserted.field_name, json.loads(inserted.new_value)) == (
        "insert", "reason", SOUND_IMAGE)
    assert (undone.action, undone.actor, undone.reverts, json.loads(undone.old_value),
            json.loads(undone.new_value)) == ("undo", "alice", inserted.change_id,
                                              SOUND_IMAGE, None)


@pytest.mark.slow
async def test_the_undo_message_names_field_caption_and_image(engine):
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5", "4", "]", "u")
        await pilot.pause()
        assert app.screen.image_index == 0
        assert message(app) == "undid R on caption 1/4 of img01"


async def test_u_in_a_new_session_does_not_undo_an_earlier_sessions_change(engine):
    earlier = AnnotationSession(engine, "alice")
    rate_image(earlier, 0)
    earlier.flag_broken(1, "black frame")
    before, flagged = scores(engine), flags(engine)
    app = make_app(engine)  # alice again, a new run
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("u")
        await pilot.pause()
        assert message(app) == "nothing to undo in this session"
        await pilot.press("down", "2", "u")  # this session's own change: undone
        await pilot.pause()
        assert message(app).startswith("undid P on caption ")
        await pilot.press("u")
        await pilot.pause()
        assert message(app) == "nothing to undo in this session"
    assert scores(engine) == before and flags(engine) == flagged
    assert AnnotationSession(engine, "alice").undo() is None
    assert earlier.undo() is not None  # the session that made the changes still can


# -- 3. the lead unflags -------------------------------------------------------------------

def thumb(db, *args: str):
    return runner.invoke(cli, ["--db", str(db), *map(str, args)])


def test_image_unflag_removes_the_flag_logs_it_and_status_stops_listing_it(tmp_path):
    engine = sample_engine(tmp_path)
    db = tmp_path / "app.db"
    alice, bob = AnnotationSession(engine, "alice"), AnnotationSession(engine, "bob")
    alice.flag_broken(0, "black frame")
    bob.flag_broken(bob.images.index(next(i for i in bob.images if i.key == "img01")),
                    "cut in half")
    status = thumb(db, "status")
    assert "broken image img01: black frame (flagged by alice)" in status.output
    result = thumb(db, "image", "unflag", "img01", "--annotator", "bob", "--by", "lead")
    assert result.exit_code == 0, result.output
    assert result.output == ("img01: removed the broken-image flag of bob; it stays "
                             "flagged by alice\n")
    result = thumb(db, "image", "unflag", "img01", "--by", "lead")
    assert result.exit_code == 0, result.output
    assert result.output == ("img01: removed the broken-image flag of alice; it is no longer "
                             "kept out of the queues, review, agreement and the report\n")
    # img01 was never rated: nothing says it goes to review
    assert flags(engine) == []
    removed = [e for e in flag_events(engine) if e.action == "delete"]
    assert [(e.actor, json.loads(e.old_value), json.loads(e.new_value)) for e in removed] == [
        ("lead", "cut in half", None), ("lead", "black frame", None)]
    status = thumb(db, "status")
    assert "broken image" not in status.output
    assert AnnotationSession(engine, "alice").flagged == set()


def test_image_unflag_says_what_is_wrong(tmp_path):
    engine = sample_engine(tmp_path)
    db = tmp_path / "app.db"
    register_annotator(engine, "bob", None)
    AnnotationSession(engine, "alice").flag_broken(0, "black frame")
    for args, error in [
        (["img99"], "error: no image 'img99' in this project"),
        (["img02"], "error: image 'img02' is not flagged as broken"),
        (["img01", "--annotator", "bob"],
         "error: image 'img01' is not flagged by 'bob' (flagged by 'alice')"),
    ]:
        result = thumb(db, "image", "unflag", *args)
        assert result.exit_code == 2 and result.output.strip() == error, result.output
    assert len(flags(engine)) == 1


# -- 4. an unknown annotator is refused ----------------------------------------------------

ANNOTATOR_COMMANDS = {
    "annotate": ["annotate", "--image-mode", "none"],
    "review": ["review", "--image-mode", "none"],
    "resolve": ["resolve", "--image-mode", "none"],
    "fluency-round": ["fluency-round"],
    "next": ["next"],
    "bison annotate": ["bison", "annotate", "--image-mode", "none"],
    "match annotate": ["match", "annotate", "--image-mode", "none"],
    "match reassign": ["match", "reassign", "--batch", "1"],
    "image unflag": ["image", "unflag", "img01"],
}


@pytest.fixture
def two_annotators(tmp_path):
    db = tmp_path / "team.db"
    assert thumb(db, "import", SAMPLE_CSV).exit_code == 0
    for name in ("alice", "bob"):
        assert thumb(db, "annotator", name).exit_code == 0
    return db


@pytest.mark.slow
@pytest.mark.parametrize("command", list(ANNOTATOR_COMMANDS))
def test_an_unknown_annotator_is_refused_with_a_close_match(two_annotators, command):
    db = two_annotators
    result = thumb(db, *ANNOTATOR_COMMANDS[command], "--annotator", "alcie")
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        "error: no annotator 'alcie' in this project; did you mean 'alice'? Known: alice, "
        f"bob. Create a new one with `thumb --db {db} annotator alcie`.")
    engine_names = thumb(db, "status", "--format", "json").output
    assert [a["name"] for a in json.loads(engine_names)["annotators"]] == ["alice", "bob"]


def test_a_far_name_gets_no_guess_and_a_hostile_name_is_escaped(two_annotators):
    db = two_annotators
    result = thumb(db, "next", "--annotator", "zed")
    assert result.exit_code == 2
    assert result.output.startswith("error: no annotator 'zed' in this project. Known: alice")
    result = thumb(db, "next", "--annotator", "ali\x1b]52;c;eA==\x07ce")
    assert result.exit_code == 2 and "\x1b" not in result.output and "\x07" not in result.output


def test_a_known_name_made_by_the_annotator_command_import_or_earlier_work_passes(tmp_path):
    db = tmp_path / "known.db"
    assert thumb(db, "import", SAMPLE_CSV).exit_code == 0
    assert thumb(db, "import", SAMPLE_RATINGS).exit_code == 0  # its raters are known now
    with open_engine(db) as engine, engine.connect() as connection:
        raters = sorted(connection.execute(select(Annotator.__table__.c.name)).scalars())
    assert raters
    for name in raters:
        assert thumb(db, "next", "--annotator", name).exit_code == 0
    assert thumb(db, "annotator", "newcomer").exit_code == 0
    result = thumb(db, "next", "--annotator", "newcomer")
    assert result.exit_code == 0 and "--annotator newcomer" in result.output


class open_engine:
    def __init__(self, db) -> None:
        from storage import open_database

        self.engine = open_database(db)

    def __enter__(self):
        return self.engine

    def __exit__(self, *_: object) -> None:
        self.engine.dispose()


# -- 5. a flagged image is out of review and of the report ----------------------------------

def test_a_flagged_image_leaves_the_review_queue_until_unflagged(engine, tmp_path):
    alice = AnnotationSession(engine, "alice")
    rate_image(alice, 0)
    rate_image(alice, 1)
    flagged_key = alice.images[0].key
    carol = AnnotationSession(engine, "carol", stage=Stage.SECOND)
    assert [image.key for image in carol.images] == [alice.images[0].key,
                                                     alice.images[1].key]
    carol.flag_broken(0, "the file shows another scene")
    dave = AnnotationSession(engine, "dave", stage=Stage.SECOND)
    assert [image.key for image in dave.images] == [alice.images[1].key]
    register_annotator(engine, "erin", None)
    assert [(w.command, w.count) for w in work_for(engine, "erin")
            if w.command == "review"] == [("review", 1)]
    review = next(stage for stage in dashboard(engine).stages if stage.stage == "review")
    assert (review.waiting, review.in_progress, review.done) == (1, 0, 0)
    assert thumb(tmp_path / "app.db", "image", "unflag", flagged_key).exit_code == 0
    assert len(AnnotationSession(engine, "dave", stage=Stage.SECOND).images) == 2


def test_the_report_leaves_a_flagged_image_out_and_lists_it_apart(tmp_path):
    from reports.thumb.render import to_json, to_markdown
    from reports.thumb.tables import build_report

    engine = sample_engine(tmp_path)
    import_captions(engine, SAMPLE_RATINGS, actor="setup")
    before = build_report(engine, bootstrap=0)
    assert "img02" in set(before.data["image_id"])
    register_annotator(engine, "bob", None)
    image, annotator = Image.__table__, Annotator.__table__
    with engine.begin() as connection:  # the flag as bob's `x` records it
        image_id = connection.execute(select(image.c.id).where(image.c.key == "img02")
                                      ).scalar_one()
        bob_id = connection.execute(select(annotator.c.id).where(annotator.c.name == "bob")
                                    ).scalar_one()
        flag_image(connection, image_id, bob_id, "bob", "a | pipe and <b>tag</b>")
    report = build_report(engine, bootstrap=0)
    assert "img02" not in set(report.data["image_id"])
    assert len(report.data) == len(before.data) - (before.data["image_id"] == "img02").sum()
    assert report.header["rated_images"] == before.header["rated_images"] - 1
    assert report.header["images"] == before.header["images"]  # the project keeps it
    markdown = to_markdown(report, {})
    section = markdown.split("## Images flagged as broken (left out of the tables above)")[1]
    assert "img02" in section and "bob" in section and "<b>" not in section
    assert json.loads(to_json(report))["broken_images"] == [
        {"image": "img02", "flagged_by": "bob", "reason": "a | pipe and <b>tag</b>"}]
    assert "Images flagged as broken" not in to_markdown(before, {})


def test_agreement_leaves_a_flagged_image_out_as_the_report_does(tmp_path):
    from storage.rating.rating_frames import rating_pairs
    from tests.test_workflow import review_with_changes

    engine = sample_engine(tmp_path)
    review_with_changes(engine)
    before = rating_pairs(engine, ["precision", "recall"])
    flagged = before["image"].iloc[0]
    assert (before["image"] == flagged).any()
    register_annotator(engine, "bob", None)
    image, annotator = Image.__table__, Annotator.__table__
    with engine.begin() as connection:
        bob_id = connection.execute(select(annotator.c.id).where(annotator.c.name == "bob")
                                    ).scalar_one()
        image_id = connection.execute(select(image.c.id).where(image.c.key == flagged)
                                      ).scalar_one()
        flag_image(connection, image_id, bob_id, "bob", "cannot be seen")
    after = rating_pairs(engine, ["precision", "recall"])
    assert not (after["image"] == flagged).any()
    assert len(after) == len(before) - (before["image"] == flagged).sum() > 0
