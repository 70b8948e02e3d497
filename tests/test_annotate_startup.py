"""What `thumb annotate` does before its first screen, made cheaper for large projects
(`benchmarks/annotate_latency.py`): the images open to an annotator are found without a
state per image, a session counts only the images with something complete, and the
collector is held off until the first screen is drawn. Each is checked against the plain
definition it replaces."""

from __future__ import annotations

import gc

from sqlalchemy import Engine, and_, func, select
from textual.widgets import Static
from typer.testing import CliRunner

from storage import import_captions
from storage.models import Caption, Rating, Stage
from storage.rating.image_flags import flagged_image_ids
from storage.rating.project_queues import assign_double
from storage.rating.protocol import complete_clause, open_images, read_states, refusals
from storage.rating.rating_sessions import AnnotationSession
from tests.app_helpers import make_app
from tests.conftest import SAMPLE_CSV
from thumb_tui.cli import app as cli
from thumb_tui.startup import collector_held

NAMES = ("alice", "bob", "carol", "dave", "erin")


def rate_image(session: AnnotationSession, index: int, precision: int = 4) -> None:
    for number, group in enumerate(session.open_image(index)):
        session.set_values(group, {"precision": precision, "recall": 3}, image_index=index,
                           focus=number)


def part_way(engine: Engine) -> None:
    """A project part-way through both stages: double-rated images, images rated once and
    twice, one held part-rated, one reviewed, one held at review, one flagged as broken."""
    import_captions(engine, SAMPLE_CSV, actor="lead")
    assign_double(engine, 0.3, seed=5, actor="lead")
    alice = AnnotationSession(engine, "alice")
    for index in range(8):
        rate_image(alice, index)
    alice.set_values(alice.open_image(9)[0], {"precision": 4, "recall": 3}, image_index=9,
                     focus=0)  # one caption of it complete
    rate_image(AnnotationSession(engine, "bob"), 0)
    carol = AnnotationSession(engine, "carol", stage=Stage.SECOND)
    rate_image(carol, 0, precision=2)
    carol.open_image(1)
    dave = AnnotationSession(engine, "dave")
    dave.open_image(0)
    dave.flag_broken(0, "too dark")


def test_open_images_are_those_whose_state_lets_the_annotator_rate(engine):
    """`open_images` asks `refusals` once per distinct state of holders: the same images as
    asking it of every image's own state (`read_states`), at both stages."""
    part_way(engine)
    with engine.connect() as connection:
        states, flagged = read_states(connection), flagged_image_ids(connection)
        for name in NAMES:
            for stage in (Stage.FIRST, Stage.SECOND):
                expected = {image_id for image_id, state in states.items()
                            if not refusals(state, [(name, stage)])
                            and not (stage == Stage.SECOND and image_id in flagged)}
                assert open_images(connection, name, stage) == expected, (name, stage)
        # the comparison is not vacuous: each stage opens some images and refuses others
        for stage in (Stage.FIRST, Stage.SECOND):
            opened = open_images(connection, "erin", stage)
            assert opened and opened != set(states), stage


def test_a_new_session_counts_what_is_complete_as_the_database_holds_it(engine):
    """Progress and each image's completion when a session starts (the worklist keeps only
    the images with something complete) are the counts read straight from the tables."""
    part_way(engine)
    session = AnnotationSession(engine, "alice")
    listed = {image.id for image in session.images}
    caption, rating = Caption.__table__, Rating.__table__
    with engine.connect() as connection:
        captions = dict(connection.execute(
            select(caption.c.image_id, func.count()).group_by(caption.c.image_id)).all())
        complete = dict(connection.execute(
            select(caption.c.image_id, func.count())
            .join(rating, and_(rating.c.caption_id == caption.c.id, complete_clause(rating)))
            .where(rating.c.annotator_id == session.annotator_id,
                   rating.c.stage == int(Stage.FIRST))
            .group_by(caption.c.image_id)).all())
    done = {image_id for image_id in listed if complete.get(image_id) == captions[image_id]}
    progress = session.progress()
    assert (progress.images_done, progress.images_total) == (len(done), len(listed))
    assert progress.captions_total == sum(captions[image_id] for image_id in listed)
    assert progress.captions_done == sum(complete.get(image_id, 0) for image_id in listed)
    assert {image.id for image in session.images if session.is_complete(image)} == done
    # not vacuous: images rated whole, and the part-rated one's caption counted too
    assert done and progress.captions_done > sum(captions[image_id] for image_id in done)


async def test_the_collector_is_held_until_the_first_screen_then_start_up_is_frozen(engine):
    import_captions(engine, SAMPLE_CSV, actor="lead")
    app = make_app(engine)
    frozen = gc.get_freeze_count()
    try:
        with collector_held():
            assert not gc.isenabled()
            async with app.run_test(size=(80, 24)) as pilot:
                await pilot.pause()
                title = str(app.screen.query_one("#title", Static).content)
                assert title.startswith("Image 1/")
                assert gc.isenabled() and gc.get_freeze_count() > frozen
        assert gc.isenabled()
    finally:
        gc.unfreeze()  # the rest of the test run collects as before


def test_a_command_that_ends_before_its_screen_lets_the_collector_run_again(tmp_path):
    db = str(tmp_path / "a.db")
    runner = CliRunner()
    runner.invoke(cli, ["--db", db, "import", str(SAMPLE_CSV)])
    frozen = gc.get_freeze_count()
    result = runner.invoke(cli, ["--db", db, "annotate", "--annotator", "  "])
    assert result.exit_code == 2 and "--annotator needs a name" in result.output
    assert gc.isenabled() and gc.get_freeze_count() == frozen  # nothing frozen: no screen


def test_a_collector_turned_off_elsewhere_stays_off():
    gc.disable()
    try:
        with collector_held():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
