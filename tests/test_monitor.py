"""`thumb monitor`: the campaign lead's live dashboard, driven with Pilot while ratings are
written under it; it never writes, survives a busy database, shows stored text literally;
the pure figures of metrics/stats/campaign.py checked against their definitions."""

from __future__ import annotations

import io
import itertools
import math
import os
import random
import sqlite3
import threading
from statistics import median

import krippendorff
import numpy as np
import pandas as pd
import pytest
from sqlalchemy import select, update
from sqlalchemy.exc import OperationalError
from textual.widgets import Static
from typer.testing import CliRunner

import storage.db.engine
import storage.rating.monitor
from metrics.stats.campaign import (
    Drift,
    Pace,
    Thresholds,
    agreement_so_far,
    alerts,
    captions_per_stage,
    drifts,
    pace,
    paces,
    pair_differences,
    revisit_seconds,
    seconds_per_caption,
)
from storage import open_database
from storage.db.engine import make_engine
from storage.models import Annotator, Caption, Image, Rating, Stage
from storage.rating.dashboard import dashboard, pipeline_stages
from storage.rating.monitor import MonitorBusy, blind_pairs, read_monitor
from storage.rating.project_queues import assign_double
from storage.rating.rating_sessions import AnnotationSession
from tests import test_dashboard
from tests.app_helpers import sample_engine, screen_text
from tests.conftest import SAMPLE_CSV, database_dump
from tests.test_workflow import rate_everything
from thumb_tui.app import ThumbApp
from thumb_tui.cli import app as cli
from thumb_tui.screens import monitor as monitor_module
from thumb_tui.screens.monitor import (
    BUSY,
    FigureMaker,
    MonitorScreen,
    MonitorSettings,
    agreement_view,
)

midway = test_dashboard.midway  # the fixture: a project in the middle of the protocol
FIXED_TIME = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC: the time the monitor shows
HOSTILE = "\x1b[2J\x9b31m[@click=app.quit]q[/] [bold <script>"


@pytest.fixture
def engine(tmp_path):
    return sample_engine(tmp_path)


def ticking(step: float):
    """A session clock that moves `step` seconds every time it is read."""
    counter = itertools.count(0, step)
    return lambda: float(next(counter))


def monitor_app(engine, every: float = 3600.0, **settings: object) -> ThumbApp:
    screen = MonitorScreen(engine, MonitorSettings(every=every, **settings), source="app.db",
                           clock=lambda: FIXED_TIME)
    return ThumbApp(screen=screen, keymap={})


async def reading(pilot, screen: MonitorScreen, before: int | None = None) -> None:
    """Wait until the monitor finished a reading after the `before`-th one."""
    before = screen.readings if before is None else before
    for _ in range(500):
        await pilot.pause(0.02)
        if screen.readings > before:
            await pilot.pause()
            return
    raise AssertionError("the monitor did not read the project")


async def refreshed(pilot, screen: MonitorScreen) -> str:
    """Press r, wait for a reading that began after now and return the screen's text."""
    for _ in range(500):
        if not screen.reading:
            break
        await pilot.pause(0.02)
    before = screen.readings
    await pilot.press("r")
    await reading(pilot, screen, before)
    return screen_text(pilot.app)


def row_of(text: str, name: str) -> list[str]:
    """The cells of the annotator table's row of `name`."""
    for line in text.splitlines():
        cells = line.strip("│ ").split()
        if cells and cells[0] == name:
            return cells
    raise AssertionError(f"no row of {name} in\n{text}")


def sample_rushed_share(seconds_a_text: float, rushed_below: float = 3.0) -> float:
    """The rushed share of an annotator who spends `seconds_a_text` on each caption text of
    the sample project: identical captions of an image are rated as one and share its
    time."""
    sample = pd.read_csv(SAMPLE_CSV)
    sharing = sample.groupby(["image", "caption"])["caption"].transform("size")
    return float((seconds_a_text / sharing < rushed_below).mean())


def blind_values(engine) -> dict[str, dict[int, tuple[float, float]]]:
    """annotator -> caption id -> (P, R) of their complete stage-1 ratings on the
    double-rated images: the blind pairs, read independently of the monitor."""
    rating, caption, image, annotator = (Rating.__table__, Caption.__table__,
                                         Image.__table__, Annotator.__table__)
    with engine.connect() as connection:
        rows = connection.execute(
            select(annotator.c.name, rating.c.caption_id, rating.c.precision, rating.c.recall)
            .join(annotator, rating.c.annotator_id == annotator.c.id)
            .join(caption, rating.c.caption_id == caption.c.id)
            .join(image, caption.c.image_id == image.c.id)
            .where(image.c.double_rating.is_(True), rating.c.stage == 1,
                   rating.c.precision.is_not(None), rating.c.recall.is_not(None))).all()
    values: dict[str, dict[int, tuple[float, float]]] = {}
    for name, caption_id, precision, recall in rows:
        values.setdefault(name, {})[caption_id] = (float(precision), float(recall))
    return values


