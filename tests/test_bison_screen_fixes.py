"""The BISON screen as a new user met it at 80x24: a long query scrolls by key (keys in
the key bar), and `x` asks which of the two images is broken, flagging only the one picked
(or both), in a dialog whose text is not cut. Each test drives the screen with Pilot and
checks the screen and the database."""

from __future__ import annotations

import pytest
from sqlalchemy import select, update
from textual.widgets import Static

from storage import import_captions, open_database
from storage.bison import BisonSession, import_bison
from storage.models import BisonAnswer, BisonItem, Image, ImageFlag
from tests.app_helpers import LONG_CAPTION, screen_text
from tests.conftest import SAMPLE_CSV
from tests.image_files import truncated_png
from tests.test_bison import SAMPLE_BISON
from thumb_tui.app import ThumbApp
from thumb_tui.screens.bison import BisonScreen
from thumb_tui.screens.confirm_flag import ChooseBrokenScreen

SIZE = (80, 24)


@pytest.fixture
def engine(tmp_path):
    engine = open_database(tmp_path / "b.db")
    import_captions(engine, SAMPLE_CSV, actor="t", allow_outside_images=True)
    import_bison(engine, SAMPLE_BISON, actor="t")
    return engine


def bison_app(engine) -> tuple[ThumbApp, BisonSession]:
    coins = iter([0.1, 0.9] * 10)
    session = BisonSession(engine, "alice", coin=lambda: next(coins))
    return ThumbApp(screen=BisonScreen(session, "none")), session


def message(app: ThumbApp) -> str:
    return str(app.screen.query_one("#bison-message", Static).content)


def flat(app: ThumbApp) -> str:
    """The screen's text with its line breaks and runs of spaces as single spaces."""
    return " ".join(screen_text(app).split())


def dialog_text(app: ThumbApp) -> str:
    """The words inside the flag dialog's frame as the terminal shows them: what was cut
    at its edge is missing here."""
    region = app.screen.query_one("#flag-dialog").region
    rows = screen_text(app).splitlines()[region.y:region.bottom]
    inside = " ".join(row[region.x + 1:region.right - 1] for row in rows)
    return " ".join(inside.replace("│", " ").replace("─", " ").split())


def flags(engine) -> dict[int, str]:
    """image id -> reason of every broken-image flag."""
    table = ImageFlag.__table__
    with engine.connect() as connection:
        return dict(connection.execute(select(table.c.image_id, table.c.reason)).all())


def answers(engine) -> dict[int, str | None]:
    table = BisonAnswer.__table__
    with engine.connect() as connection:
        return dict(connection.execute(select(table.c.item_id, table.c.answer)).all())


# -- 4: a long query -----------------------------------------------------------------------------

async def test_a_long_query_scrolls_by_key_and_the_images_keep_their_room(engine):
    with engine.begin() as connection:
        connection.execute(update(BisonItem.__table__).values(query=LONG_CAPTION))
    app, _session = bison_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        shown = flat(app)
        assert "⇧↑↓ scroll text" in shown and "left (l)" in shown and "right (r)" in shown
        assert LONG_CAPTION[:40] in shown and "The end of the long caption." not in shown
        for _ in range(6):
            await pilot.press("J")
        await pilot.pause()
        shown = flat(app)
        assert "The end of the long caption." in shown and "left (l)" in shown
        assert message(app) == "at the end of the caption"
        await pilot.press("K")
        await pilot.pause()
        assert "does nothing here" not in message(app)
        assert set(answers(engine).values()) <= {None}  # scrolling answers nothing
        item = app.screen.view.item_id
        await pilot.press("l")
        await pilot.pause()
        assert answers(engine)[item] == "left"
        assert LONG_CAPTION[:40] in flat(app)  # the next item's query starts at its top
        await pilot.press("q")


# -- 6: which image is broken ---------------------------------------------------------------------

@pytest.mark.parametrize(("key", "sides"), [("r", ("right",)), ("b", ("left", "right")),
                                            ("n", ())])
async def test_x_asks_which_image_is_broken_and_flags_only_the_one_picked(engine, key, sides):
    app, _session = bison_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        view = app.screen.view
        images = {"left": view.left, "right": view.right}
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, ChooseBrokenScreen)
        assert dialog_text(app) == (
            f"Which image is broken? left: {view.left[1]} (no fault found) right: "
            f"{view.right[1]} (no fault found) A flagged image leaves your rating queue, "
            "review and the report (for everyone) until the lead's `thumb image unflag` "
            "takes it back.")
        # y/Enter takes what the check found: here nothing, so they are not offered
        assert flat(app).endswith("l ← left r → right b both n/Esc cancel")
        await pilot.press(key)
        await pilot.pause()
        assert isinstance(app.screen, BisonScreen)
        expected = {images[side][0]: "the annotator sees no usable image" for side in sides}
        assert flags(engine) == expected
        if sides:
            names = " and ".join(images[side][1] for side in sides)
            assert message(app) == (f"flagged {names} as broken (the annotator sees no "
                                    "usable image)")
        else:
            assert message(app) == "nothing flagged"
        await pilot.press("q")


async def test_the_dialog_names_the_fault_the_check_found(engine, tmp_path):
    app, _session = bison_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        view = app.screen.view
        with engine.begin() as connection:
            connection.execute(update(Image.__table__).where(Image.__table__.c.id == view.left[0])
                               .values(path=str(truncated_png(tmp_path / "cut.png"))))
        app.screen.show()
        await pilot.press("x")
        await pilot.pause()
        shown = dialog_text(app)
        assert f"left: {view.left[1]} (the check found:" in shown
        assert f"right: {view.right[1]} (no fault found)" in shown
        assert flat(app).endswith("y/Enter flag left l ← left r → right b both n/Esc cancel")
        await pilot.press("enter")
        await pilot.pause()
        flagged = flags(engine)
        assert list(flagged) == [view.left[0]]
        assert flagged[view.left[0]] != "the annotator sees no usable image"  # the fault
        await pilot.press("q")
