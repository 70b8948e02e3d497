"""Snapshot tests of every screen and dialog at fixed sizes, half-block images forced."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from rubrics import load_rubric
from storage import Annotator
from storage.bison import BisonSession, import_bison
from storage.models import Stage
from storage.rating.project_queues import disagreements, fluency_queue
from storage.rating.rating_sessions import AnnotationSession, FluencyRoundSession, ResolutionSession
from tests.app_helpers import (
    first_caption_of_image_one,
    fixed_seeds,
    lengthen_captions,
    make_app,
    sample_engine,
)
from tests.test_bison import SAMPLE_BISON
from tests.test_keymap import write_keymap
from tests.test_workflow import add_context, rate_everything, review_with_changes
from thumb_tui.app import ThumbApp
from thumb_tui.screens.annotate import ReviewScreen
from thumb_tui.screens.bison import BisonScreen
from thumb_tui.screens.fluency_round import FluencyRoundScreen
from thumb_tui.screens.resolve import ResolveScreen

SIZES = [(80, 24), (120, 40)]


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_first_screen(snap_compare, tmp_path, size):
    app = make_app(sample_engine(tmp_path), image_mode="halfcell")
    assert snap_compare(app, terminal_size=size)


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_after_rating_with_penalties(snap_compare, tmp_path, size):
    app = make_app(sample_engine(tmp_path), image_mode="halfcell")
    keys = ["5", "4", "up", "f", "enter", "down", "3", "2", "up", "c", "i", "n", *"check", "enter"]
    assert snap_compare(app, terminal_size=size, press=keys)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.slow
def test_fluency_picker(snap_compare, tmp_path, size):
    app = make_app(sample_engine(tmp_path), image_mode="halfcell")
    assert snap_compare(app, terminal_size=size, press=["f"])


@pytest.mark.slow
def test_help_screen(snap_compare, tmp_path):
    app = make_app(sample_engine(tmp_path), image_mode="halfcell")
    assert snap_compare(app, terminal_size=(80, 24), press=["question_mark"])


def test_note_dialog(snap_compare, tmp_path):
    app = make_app(sample_engine(tmp_path), image_mode="halfcell")
    assert snap_compare(app, terminal_size=(80, 24), press=["n", *"odd"])


def test_unicode_image_backend(snap_compare, tmp_path):
    app = make_app(sample_engine(tmp_path), image_mode="unicode")
    assert snap_compare(app, terminal_size=(80, 24))


@pytest.mark.slow
def test_long_caption(snap_compare, tmp_path):
    """A 700-character caption at 80x24: its text scrolls in its box, its score line shows."""
    engine = sample_engine(tmp_path)
    lengthen_captions(engine, [first_caption_of_image_one(engine)])
    app = make_app(engine, image_mode="halfcell")
    assert snap_compare(app, terminal_size=(80, 24), press=["5", "4", "3"])


def test_terminal_too_small(snap_compare, tmp_path):
    app = make_app(sample_engine(tmp_path), image_mode="halfcell")
    assert snap_compare(app, terminal_size=(70, 20))


def test_review_with_notes(snap_compare, tmp_path):
    engine = sample_engine(tmp_path)
    alice = AnnotationSession(engine, "alice", seed_source=lambda: 1)
    rate_everything(alice, 1)
    for group in alice.open_image(0):
        alice.set_values(group, {"note": "blurry", "fluency": 0.2,
                                 "fluency_type": "punctuation"}, image_index=0, focus=0)
    seeds = fixed_seeds()
    bob = AnnotationSession(engine, "bob", stage=Stage.SECOND, seed_source=lambda: next(seeds))
    app = ThumbApp(screen=ReviewScreen(bob, "halfcell"))
    assert snap_compare(app, terminal_size=(80, 24))


def resolve_app(tmp_path) -> ThumbApp:
    engine = sample_engine(tmp_path)
    review_with_changes(engine)
    add_context(engine, disagreements(engine)[0].caption_id)
    session = ResolutionSession(engine, "carol")
    return ThumbApp(screen=ResolveScreen(session, disagreements(engine), "halfcell",
                                         resolved_before=1))


def test_resolve_with_notes(snap_compare, tmp_path):
    assert snap_compare(resolve_app(tmp_path), terminal_size=(80, 24))


@pytest.mark.slow
def test_resolve_reasons_dialog(snap_compare, tmp_path):
    assert snap_compare(resolve_app(tmp_path), terminal_size=(80, 24), press=["a", "r"])


@pytest.mark.slow
def test_fluency_round(snap_compare, tmp_path):
    engine = sample_engine(tmp_path)
    with engine.begin() as connection:
        connection.execute(Annotator.__table__.insert().values(
            name="dave", native_english=True, created_at=datetime.datetime(2026, 1, 1)))
    review_with_changes(engine)
    app = ThumbApp(screen=FluencyRoundScreen(FluencyRoundSession(engine, "dave"),
                                             fluency_queue(engine)))
    assert snap_compare(app, terminal_size=(80, 24), press=["x"])


def bison_app(tmp_path) -> ThumbApp:
    engine = sample_engine(tmp_path)
    import_bison(engine, SAMPLE_BISON, actor="t")
    coins = iter([0.1, 0.9] * 10)
    return ThumbApp(screen=BisonScreen(BisonSession(engine, "alice", coin=lambda: next(coins)),
                                       "halfcell"))


def test_bison(snap_compare, tmp_path):
    assert snap_compare(bison_app(tmp_path), terminal_size=(80, 24), press=["l"])


def test_bison_help(snap_compare, tmp_path):
    assert snap_compare(bison_app(tmp_path), terminal_size=(80, 24), press=["question_mark"])


def test_user_keymap(snap_compare, tmp_path):
    """The key bar shows the user's keys from the keymap file."""
    write_keymap('[keymap]\nfluency = "v"\nnext-caption = "down,ctrl+n"\nhelp = "f1"\n')
    app = make_app(sample_engine(tmp_path), image_mode="halfcell")
    assert snap_compare(app, terminal_size=(80, 24))


# -- other rubrics: the score keys, labels and entries come from the rubric ------------------

RUBRICS = Path(__file__).parent / "rubrics"


def rubric_app(tmp_path, name: str) -> ThumbApp:
    engine = sample_engine(tmp_path, rubric=load_rubric(RUBRICS / f"{name}.toml"))
    return make_app(engine, image_mode="halfcell")


def test_one_to_seven_rubric(snap_compare, tmp_path):
    """TS-7: digit keys 1-7, its labels in the key bar, scores and penalties."""
    assert snap_compare(rubric_app(tmp_path, "ts7-1"), terminal_size=(80, 24),
                        press=["6", "3"])


@pytest.mark.slow
def test_zero_to_ten_rubric(snap_compare, tmp_path):
    """ZT-10: eleven levels, so `s` types a score."""
    assert snap_compare(rubric_app(tmp_path, "zt10-1"), terminal_size=(80, 24))


def test_zero_to_ten_typed_entry(snap_compare, tmp_path):
    assert snap_compare(rubric_app(tmp_path, "zt10-1"), terminal_size=(80, 24),
                        press=["s", "1", "1", "enter"])


@pytest.mark.slow
def test_ranged_penalty_entry(snap_compare, tmp_path):
    """TS-7's Bias is a range (0.5-1.5): its amount is typed, checked by the rubric."""
    assert snap_compare(rubric_app(tmp_path, "ts7-1"), terminal_size=(80, 24),
                        press=["6", "3", "i", "1", ".", "2"])