@pytest.mark.slow
async def test_the_monitor_follows_ratings_written_while_it_runs(engine):
    assign_double(engine, 0.4, seed=3, actor="lead")  # 6 images get two blind ratings
    app = monitor_app(engine)
    async with app.run_test(size=(120, 60)) as pilot:
        screen = app.screen
        await reading(pilot, screen, 0)
        text = screen_text(app)
        assert "nobody has rated yet" in text and "too few: 0 of 5 images" in text
        assert "ALERTS (0)" in text and "0 alerts" in text

        # alice rates every image, 10 s per caption group: shown at the next refresh
        rate_everything(AnnotationSession(engine, "alice", seed_source=lambda: 1,
                                          clock=ticking(10)), 1)
        text = await refreshed(pilot, screen)
        assert row_of(text, "alice")[:7] == ["alice", "60", "0", "0", "10.0", "0%", "-"]
        assert "too few: 0 of 5 images" in text  # nobody rated a double image twice yet

        # bob rates half of the double images, 1 s a caption: rushed, and still too few
        bob = AnnotationSession(engine, "bob", seed_source=lambda: 2, clock=ticking(1))
        assert len(bob.images) == 6
        for index in range(3):
            for group in bob.open_image(index):
                bob.set_values(group, {"precision": 5, "recall": 5}, image_index=index,
                               focus=0)
        text = await refreshed(pilot, screen)
        assert row_of(text, "bob")[:6] == ["bob", "12", "0", "0", "1.0", "100%"]
        assert "too few: 3 of 5 images" in text
        assert "bob: rushed 100% of 12 captions (alert above 20%)" in text
        assert "alice: rushed" not in text

        # bob finishes: agreement appears, the same as alpha of the pairs read here
        rate_everything(bob, 7)
        text = await refreshed(pilot, screen)
        assert row_of(text, "bob")[1] == "24"
        blind = blind_values(engine)
        shared = sorted(set(blind["alice"]) & set(blind["bob"]))
        assert len(shared) == 24
        for dimension, position in (("P", 0), ("R", 1)):
            matrix = np.array([[blind[name][c][position] for c in shared]
                               for name in ("alice", "bob")])
            for level in ("ordinal", "interval"):
                expected = krippendorff.alpha(reliability_data=matrix.astype(float),
                                              level_of_measurement=level)
                line = next(line for line in text.splitlines()
                            if line.strip("│ ").split()[:2] == [dimension, level])
                assert f"{expected:.2f}" in line and "24 captions, 6 images" in line
        # two raters of the 24 shared captions: no drift for either, their difference
        # (alice's mean minus bob's) as a pair
        differences = [sum(blind["alice"][c][position] - blind["bob"][c][position]
                           for c in shared) / len(shared) for position in (0, 1)]
        for name in ("alice", "bob"):
            assert row_of(text, name)[6:8] == ["-", "-"]
        assert (f"alice − bob: ΔP {differences[0]:+.2f} ΔR {differences[1]:+.2f} on 24 "
                "captions") in text
        assert "two raters cannot say which one drifted" in text
        count = len(screen.figures.alerts)
        assert f"ALERTS ({count})" in text and f"{count} alert" in text


async def test_paging_back_through_rated_images_keeps_the_pace_of_the_first_pass(engine):
    """Issue 44, item 6 (the trial): alice rates each caption in about 2 s (one in five
    slower), then pages back through every image she rated, a minute on each. Seconds per
    caption and the rushed share still time each caption's first pass, as her clock
    measured it (paging back once took her from most captions rushed to almost none);
    the minutes of paging back show apart, as revisits."""
    now = [0.0]
    alice = AnnotationSession(engine, "alice", seed_source=lambda: 1, clock=lambda: now[0])
    rng = random.Random(6)
    first_passes: list[float] = []
    for index in range(len(alice.images)):
        for group in alice.open_image(index):
            spent = rng.choice([1.5, 2.0, 2.0, 2.5, 8.0])
            now[0] += spent
            alice.set_values(group, {"precision": 3, "recall": 4}, image_index=index, focus=0)
            first_passes += [spent / len(group.caption_ids)] * len(group.caption_ids)
        alice.remember_position(index, 0)
    for index in range(len(alice.images)):  # paging back through the rated images
        alice.open_image(index)
        now[0] += 60.0
        alice.remember_position(index, 0)
    alice.close()
    rushed = sum(seconds < 3.0 for seconds in first_passes) / len(first_passes)
    assert len(first_passes) == 60 and 0.5 < rushed < 1
    app = monitor_app(engine)
    async with app.run_test(size=(120, 60)) as pilot:
        await reading(pilot, app.screen, 0)
        text = screen_text(app)
    assert row_of(text, "alice")[4:6] == [f"{median(first_passes):.1f}", f"{rushed:.0%}"]
    assert f"alice: rushed {rushed:.0%} of 60 captions (alert above 20%)" in text
    assert "revisits (time on rated images, not in s/cap or rush): alice 15m 00s" in text


@pytest.mark.slow
async def test_the_timer_refreshes_without_a_key(engine):
    app = monitor_app(engine, every=0.1)
    async with app.run_test(size=(120, 60)) as pilot:
        screen = app.screen
        await reading(pilot, screen, 0)
        rate_everything(AnnotationSession(engine, "carol", seed_source=lambda: 1,
                                          clock=ticking(4)), 1)
        for _ in range(300):
            await pilot.pause(0.02)
            if screen.figures and screen.figures.annotators:
                break
        await pilot.pause()
        assert row_of(screen_text(app), "carol")[:6] == [
            "carol", "60", "0", "0", "4.0", f"{sample_rushed_share(4.0):.0%}"]
        seen = screen.readings
        await pilot.press("p")  # paused: the timer reads no more
        await pilot.pause(0.5)
        assert screen.readings <= seen + 1 and "paused" in screen_text(app)


async def test_review_and_drift_alerts_with_thresholds_the_lead_set(engine):
    """Issue 44, item 7 (the trial): stage-2 ratings count per stage; bob reviews alice's
    images a point stricter on P, and with only the two of them a low drift threshold
    blames neither (it used to name both, each the other's mirror image): it names the
    pair and says why. A high rushed threshold makes everyone rushed."""
    rate_everything(AnnotationSession(engine, "alice", seed_source=lambda: 1,
                                      clock=ticking(10)), 1)
    bob = AnnotationSession(engine, "bob", stage=Stage.SECOND, seed_source=lambda: 2,
                            clock=ticking(10))
    for index in range(len(bob.images)):
        for group in bob.open_image(index):
            values = {k: group.reference[k] for k in ("precision", "recall")}
            values["precision"] = max(1, values["precision"] - 1)  # bob is stricter on P
            bob.set_values(group, values, image_index=index, focus=0)
    app = monitor_app(engine, rushed_below=60.0,
                      thresholds=Thresholds(rushed=0.5, drift=0.1, agreement=0.4))
    async with app.run_test(size=(120, 60)) as pilot:
        screen = app.screen
        await reading(pilot, screen, 0)
        text = screen_text(app)
    assert row_of(text, "bob")[:4] == ["bob", "0", "60", "0"]
    assert [row.drift for row in screen.figures.annotators] == [
        Drift(0, None, None, 0, None, None)] * 2
    first, reviewed = stage_values(engine, "alice", 1), stage_values(engine, "bob", 2)
    assert sorted(first) == sorted(reviewed) and len(first) == 60
    p_difference = sum(first[c][0] - reviewed[c][0] for c in first) / len(first)
    assert p_difference > 0.1
    [pair] = screen.figures.pairs
    assert (pair.first, pair.second, pair.captions) == ("alice", "bob", 60)
    assert (pair.precision, pair.recall) == pytest.approx((p_difference, 0.0))
    assert "alice: rushed 100% of 60 captions (alert above 50%)" in text
    found = [(alert.subject, alert.message) for alert in screen.figures.alerts]
    assert found[2:] == [("alice vs bob", f"P differs by {p_difference:+.2f} over 60 "
                          "captions only they rated; two raters cannot say which one "
                          "drifted (alert beyond ±0.1)")]
    assert [subject for subject, _ in found[:2]] == ["alice", "bob"]  # rushed, both
    assert f"alice vs bob: P differs by {p_difference:+.2f}" in text
    assert "drift P" not in text


