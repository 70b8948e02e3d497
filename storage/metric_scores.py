"""Automatic metrics' side of the database: the captions and references a metric scores,
and the scores it stored (written by signature, read back as tidy frames). No statistics
here; the ratings' frames are `storage/rating/rating_frames.py`."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import Engine, Row, func, select
from sqlmodel import SQLModel

from storage.db.engine import write_transaction
from storage.models import (
    Caption,
    Image,
    ImageReference,
    MetricScore,
    utcnow,
)

_DELETE_CHUNK = 500  # caption ids in one DELETE (well under SQLite's bound parameters)

if TYPE_CHECKING:  # pandas loads where a frame is built: `metrics compute` needs none
    import pandas as pd


def caption_rows(engine: Engine) -> tuple[list[Row], dict[int, list[str]]]:
    """Every caption (rows of caption_id, image_id, image_key, path, system, text), and each
    image's references in their order: what a metric scores."""
    caption, image, ref = Caption.__table__, Image.__table__, ImageReference.__table__
    with engine.connect() as connection:
        references: dict[int, list[str]] = {}
        for row in connection.execute(
            select(ref.c.image_id, ref.c.text).order_by(ref.c.image_id, ref.c.position)
        ):
            references.setdefault(row.image_id, []).append(row.text)
        captions = list(connection.execute(
            select(caption.c.id.label("caption_id"), caption.c.image_id, caption.c.system,
                   caption.c.text, image.c.key.label("image_key"), image.c.path)
            .join(image, caption.c.image_id == image.c.id)
            .order_by(caption.c.import_order)))
    return captions, references


def stored_scores(engine: Engine, signature: str, scores: type[SQLModel] = MetricScore
                  ) -> dict[int, str | None]:
    """The captions that have a score under this signature (in `scores`: the project's
    `MetricScore` or a judgment set's `JudgmentMetricScore`), each with why its score is
    undefined (None: it has a value)."""
    score = scores.__table__
    with engine.connect() as connection:
        return dict(connection.execute(
            select(score.c.caption_id, score.c.undefined).where(score.c.signature == signature)
        ).all())


def store_metric_scores(engine: Engine, metric: str, signature: str,
                        caption_ids: Sequence[int], values: Sequence[float],
                        scores: type[SQLModel] = MetricScore,
                        reasons: Sequence[str | None] | None = None,
                        replacing: Collection[int] = ()) -> None:
    """Store one chunk of scores in one transaction; where a reason is given the score is
    undefined (no value). The stored scores of the captions in `replacing` (undefined ones
    whose reason no longer holds) are deleted in the same transaction."""
    reasons = reasons if reasons is not None else [None] * len(caption_ids)
    now = utcnow()
    table = scores.__table__
    with write_transaction(engine) as connection:
        ids = sorted(replacing)
        for start in range(0, len(ids), _DELETE_CHUNK):
            connection.execute(table.delete().where(
                table.c.signature == signature,
                table.c.caption_id.in_(ids[start:start + _DELETE_CHUNK])))
        connection.execute(
            table.insert(),
            [{"caption_id": caption_id, "metric": metric, "signature": signature,
              "value": None if reason else float(value), "undefined": reason,
              "computed_at": now}
             for caption_id, value, reason in zip(caption_ids, values, reasons, strict=True)],
        )


def metric_scores(engine: Engine) -> pd.DataFrame:
    """Every stored score: caption_id, metric, signature, value (NaN where undefined) and
    undefined (the reason, else None)."""
    import pandas as pd

    table = MetricScore.__table__
    with engine.connect() as connection:
        return pd.read_sql(select(table.c.caption_id, table.c.metric, table.c.signature,
                                  table.c.value, table.c.undefined), connection)


def metric_score_summary(engine: Engine) -> list[tuple[str, int, float | None, int]]:
    """(signature, captions scored, mean of the defined scores, captions where the score is
    undefined) per stored signature."""
    table = MetricScore.__table__
    with engine.connect() as connection:
        return [tuple(row) for row in connection.execute(  # type: ignore[misc]
            select(table.c.signature, func.count(table.c.value), func.avg(table.c.value),
                   func.count(table.c.undefined))
            .group_by(table.c.signature).order_by(table.c.signature))]


def signatures_computed_at(engine: Engine) -> dict[str, datetime]:
    """When each stored signature last stored a score: the report takes the newest of
    one metric's signatures that differ only in their corpus."""
    table = MetricScore.__table__
    with engine.connect() as connection:
        return dict(connection.execute(  # type: ignore[arg-type]
            select(table.c.signature, func.max(table.c.computed_at))
            .group_by(table.c.signature)).all())
