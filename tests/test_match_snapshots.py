"""Snapshot tests of the verification screen at 80x24, half-block images forced."""

from __future__ import annotations

import pytest

from tests.match_helpers import fixed_session, match_project
from thumb_tui.app import ThumbApp
from thumb_tui.screens.match import MatchScreen


def match_app(tmp_path) -> ThumbApp:
    _, engine = match_project(tmp_path, size=10)
    return ThumbApp(screen=MatchScreen(fixed_session(engine, "ann"), "halfcell"))


@pytest.mark.slow
def test_verification_screen(snap_compare, tmp_path):
    assert snap_compare(match_app(tmp_path), terminal_size=(80, 24))


@pytest.mark.slow
def test_verification_screen_after_answers(snap_compare, tmp_path):
    assert snap_compare(match_app(tmp_path), terminal_size=(80, 24), press=["2", "up"])


@pytest.mark.slow
def test_verification_help(snap_compare, tmp_path):
    assert snap_compare(match_app(tmp_path), terminal_size=(80, 24), press=["question_mark"])