def stage_values(engine, name: str, stage: int) -> dict[int, tuple[float, float]]:
    """caption id -> (P, R) of `name`'s complete ratings at `stage`, read from the rows."""
    rating, annotator = Rating.__table__, Annotator.__table__
    with engine.connect() as connection:
        rows = connection.execute(
            select(rating.c.caption_id, rating.c.precision, rating.c.recall)
            .join(annotator, rating.c.annotator_id == annotator.c.id)
            .where(annotator.c.name == name, rating.c.stage == stage,
                   rating.c.precision.is_not(None), rating.c.recall.is_not(None))).all()
    return {caption_id: (float(p), float(r)) for caption_id, p, r in rows}


def test_three_raters_name_the_one_who_drifted(engine):
    """Issue 44, item 7: every image rated blind by alice and bob (alike) and reviewed by
    carol a point higher on P: against each caption's consensus, the median of its three
    raters (alice's and bob's value), carol drifts by +1 and the other two not at all, so
    only carol is named (the trial's mean of the others blamed the two who agree too)."""
    assign_double(engine, 1.0, seed=3, actor="lead")

    def value(caption_id: int) -> dict[str, int]:
        rng = random.Random(caption_id)
        return {"precision": rng.randint(1, 4), "recall": rng.randint(1, 5)}

    for name, stage in (("alice", Stage.FIRST), ("bob", Stage.FIRST), ("carol", Stage.SECOND)):
        session = AnnotationSession(engine, name, stage=stage, seed_source=lambda: 1)
        assert len(session.images) == 15
        for index in range(len(session.images)):
            for group in session.open_image(index):
                values = value(group.caption_ids[0])
                values["precision"] += stage == Stage.SECOND
                session.set_values(group, values, image_index=index, focus=0)
    ratings = {name: stage_values(engine, name, stage)
               for name, stage in (("alice", 1), ("bob", 1), ("carol", 2))}
    assert len(ratings["carol"]) == 60
    figures = FigureMaker(MonitorSettings(thresholds=Thresholds(drift=0.6)))(
        read_monitor(engine))
    drift = {row.name: row.drift for row in figures.annotators}
    for name, values in ratings.items():  # by the definition, caption by caption
        for position, figure in ((0, drift[name].precision), (1, drift[name].recall)):
            expected = sum(values[c][position] - median(
                rated[c][position] for rated in ratings.values()) for c in values) / len(values)
            assert figure == pytest.approx(expected)
    assert drift["carol"].precision == pytest.approx(1.0)
    assert drift["alice"].precision == drift["bob"].precision == pytest.approx(0.0)
    assert figures.pairs == []
    assert {alert.subject for alert in figures.alerts if "drift" in alert.message} == {"carol"}


@pytest.mark.slow
async def test_the_monitor_never_writes(engine):
    assign_double(engine, 0.4, seed=3, actor="lead")
    rate_everything(AnnotationSession(engine, "alice", seed_source=lambda: 1), 1)
    before = database_dump(engine)
    app = monitor_app(engine, every=0.3)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        await reading(pilot, screen, 0)
        for key in ("down", "pagedown", "up", "pageup", "home", "p", "p"):
            await pilot.press(key)
        await refreshed(pilot, screen)
        await pilot.press("q")
    assert database_dump(engine) == before


async def test_a_busy_database_is_retried_not_a_crash(engine, monkeypatch):
    calls = []

    def busy_once(target, previous=None):
        calls.append(target)
        if len(calls) == 1:
            raise MonitorBusy("the database is busy")
        return read_monitor(target, previous)

    monkeypatch.setattr(monitor_module, "read_monitor", busy_once)
    app = monitor_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        await reading(pilot, screen, 0)
        assert BUSY in screen_text(app) and app.is_running and screen.figures is None
        text = await refreshed(pilot, screen)
        assert BUSY not in text and "ALERTS (0)" in text


async def test_an_unexpected_error_is_shown_and_retried(engine, monkeypatch):
    calls = []

    def fails_once(target, previous=None):
        calls.append(target)
        if len(calls) == 1:
            raise KeyError("thumb-9.9 [red]x[/red]")
        return read_monitor(target, previous)

    monkeypatch.setattr(monitor_module, "read_monitor", fails_once)
    app = monitor_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        await reading(pilot, screen, 0)
        assert "reading failed (KeyError: 'thumb-9.9 [red]x[/red]'); retrying" in \
            screen_text(app)
        text = await refreshed(pilot, screen)
        assert "reading failed" not in text and "ALERTS (0)" in text


@pytest.mark.slow
async def test_help_defines_each_figure_with_the_lead_settings(engine):
    app = monitor_app(engine, rushed_below=4.0, thresholds=Thresholds(rushed=0.25))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        await reading(pilot, screen, 0)
        await pilot.press("x")
        assert "the key x does nothing here; ? lists the keys" in screen_text(app)
        await pilot.press("question_mark")
        await pilot.pause()
        assert app.screen is not screen
        markdown = app.screen.markdown
        assert "**rushed share** above 25%" in markdown and "under 4 s" in markdown
        assert "Below 5 images rated twice it says *too few*" in markdown
        assert "- `r`: refresh (id `monitor-refresh`)" in markdown
        assert "- `q`: quit (id `monitor-quit`)" in markdown
        assert "**gold accuracy** below 70% (from 3 gold answers on)" in markdown
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen


