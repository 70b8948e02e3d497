"""A match-verification project on the sample data: two toy scorers' matrices, their
proposals, and batches with gold items, built through the `thumb match` commands."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
from sqlalchemy import Engine
from typer.testing import CliRunner

from storage import import_captions, open_database
from storage.match import MatchSession, collection
from tests.conftest import SAMPLE_CSV
from thumb_tui.cli import app

runner = CliRunner()


def thumb(db: Path | str, *args: object):
    return runner.invoke(app, ["--db", str(db), *map(str, args)])


def toy_scores(engine: Engine, folder: Path, seed: int) -> Path:
    """A toy scorer: random similarities with each caption's own image lifted, so that
    the top ranks hold the true image and a few plausible others."""
    items = collection(engine)
    rng = np.random.default_rng(seed)
    scores = rng.random((len(items.image_keys), len(items.caption_keys))).astype(np.float32)
    own = np.searchsorted(items.image_ids, items.caption_image)
    scores[own, np.arange(len(items.caption_keys))] += 0.5
    path = folder / f"toy{seed}.npz"
    np.savez(path, scores=scores, image_ids=np.array(items.image_keys),
             caption_ids=np.array(items.caption_keys))
    return path


def match_project(folder: Path, *, redundancy: int = 1, size: int = 10,
                  db: Path | str | None = None) -> tuple[Path | str, Engine]:
    """The sample project with two toy models' proposals (top 2, lists kept to 5) packed
    into batches of `size` (gold negatives beyond every model's top 5; known positives the
    Human system's captions), in `db` (a SQLite file in `folder` unless a URL is given)."""
    db = db or folder / "match.db"
    engine = open_database(db)
    import_captions(engine, SAMPLE_CSV, actor="setup", allow_outside_images=True)
    for name, seed in (("toy-a", 1), ("toy-b", 2)):
        result = thumb(db, "match", "propose", "--model", name, "--scores",
                       toy_scores(engine, folder, seed), "--top-k", 2, "--depth", 5)
        assert result.exit_code == 0, result.output
    result = thumb(db, "match", "batches", "--size", size, "--negatives-beyond", 5,
                   "--redundancy", redundancy, "--seed", 7, "--gold-system", "Human")
    assert result.exit_code == 0, result.output
    return db, engine


def fixed_session(engine: Engine, annotator: str, step: float = 3.0) -> MatchSession:
    """A session whose clock moves `step` seconds per reading and whose shuffles are fixed."""
    ticks = itertools.count(0.0, step)
    seeds = itertools.count(100)
    return MatchSession(engine, annotator, clock=lambda: next(ticks),
                        seed_source=lambda: next(seeds))
