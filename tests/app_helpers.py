"""Shared set-up for the app tests: a sample project and a session with fixed seeds."""

from __future__ import annotations

import csv
import io
import itertools
from pathlib import Path

from rich.console import Console
from sqlalchemy import Engine, func, select, update

from rubrics import Rubric
from storage import import_captions, open_database
from storage.models import Caption, Stage
from storage.rating.rating_sessions import AnnotationSession
from tests.conftest import SAMPLE_CSV
from thumb_tui.app import ThumbApp

SYSTEM_MARK = "sysname-"
# 700 characters, as LLM captions run
LONG_CAPTION = ("The photograph shows three shiny red balls of slightly different sizes resting "
                "on a neatly trimmed green lawn, with a pale blue sky and a few thin white "
                "clouds above. ") * 4 + "The end of the long caption."


def first_caption_id(engine: Engine) -> int:
    """The id of the project's first caption in import order (ids are drawn at random)."""
    caption = Caption.__table__
    with engine.connect() as connection:
        return connection.execute(select(caption.c.id).order_by(caption.c.import_order)
                                  .limit(1)).scalar_one()


def sample_engine(folder: Path, *, marked_systems: bool = False, references: bool = True,
                  rubric: Rubric | None = None) -> Engine:
    """The sample project (under `rubric`, by default THUMB 1.0); with `marked_systems`,
    every system name starts with a token that appears nowhere else, so a test can prove no
    screen shows one; without `references`, its images have none."""
    source = SAMPLE_CSV
    if marked_systems or not references:
        with SAMPLE_CSV.open(encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
        for row in rows:
            if marked_systems:
                row["system"] = SYSTEM_MARK + row["system"]
            if not references:
                for column in [c for c in row if c.startswith("reference_")]:
                    del row[column]
            row["image"] = str(SAMPLE_CSV.parent / row["image"])
        source = folder / "sample.csv"
        with source.open("w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    engine = open_database(folder / "app.db")
    import_captions(engine, source, actor="setup", allow_outside_images=True, rubric=rubric)
    return engine


def fixed_seeds() -> itertools.count:
    return itertools.count(1000)


def make_app(engine: Engine, annotator: str = "alice", image_mode: str = "none") -> ThumbApp:
    seeds = fixed_seeds()
    session = AnnotationSession(engine, annotator, seed_source=lambda: next(seeds))
    return ThumbApp(session, image_mode)


def first_caption_of_image_one(engine: Engine) -> int:
    """The first caption of the first image in the imported file (shown second to
    `make_app`'s alice): by import order, since caption ids are drawn at random."""
    caption = Caption.__table__
    with engine.connect() as connection:
        return connection.execute(select(caption.c.id).where(
            caption.c.image_id == select(func.min(caption.c.image_id)).scalar_subquery())
            .order_by(caption.c.import_order).limit(1)).scalar_one()


def lengthen_captions(engine: Engine, caption_ids: list[int], text: str = LONG_CAPTION) -> None:
    """Give these captions one long text (identical captions are rated together)."""
    caption = Caption.__table__
    with engine.begin() as connection:
        connection.execute(update(caption).where(caption.c.id.in_(caption_ids))
                           .values(text=text))


def screen_text(app: ThumbApp) -> str:
    """What the terminal shows now, as plain text (one line per row)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True,
                      force_terminal=True, color_system="truecolor", legacy_windows=False)
    console.print(app.screen._compositor.render_update(
        full=True, screen_stack=app._background_screens))
    return console.export_text()


def review_lowering_first_recall(engine: Engine, reviewer: str) -> None:
    """`reviewer` reviews every image open to them at stage 2, keeping the stage-1 values
    but lowering the recall of each image's first caption by one (where it can go lower):
    a disagreement per image for the resolution stage."""
    session = AnnotationSession(engine, reviewer, stage=Stage.SECOND)
    for index in range(len(session.images)):
        for number, group in enumerate(session.open_image(index)):
            values = dict(group.reference)
            if number == 0:
                values["recall"] = max(1, values["recall"] - 1)
            session.set_values(group, values, image_index=index, focus=0)