async def test_a_keymap_remaps_the_monitor_keys(engine):
    from thumb_tui.keymap import KeymapError, keymap_path, load_keymap

    path = keymap_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('[keymap]\nmonitor-refresh = "f5"\n', encoding="utf-8")
    keymap = load_keymap()
    assert keymap == {"monitor-refresh": "f5"}
    app = ThumbApp(screen=MonitorScreen(engine, MonitorSettings(every=3600.0)), keymap=keymap)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        await reading(pilot, screen, 0)
        assert " f5  refresh" in screen_text(app)
        before = screen.readings
        await pilot.press("f5")
        await reading(pilot, screen, before)
    path.write_text('[keymap]\nmonitor-refresh = "p"\n', encoding="utf-8")
    with pytest.raises(KeymapError, match="on the monitor screen the key 'p' would do both"):
        load_keymap()


async def test_a_locked_sqlite_database_says_busy_and_recovers(tmp_path, monkeypatch):
    """Another process holds SQLite's exclusive lock: the monitor says so and keeps the
    last figures; once the lock goes, the next reading shows the new state."""
    sample_engine(tmp_path).dispose()
    monkeypatch.setattr(storage.db.engine, "SQLITE_BUSY_TIMEOUT_MS", 200)  # read at each connect
    engine = make_engine(tmp_path / "app.db")
    rate_everything(AnnotationSession(engine, "alice", seed_source=lambda: 1,
                                      clock=ticking(5)), 1)
    app = monitor_app(engine)
    async with app.run_test(size=(120, 60)) as pilot:
        screen = app.screen
        await reading(pilot, screen, 0)
        assert row_of(screen_text(app), "alice")[1] == "60"
        engine.dispose()  # pooled connections keep WAL's shared memory: let it go
        holder = sqlite3.connect(tmp_path / "app.db", isolation_level=None)
        try:
            holder.execute("PRAGMA locking_mode=EXCLUSIVE")
            holder.execute("BEGIN EXCLUSIVE")
            text = await refreshed(pilot, screen)
            assert BUSY in text and row_of(text, "alice")[1] == "60"  # the last figures
            holder.execute("UPDATE annotator SET name = 'alicia' WHERE name = 'alice'")
            holder.execute("COMMIT")
        finally:
            holder.close()
        text = await refreshed(pilot, screen)
        assert BUSY not in text and row_of(text, "alicia")[1] == "60"
    engine.dispose()


@pytest.mark.slow
async def test_ratings_written_from_another_thread_while_it_refreshes(engine):
    """An annotator writes while the monitor reads every 0.1 s: no reading fails, and the
    last one shows everything."""
    alice = AnnotationSession(engine, "alice", seed_source=lambda: 1, clock=ticking(5))
    writer = threading.Thread(target=rate_everything, args=(alice, 1))
    app = monitor_app(engine, every=0.1)
    async with app.run_test(size=(120, 60)) as pilot:
        screen = app.screen
        said = []
        original = screen.say
        screen.say = lambda message: (said.append(message), original(message))[1]
        await reading(pilot, screen, 0)
        writer.start()
        while writer.is_alive():
            await pilot.pause(0.05)
        writer.join()
        text = await refreshed(pilot, screen)
        assert row_of(text, "alice")[:6] == ["alice", "60", "0", "0", "5.0",
                                             f"{sample_rushed_share(5.0):.0%}"]
        assert screen.readings > 3 and set(said) <= {""}, said


def test_the_pipeline_is_what_status_shows(midway):
    engine, _ = midway
    assert read_monitor(engine).stages == pipeline_stages(engine) == dashboard(engine).stages
    assert read_monitor(engine).broken_images == dashboard(engine).broken_images


def test_the_blind_pairs_are_read_again_only_when_their_ratings_change(engine):
    assign_double(engine, 0.4, seed=3, actor="lead")
    rate_everything(AnnotationSession(engine, "alice", seed_source=lambda: 1), 1)
    first = read_monitor(engine)
    assert first.blind_pairs.empty
    bob = AnnotationSession(engine, "bob", seed_source=lambda: 2)
    rate_everything(bob, 2)
    second = read_monitor(engine, first)
    assert len(second.blind_pairs) == 24
    pd.testing.assert_frame_equal(second.blind_pairs, blind_pairs(engine))
    group = bob.open_image(0)[0]  # bob changes one of his blind ratings
    new = 1 if group.values["precision"] != 1 else 2
    bob.set_values(group, {"precision": new}, image_index=0, focus=0)
    third = read_monitor(engine, second)
    assert third.blind_pairs is not second.blind_pairs
    pd.testing.assert_frame_equal(third.blind_pairs, blind_pairs(engine))
    assert not third.blind_pairs.equals(second.blind_pairs)
    carol = AnnotationSession(engine, "carol", stage=Stage.SECOND, seed_source=lambda: 3)
    rate_everything(carol, 3)  # reviews change no blind pair
    fourth = read_monitor(engine, third)
    assert fourth.blind_pairs is third.blind_pairs
    assert len(fourth.ratings) == len(third.ratings) + 60


def test_a_locked_read_becomes_monitor_busy(engine, monkeypatch):
    locked = sqlite3.OperationalError("database is locked")
    locked.sqlite_errorcode = 5  # SQLITE_BUSY

    def refuse(_engine):
        raise OperationalError("SELECT", None, locked)

    monkeypatch.setattr(storage.rating.monitor, "complete_ratings", refuse)
    with pytest.raises(MonitorBusy):
        read_monitor(engine)


