"""Snapshot tests of the annotation screens at fixed sizes, half-block images forced."""

from __future__ import annotations

import pytest

from storage.annotation import AnnotationSession
from tests.app_helpers import lengthen_captions, make_app, sample_engine

SIZES = [(80, 24), (120, 40)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_first_screen(snap_compare, tmp_path, size):
    app = make_app(sample_engine(tmp_path), image_mode="halfcell")
    assert snap_compare(app, terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_after_rating_with_penalties(snap_compare, tmp_path, size):
    app = make_app(sample_engine(tmp_path), image_mode="halfcell")
    keys = ["5", "4", "up", "f", "enter", "down", "3", "2", "up", "c", "i", "n", *"check", "enter"]
    assert snap_compare(app, terminal_size=size, press=keys)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_fluency_picker(snap_compare, tmp_path, size):
    app = make_app(sample_engine(tmp_path), image_mode="halfcell")
    assert snap_compare(app, terminal_size=size, press=["f"])


def test_help_screen(snap_compare, tmp_path):
    app = make_app(sample_engine(tmp_path), image_mode="halfcell")
    assert snap_compare(app, terminal_size=(80, 24), press=["question_mark"])


def test_unicode_image_backend(snap_compare, tmp_path):
    app = make_app(sample_engine(tmp_path), image_mode="unicode")
    assert snap_compare(app, terminal_size=(80, 24))


def test_long_caption(snap_compare, tmp_path):
    """A 700-character caption at 80x24: its text scrolls in its box, its score line shows."""
    engine = sample_engine(tmp_path)
    lengthen_captions(engine, [AnnotationSession(engine, "x").open_image(0)[1].caption_ids[0]])
    app = make_app(engine, image_mode="halfcell")
    assert snap_compare(app, terminal_size=(80, 24), press=["5", "4", "3"])
