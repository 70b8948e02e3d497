"""The screens never crash on an image (a placeholder says why, even for a file broken
after import), `x` flags a broken image and moves on, and stored text reaches the screen
as literal text: control bytes shown as escapes, markup never interpreted."""

from __future__ import annotations

import shutil

import pytest
from sqlalchemy import select
from textual.widgets import Static

from storage import Caption, Image, project_status
from storage.bison import BisonSession, import_bison
from storage.models import ImageFlag, Rating
from storage.rating.rating_sessions import AnnotationSession
from tests.app_helpers import make_app, sample_engine
from tests.conftest import SAMPLE_CSV
from tests.image_files import broken_files
from thumb_tui.app import ThumbApp
from thumb_tui.screens.bison import BisonScreen

HOSTILE = "\x1b[2J\x1b]52;c;aGVsbG8=\x07\x9b31m[@click=app.quit]q[/] [bold <script>"


@pytest.fixture
def engine(tmp_path):
    return sample_engine(tmp_path)


def image_paths(engine) -> list[str]:
    table = Image.__table__
    with engine.connect() as connection:
        return list(connection.execute(select(table.c.path).order_by(table.c.id)).scalars())


def break_image(engine, tmp_path, kind: str, index: int = 0) -> str:
    """Point image `index` at a copy of the sample file that is then broken in `kind` way
    (the file changed after the import)."""
    broken = broken_files(tmp_path / "broken")[kind]
    target = tmp_path / f"copy_{kind}{broken.suffix}"
    shutil.copy(broken, target)
    table = Image.__table__
    with engine.begin() as connection:
        image_id = connection.execute(select(table.c.id).order_by(table.c.id)
                                      .offset(index).limit(1)).scalar()
        connection.execute(table.update().where(table.c.id == image_id)
                           .values(path=str(target)))
    return target.name


def flags(engine) -> list:
    with engine.connect() as connection:
        return connection.execute(select(ImageFlag.__table__)).all()


def message(app) -> str:
    return str(app.screen.query_one("#message", Static).content)


@pytest.mark.parametrize("kind", ["empty", "noise", "text", "truncated", "bomb"])
async def test_annotate_shows_a_broken_image_as_a_reason_and_keeps_working(
        engine, tmp_path, kind):
    name = break_image(engine, tmp_path, kind)
    app = make_app(engine, image_mode="halfcell")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        text = str(app.screen.query_one(".image-missing").render())
        assert "image cannot be shown" in text and name in text
        await pilot.press("4", "3")  # the rest of the screen works: P and R are saved
        await pilot.pause()
    with engine.connect() as connection:
        saved = connection.execute(select(Rating.__table__.c.precision,
                                          Rating.__table__.c.recall)).all()
    assert (4, 3) in saved
    assert app.return_code in (0, None)


@pytest.mark.slow
async def test_x_flags_the_image_moves_on_and_status_lists_it(engine, tmp_path):
    break_image(engine, tmp_path, "noise")
    app = make_app(engine, image_mode="halfcell")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.screen.image_index == 0
        await pilot.press("x", "y")  # y confirms the flag (issue 26)
        await pilot.pause()
        assert app.screen.image_index == 1
        assert "as broken (not an image" in message(app)
    assert [(row.reason) for row in flags(engine)] == [
        "not an image (Pillow cannot identify the format)"]
    status = project_status(engine)
    assert [(b.annotator, b.reason) for b in status["broken_images"]] == [
        ("alice", "not an image (Pillow cannot identify the format)")]
    # a restart does not land on the flagged image, and "next unrated" skips it
    session = AnnotationSession(engine, "alice")
    assert session.resume_position()[0] != 0 or session.images[0].id not in session.flagged
    assert session.next_unrated(len(session.images) - 1) != 0


@pytest.mark.slow
async def test_x_on_a_sound_image_records_the_annotators_word(engine):
    app = make_app(engine, image_mode="none")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("x", "y")  # y confirms the flag (issue 26)
        await pilot.pause()
    assert [row.reason for row in flags(engine)] == ["the annotator sees no usable image"]


@pytest.mark.slow
async def test_bison_screen_shows_a_broken_image_and_flags_it(engine, tmp_path):
    import_bison(engine, SAMPLE_CSV.parent / "bison.jsonl", actor="t")
    session = BisonSession(engine, "alice", coin=lambda: 0.0)
    view = session.view(session.first_unanswered())
    table = Image.__table__
    broken = broken_files(tmp_path / "broken")["truncated"]
    with engine.begin() as connection:
        connection.execute(table.update().where(table.c.id == view.left[0])
                           .values(path=str(broken)))
    app = ThumbApp(screen=BisonScreen(session, "halfcell"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        left = str(app.screen.query_one("#bison-left-image .image-missing").render())
        assert "cannot be decoded" in left
        await pilot.press("x", "n")  # the dialog asks first: n leaves the images unflagged
        await pilot.pause()
        assert app.screen.index == 0 and flags(engine) == []
        await pilot.press("x", "y")
        await pilot.pause()
        assert app.screen.index == 1
    assert [(row.image_id, row.reason[:17]) for row in flags(engine)] == [
        (view.left[0], "cannot be decoded")]


@pytest.mark.slow
async def test_stored_hostile_text_is_shown_literally(engine):
    """The second line of defence: text that got into the database anyway (import refuses
    it) reaches the screen with its control bytes escaped and its markup inert."""
    caption, image = Caption.__table__, Image.__table__
    with engine.begin() as connection:
        first_image = connection.execute(select(image.c.id).order_by(image.c.id)).scalar()
        connection.execute(caption.update().where(caption.c.image_id == first_image)
                           .values(text=caption.c.text + HOSTILE))
        connection.execute(image.update().where(image.c.id == first_image)
                           .values(path="/nowhere/" + HOSTILE + ".png"))
    app = make_app(engine, annotator="eve" + HOSTILE)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("n", *"note", "enter")
        await pilot.pause()
        shown = [str(widget.render()) for widget in app.screen.query(Static)]
        everything = "\n".join(shown)
        assert "\x1b" not in everything and "\x9b" not in everything \
            and "\x07" not in everything
        assert "\\x1b[2J" in everything and "[@click=app.quit]q[/]" in everything
        assert "[bold <script>" in everything
        assert app.is_running  # the [@click=app.quit] did nothing