@pytest.mark.slow
async def test_stored_names_and_reasons_are_shown_literally(engine):
    alice = AnnotationSession(engine, "alice", seed_source=lambda: 1, clock=ticking(1))
    rate_everything(alice, 1)
    alice.flag_broken(0, "broken [red]file[/red] " + HOSTILE)
    annotator, image = Annotator.__table__, Image.__table__
    with engine.begin() as connection:
        connection.execute(update(annotator).where(annotator.c.name == "alice")
                           .values(name="[red]x[/red]" + HOSTILE))
        connection.execute(update(image).values(key=image.c.key + "[b]k[/b]"))
    app = monitor_app(engine, thresholds=Thresholds(rushed=0.1))
    async with app.run_test(size=(200, 60)) as pilot:
        screen = app.screen
        await reading(pilot, screen, 0)
        shown = "\n".join(str(widget.render()) for widget in screen.query(Static))
        text = screen_text(app)
        assert "\x1b" not in shown and "\x9b" not in shown
        # whole in the alerts, and in the table where the screen has room for it
        assert "[red]x[/red]\\x1b[2J\\x9b31m[@click=app.quit]q[/] [bold <script>: rushed" \
            in text
        assert row_of(text, "[red]x[/red]\\x1b[2J\\x9b31m[@click=app.quit]q[/]")[1:4] == [
            "[bold", "<script>", "60"]
        assert "[b]k[/b]: broken [red]file[/red] \\x1b[2J" in text
        assert "(flagged by [red]x[/red]\\x1b[2J" in text
        await refreshed(pilot, screen)
        assert app.is_running  # the [@click=app.quit] did nothing


