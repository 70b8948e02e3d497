"""Shared set-up for the app tests: a sample project and a session with fixed seeds."""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

from sqlalchemy import Engine

from storage import import_captions, open_database
from storage.annotation import AnnotationSession
from tests.conftest import SAMPLE_CSV
from thumb_tui.app import ThumbApp

SYSTEM_MARK = "sysname-"


def sample_engine(folder: Path, *, marked_systems: bool = False) -> Engine:
    """The sample project; with `marked_systems`, every system name starts with a token that
    appears nowhere else, so a test can prove no screen shows one."""
    source = SAMPLE_CSV
    if marked_systems:
        with SAMPLE_CSV.open(encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
        for row in rows:
            row["system"] = SYSTEM_MARK + row["system"]
            row["image"] = str(SAMPLE_CSV.parent / row["image"])
        source = folder / "marked.csv"
        with source.open("w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    engine = open_database(folder / "app.db")
    import_captions(engine, source, actor="setup")
    return engine


def fixed_seeds() -> itertools.count:
    return itertools.count(1000)


def make_app(engine: Engine, annotator: str = "alice", image_mode: str = "none") -> ThumbApp:
    seeds = fixed_seeds()
    session = AnnotationSession(engine, annotator, seed_source=lambda: next(seeds))
    return ThumbApp(session, image_mode)