def test_the_snapshot_at_80x24(snap_compare, tmp_path, monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    import time

    time.tzset()
    engine = sample_engine(tmp_path)
    assign_double(engine, 0.4, seed=3, actor="lead")
    rate_everything(AnnotationSession(engine, "alice", seed_source=lambda: 1,
                                      clock=ticking(9)), 1)
    bob = AnnotationSession(engine, "bob", seed_source=lambda: 2, clock=ticking(2))
    rate_everything(bob, 2)

    async def wait_for_reading(pilot) -> None:
        await reading(pilot, pilot.app.screen, 0)

    try:
        assert snap_compare(monitor_app(engine), terminal_size=(80, 24),
                            run_before=wait_for_reading)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_the_gold_column_only_with_gold_and_narrower_gaps_where_it_must():
    """Without gold captions the table is as before; with them a gold column (right/answered
    and the share) that still fits 80 columns (75 inside the panel) with one space between
    columns, while a wider terminal keeps two."""
    from rich.console import Console

    from storage.rating.gold import GoldAccuracy
    from thumb_tui.screens.monitor import AnnotatorRow, AnnotatorRows

    rows = [AnnotatorRow("a-very-long-annotator", {1: 240, 2: 120, 3: 12},
                         Pace(10, 12.3, 1, 0.1), Drift(10, -0.44, 0.55, 10, -1.25, 1.5),
                         GoldAccuracy("a-very-long-annotator", 15, 12, 0.8)),
            AnnotatorRow("b", {1: 3}, Pace(0, None, 0, None),
                         Drift(0, None, None, 0, None, None))]

    def lines(gold: bool, width: int) -> list[str]:
        console = Console(width=width, record=True, file=io.StringIO())
        console.print(AnnotatorRows(rows, gold))
        return console.export_text().splitlines()

    plain = lines(False, 75)
    assert "gold" not in plain[0] and "  s1   s2  fin" in plain[0]
    assert lines(False, 200)[2].split()[0] == "a-very-long-annotator"  # room: whole
    assert plain[2].split()[0].endswith("…") and max(map(len, plain)) <= 75
    narrow = lines(True, 75)
    assert max(map(len, narrow)) <= 75 and " s1  s2 fin" in narrow[0]
    assert narrow[2].split()[6:8] == ["12/15", "80%"]
    assert "…" not in narrow[2].split(maxsplit=1)[1]  # only the name is cut
    assert narrow[3].split()[:7] == ["b", "3", "0", "0", "-", "-", "-"]
    wide = lines(True, 200)
    assert "  s1   s2  fin" in wide[0] and "10%  12/15 80%  -0.44" in wide[2]


def test_names_are_whole_where_the_screen_has_room_and_cut_only_by_what_does_not_fit():
    """Two annotators whose names share their first 14 characters look alike once cut:
    shown whole where the table fits; a name too long for the screen is cut by what does
    not fit, not to a fixed width."""
    from rich.console import Console

    from thumb_tui.screens.monitor import NAME_WIDTH, AnnotatorRow, AnnotatorRows

    def row(name: str) -> AnnotatorRow:
        return AnnotatorRow(name, {1: 12}, Pace(12, 1.0, 12, 1.0),
                            Drift(12, 4.0, 4.0, 12, 4.0, 4.0))

    def lines(names: list[str], width: int) -> list[str]:
        console = Console(width=width, record=True, file=io.StringIO())
        console.print(AnnotatorRows([row(name) for name in names]))
        return console.export_text().splitlines()

    twins = lines(["annotator_team_a_1", "annotator_team_a_2"], 75)
    assert max(map(len, twins)) <= 75
    assert [line.split()[0] for line in twins[2:4]] == ["annotator_team_a_1",
                                                        "annotator_team_a_2"]
    long_name = "annotator-" + "x" * 60
    cut = lines([long_name], 75)
    shown = cut[2].split()[0]
    assert max(map(len, cut)) <= 75 and shown.endswith("…")
    assert len(shown) > NAME_WIDTH and long_name.startswith(shown[:-1])


def test_the_reading_counts_gold(engine, tmp_path):
    from storage.rating.gold import gold_accuracy, import_gold
    from tests.test_gold import gold_file

    assert (read_monitor(engine).gold_captions, read_monitor(engine).gold) == (0, [])
    import_gold(engine, gold_file(tmp_path), actor="lead", rate=0.5)
    rate_everything(AnnotationSession(engine, "alice", seed_source=lambda: 1), 1)
    data = read_monitor(engine)
    assert data.gold_captions == 4 and data.gold == gold_accuracy(engine)
    assert [g.annotator for g in data.gold] == ["alice"] and data.gold[0].answered == 4
    assert captions_per_stage(data.ratings) == {"alice": {1: 60}}  # gold is not rated work


# ---- the command ----

runner = CliRunner()


def test_the_command_passes_the_lead_settings(tmp_path, monkeypatch):
    sample_engine(tmp_path).dispose()
    started = []
    monkeypatch.setattr("thumb_tui.cli.campaign.run_app", started.append)
    result = runner.invoke(cli, ["--db", str(tmp_path / "app.db"), "monitor", "--every", "5",
                                 "--rushed-below", "2.5", "--recent", "7", "--alert-rushed",
                                 "0.3", "--alert-drift", "0.25", "--alert-agreement", "0.6",
                                 "--alert-gold", "0.8"])
    assert result.exit_code == 0, result.output
    screen = started[0].first_screen
    assert isinstance(screen, MonitorScreen)
    assert screen.settings == MonitorSettings(every=5.0, rushed_below=2.5, recent=7,
                                              thresholds=Thresholds(0.3, 0.25, 0.6,
                                                                    gold=0.8))


@pytest.mark.parametrize("args", [["--alert-rushed", "1.5"], ["--alert-gold", "-0.1"],
                                  ["--every", "0"],
                                  ["--rushed-below", "-1"], ["--recent", "0"]])
def test_the_command_refuses_bad_settings(tmp_path, args):
    sample_engine(tmp_path).dispose()
    result = runner.invoke(cli, ["--db", str(tmp_path / "app.db"), "monitor", *args])
    assert result.exit_code == 2


def test_the_command_needs_an_existing_database(tmp_path):
    result = runner.invoke(cli, ["--db", str(tmp_path / "missing.db"), "monitor"])
    assert result.exit_code == 2 and result.output.startswith("error: ")
    assert not (tmp_path / "missing.db").exists()


# ---- the pure figures, against their definitions ----

def frame(rows: list[tuple], captions: dict[int, int] | None = None) -> pd.DataFrame:
    """Ratings as metrics/stats/campaign.py reads them, from (annotator, stage, image_id,
    caption_id, precision, recall, seconds, image_seconds) in the order they were made;
    an image has the captions `captions` gives it, else those the rows name."""
    columns = ["annotator", "stage", "image_id", "caption_id", "precision", "recall",
               "seconds", "image_seconds"]
    data = pd.DataFrame(rows, columns=columns)
    named = data.groupby("image_id")["caption_id"].nunique()
    data["image_captions"] = [(captions or {}).get(image, named[image])
                              for image in data["image_id"]]
    data["sequence"] = range(len(data))
    return data


def test_seconds_per_caption_shares_the_image_time_among_untimed_captions():
    data = frame([
        ("a", 1, 1, 1, 3, 3, 0.0, 12.0),   # image 1: 12 s over 3 captions without own time
        ("a", 1, 1, 2, 3, 3, 0.0, 12.0),
        ("a", 1, 1, 3, 3, 3, 0.0, 12.0),
        ("a", 1, 1, 4, 3, 3, 5.0, 12.0),   # its own 5 s (imported)
        ("a", 2, 2, 5, 3, 3, 0.0, 0.0),    # no time recorded: NaN
        ("b", 1, 1, 1, 3, 3, 0.0, 2.0),    # b's own time on image 1
    ])
    expected = [4.0, 4.0, 4.0, 5.0, math.nan, 2.0]
    got = seconds_per_caption(data).tolist()
    for value, want in zip(got, expected, strict=True):
        assert (math.isnan(value) and math.isnan(want)) or value == want


def test_pace_is_the_median_and_rushed_the_share_below_the_threshold():
    seconds = [1.0, 2.9, 3.0, 10.0, math.nan, 7.0]
    timed = [s for s in seconds if not math.isnan(s)]
    rushed = 0
    for value in timed:
        if value < 3.0:
            rushed += 1
    assert pace(seconds, 3.0) == Pace(5, median(timed), rushed, rushed / 5)
    assert pace([math.nan], 3.0) == Pace(0, None, 0, None)
    with pytest.raises(ValueError):
        pace([1.0], -1)


def test_paces_read_stage_one_and_two_only():
    data = frame([("a", 1, 1, 1, 3, 3, 2.0, 0), ("a", 2, 2, 2, 3, 3, 8.0, 0),
                  ("a", 3, 3, 3, 3, 3, 0.5, 0)])
    assert paces(data, 3.0) == {"a": Pace(2, 5.0, 1, 0.5)}
    assert captions_per_stage(data) == {"a": {1: 1, 2: 1, 3: 1}}


def test_one_rater_who_drifts_does_not_put_those_who_agree_past_the_threshold():
    """The trial of issue 44: alice and carol give every caption 4, bob 2. Against the
    mean of the others, alice and carol drifted +1 each and all three were alerted; against
    the median of the caption's raters only bob drifts. With a fourth rater who agrees
    with alice and carol, still only bob."""
    for agreeing in (("alice", "carol"), ("alice", "carol", "dave")):
        rows = [(name, 1 if name == "alice" else 2, caption, caption,
                 2 if name == "bob" else 4, 2 if name == "bob" else 4, 0, 0)
                for caption in range(1, 31) for name in (*agreeing, "bob")]
        result = drifts(frame(rows))
        assert result["bob"].precision == result["bob"].recall == pytest.approx(-2.0)
        assert all(result[name].precision == result[name].recall == 0 for name in agreeing)
        blamed = {name for name, figure in result.items()
                  if abs(figure.precision) > 0.5 or abs(figure.recall) > 0.5}
        assert blamed == {"bob"}


def test_drift_is_against_the_consensus_of_two_others_and_two_raters_blame_no_one():
    """Issue 44, item 7: a rater's drift is their value minus the median of the caption's
    raters' values only on captions that three or more rated (their own mean where they
    rated one twice); a caption two rated gives those two a difference, as a pair."""
    rows = [
        ("a", 1, 1, 1, 5, 4, 0, 0), ("b", 1, 1, 1, 3, 4, 0, 0), ("c", 2, 1, 1, 4, 1, 0, 0),
        ("a", 1, 2, 2, 2, 2, 0, 0), ("b", 1, 2, 2, 4, 5, 0, 0), ("d", 2, 2, 2, 1, 3, 0, 0),
        ("b", 2, 2, 2, 2, 4, 0, 0),  # b twice on caption 2: b's mean counts once
        ("a", 1, 3, 3, 1, 1, 0, 0), ("b", 2, 3, 3, 4, 2, 0, 0),  # two raters: a pair
        ("a", 1, 4, 4, 3, 5, 0, 0), ("b", 2, 4, 4, 2, 5, 0, 0),
        ("c", 1, 5, 5, 2, 2, 0, 0), ("b", 2, 5, 5, 5, 2, 0, 0),  # the pair b, c
        ("a", 1, 6, 6, 1, 1, 0, 0),  # nobody else rated caption 6
        ("c", 3, 3, 3, 5, 5, 0, 0),  # a resolution: not compared
    ]
    data = frame(rows)
    # by the definition, one caption at a time
    compared: dict[str, list[tuple[int, float, float]]] = {}
    pairs: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for caption in sorted({row[3] for row in rows}):
        here = [(i, row) for i, row in enumerate(rows) if row[3] == caption and row[1] in (1, 2)]
        mean_of: dict[str, tuple[float, float, int]] = {}
        for name in {row[0] for _, row in here}:
            own = [(i, row) for i, row in here if row[0] == name]
            mean_of[name] = (sum(row[4] for _, row in own) / len(own),
                             sum(row[5] for _, row in own) / len(own), max(i for i, _ in own))
        if len(mean_of) >= 3:
            p_median = median(value[0] for value in mean_of.values())
            r_median = median(value[1] for value in mean_of.values())
            for name, (p, r, last) in mean_of.items():
                compared.setdefault(name, []).append((last, p - p_median, r - r_median))
        elif len(mean_of) == 2:
            first, second = sorted(mean_of)
            pairs.setdefault((first, second), []).append(
                (mean_of[first][0] - mean_of[second][0], mean_of[first][1] - mean_of[second][1]))
    result = drifts(data, recent=1)
    assert set(result) == {"a", "b", "c", "d"} and set(compared) == {"a", "b", "c", "d"}
    for name, items in compared.items():
        items.sort()
        figure = result[name]
        assert figure.captions == len(items)
        assert figure.precision == pytest.approx(sum(p for _, p, _ in items) / len(items))
        assert figure.recall == pytest.approx(sum(r for _, _, r in items) / len(items))
        assert figure.recent_captions == 1
        assert (figure.recent_precision, figure.recent_recall) == pytest.approx(items[-1][1:])
    # caption 2: a 2, b (4 + 2) / 2 = 3, d 1, so the median is 2
    assert result["d"].captions == 1 and result["d"].precision == pytest.approx(1 - 2)
    found = pair_differences(data)
    assert [(pair.first, pair.second) for pair in found] == sorted(pairs) == [("a", "b"),
                                                                              ("b", "c")]
    for pair in found:
        items = pairs[(pair.first, pair.second)]
        assert pair.captions == len(items)
        assert pair.precision == pytest.approx(sum(p for p, _ in items) / len(items))
        assert pair.recall == pytest.approx(sum(r for _, r in items) / len(items))


def test_revisits_are_the_image_time_after_the_first_passes_of_complete_images():
    data = frame([
        ("a", 1, 1, 1, 3, 3, 2.0, 50.0), ("a", 1, 1, 2, 3, 3, 3.0, 50.0),  # paged back to
        ("a", 2, 2, 3, 3, 3, 4.0, 4.0),    # a review, never revisited
        ("a", 1, 3, 4, 3, 3, 1.0, 30.0),   # in progress: a second caption to come
        ("a", 1, 4, 6, 3, 3, 0.0, 20.0),   # rated before first passes were stored
        ("a", 3, 5, 7, 3, 3, 1.0, 9.0),    # a resolution: not in pace
        ("b", 1, 1, 1, 3, 3, 5.0, 0.0),    # imported with its own time, no image time
    ], captions={3: 2})
    expected = (50.0 - 2.0 - 3.0) + (4.0 - 4.0)  # images 1 and 2 only
    assert revisit_seconds(data) == {"a": expected}
    found = paces(data, 3.0)
    assert found["a"].revisit_seconds == expected and found["b"].revisit_seconds is None
    # the pace itself reads the first passes (image 4's untimed rating: its image's time)
    assert found["a"].timed == 5 and found["a"].median_seconds == median([2, 3, 4, 1, 20])


def test_agreement_waits_for_enough_images_then_is_alpha_with_a_ci():
    rng = np.random.default_rng(5)
    rows = []
    for image in range(8):
        for caption in range(3):
            p = int(rng.integers(1, 6))
            rows.append({"image": f"img{image}", "caption_id": image * 3 + caption,
                         "precision_a": p, "precision_b": min(5, p + int(rng.integers(0, 2))),
                         "recall_a": 3, "recall_b": 3 + (caption == 0)})
    pairs = pd.DataFrame(rows)
    few = agreement_so_far(pairs[pairs["image"].isin(["img0", "img1"])], min_images=5)
    assert [f.note for f in few] == ["too few: 2 of 5 images"] * 4
    assert all(f.value is None for f in few)
    figures = agreement_so_far(pairs, min_images=5, bootstrap=200)
    for figure in figures:
        matrix = np.array([pairs[f"{figure.dimension}_a"], pairs[f"{figure.dimension}_b"]],
                          dtype=float)
        assert figure.value == pytest.approx(krippendorff.alpha(
            reliability_data=matrix, level_of_measurement=figure.level))
        assert figure.ci_low <= figure.value <= figure.ci_high
        assert (figure.captions, figure.images) == (24, 8)
    empty = agreement_so_far(pairs.iloc[:0])
    assert {f.note for f in empty} == {"too few: 0 of 5 images"}
    never = agreement_so_far(pairs.iloc[:0], marked=3)  # 3 marked: it can never fill
    assert {f.note for f in never} == {"too few: 0 of 5 images (only 3 marked: thumb assign "
                                       "--double)"}
    assert {f.note for f in agreement_so_far(pairs.iloc[:0], marked=6)} == {
        "too few: 0 of 5 images"}


def test_the_agreement_panel_keeps_its_labels_and_whole_note_at_80_columns():
    """At 80x24 the panel's text is 75 columns wide: a long "too few" note wraps in its
    own column instead of squeezing the dimension and level to "ordi…"."""
    from rich.console import Console

    from metrics.stats.campaign import AgreementFigure

    note = "too few: 0 of 5 images (only 0 marked: thumb assign --double)"
    figures = [AgreementFigure(dimension, level, None, None, None, 0, 0, note)
               for dimension in ("precision", "recall") for level in ("ordinal", "interval")]
    console = Console(width=75, file=io.StringIO(), record=True)
    console.print(agreement_view(figures))
    lines = console.export_text().splitlines()
    labelled = [line.split()[:2] for line in lines if line.split()[:1] in (["P"], ["R"])]
    assert labelled == [["P", "ordinal"], ["P", "interval"], ["R", "ordinal"],
                        ["R", "interval"]]
    assert max(map(len, lines)) <= 75 and "…" not in "".join(lines)
    first = next(n for n, line in enumerate(lines) if line.split()[:1] == ["P"])
    notes = [line.split()[3:] if line.split()[:1] in (["P"], ["R"]) else line.split()
             for line in lines[first:]]  # the note column: after P/R, level and "-"
    assert " ".join(word for words in notes for word in words) == " ".join([note] * 4)


def test_alerts_cross_the_thresholds_and_need_enough_captions():
    thresholds = Thresholds(rushed=0.2, drift=0.5, agreement=0.4, min_captions=5)
    paces_ = {"fast": Pace(10, 1.0, 3, 0.3), "few": Pace(2, 1.0, 2, 1.0),
              "edge": Pace(10, 5.0, 2, 0.2)}
    drifts_ = {"high": Drift(30, 0.6, -0.1, 20, 0.2, -0.7), "few": Drift(4, 2.0, 2.0, 4, 2.0, 2.0),
               "same": Drift(6, 0.1, 0.5, 6, 0.1, 0.5)}
    from metrics.stats.campaign import AgreementFigure

    agreement = [AgreementFigure("precision", "ordinal", 0.3, 0.1, 0.5, 20, 6),
                 AgreementFigure("precision", "interval", 0.45, 0.1, 0.5, 20, 6),
                 AgreementFigure("recall", "ordinal", None, None, None, 4, 2, "too few")]
    found = [(a.subject, a.message) for a in alerts(paces_, drifts_, agreement, thresholds)]
    assert found == [
        ("fast", "rushed 30% of 10 captions (alert above 20%)"),
        ("high", "drift P +0.60 over 30 captions (alert beyond ±0.5)"),
        ("high", "drift recent R -0.70 over 20 captions (alert beyond ±0.5)"),
        ("agreement", "α of precision 0.30 ordinal (alert below 0.4)"),
    ]
    # gold: (answered, right); below 0.7 from 3 answers on (7/10 is not below 0.7)
    gold = {"low": (4, 2), "few": (2, 0), "edge": (10, 7), "good": (3, 3), "none": (0, 0)}
    found = [(a.subject, a.message) for a in alerts({}, {}, [], thresholds, gold)]
    assert found == [("low", "gold 2/4 right (50%; alert below 70%)")]
    found = alerts({}, {}, [], Thresholds(gold=0.9, min_gold=2), gold)
    assert [(a.subject, a.message) for a in found] == [
        ("edge", "gold 7/10 right (70%; alert below 90%)"),
        ("few", "gold 0/2 right (0%; alert below 90%)"),
        ("low", "gold 2/4 right (50%; alert below 90%)")]


# ---- PostgreSQL ----

POSTGRES = os.environ.get("THUMB_TEST_POSTGRES")


@pytest.fixture
def postgres_project():
    """The sample project on PostgreSQL, 6 images double rated, alice rated all (10 s a
    caption), bob the double images (1 s a caption)."""
    if not POSTGRES:
        pytest.skip("THUMB_TEST_POSTGRES is not set")
    from benchmarks.races import drop_everything
    from storage import import_captions

    drop_everything(POSTGRES)
    engine = open_database(POSTGRES)
    try:
        import_captions(engine, SAMPLE_CSV, actor="t")
        assign_double(engine, 0.4, seed=3, actor="lead")
        rate_everything(AnnotationSession(engine, "alice", seed_source=lambda: 1,
                                          clock=ticking(10)), 1)
        rate_everything(AnnotationSession(engine, "bob", seed_source=lambda: 2,
                                          clock=ticking(1)), 2)
        yield engine
    finally:
        engine.dispose()
        drop_everything(POSTGRES)


@pytest.mark.slow
@pytest.mark.postgres
def test_the_readers_on_postgresql(postgres_project):
    data = read_monitor(postgres_project)
    assert data.annotators == ["alice", "bob"]
    assert captions_per_stage(data.ratings) == {"alice": {1: 60}, "bob": {1: 24}}
    assert len(data.blind_pairs) == 24 and data.blind_pairs["image"].nunique() == 6
    assert paces(data.ratings, 3.0)["bob"].rushed_share == 1.0
    assert [(s.stage, s.done) for s in data.stages] == [
        ("stage 1", 15), ("second blind rating", 6), ("review", 0), ("resolution", 0),
        ("fluency round", 0)]
    assert all(f.value is not None for f in agreement_so_far(data.blind_pairs,
                                                             bootstrap=50))


@pytest.mark.slow
@pytest.mark.postgres
async def test_the_monitor_on_postgresql_while_a_review_arrives(postgres_project):
    engine = postgres_project
    before = database_dump(engine)
    app = monitor_app(engine)
    async with app.run_test(size=(120, 60)) as pilot:
        screen = app.screen
        await reading(pilot, screen, 0)
        text = screen_text(app)
        assert row_of(text, "alice")[:6] == ["alice", "60", "0", "0", "10.0", "0%"]
        assert "bob: rushed 100% of 24 captions" in text and "24 captions, 6 images" in text
        assert database_dump(engine) == before
        carol = AnnotationSession(engine, "carol", stage=Stage.SECOND, seed_source=lambda: 3,
                                  clock=ticking(6))
        for group in carol.open_image(0):
            carol.set_values(group, {k: group.reference[k] for k in ("precision", "recall")},
                             image_index=0, focus=0)
        text = await refreshed(pilot, screen)
        assert row_of(text, "carol")[:5] == ["carol", "0", "4", "0", "6.0"]
