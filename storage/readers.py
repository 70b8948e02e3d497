"""Readers and writers for the analyses: each turns tables into the tidy frames that the
pure statistics in `metrics` take, or stores what a metric computed. No statistics here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlalchemy import Engine, Row, func, select
from sqlmodel import SQLModel

from storage.db import write_transaction
from storage.models import (
    Annotator,
    Caption,
    FluencyCheck,
    Image,
    ImageReference,
    MetricScore,
    Rating,
    utcnow,
)
from storage.protocol import complete_rows
from storage.queries import ratings_frame
from storage.workflow import primary_first_ratings

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
            .order_by(caption.c.id)))
    return captions, references


def stored_caption_ids(engine: Engine, signature: str,
                       scores: type[SQLModel] = MetricScore) -> set[int]:
    """Captions that already have a score under this signature (in `scores`: the project's
    `MetricScore` or a judgment set's `JudgmentMetricScore`)."""
    score = scores.__table__
    with engine.connect() as connection:
        return set(connection.execute(
            select(score.c.caption_id).where(score.c.signature == signature)
        ).scalars())


def store_metric_scores(engine: Engine, metric: str, signature: str,
                        caption_ids: Sequence[int], values: Sequence[float],
                        scores: type[SQLModel] = MetricScore,
                        reasons: Sequence[str | None] | None = None) -> None:
    """Store one chunk of scores in one transaction; where a reason is given the score is
    undefined (no value)."""
    reasons = reasons if reasons is not None else [None] * len(caption_ids)
    now = utcnow()
    with write_transaction(engine) as connection:
        connection.execute(
            scores.__table__.insert(),
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


def rating_pairs(engine: Engine, dimensions: Sequence[str]) -> pd.DataFrame:
    """One row per caption and compared pair of ratings: kind (`blind`: the two blind
    stage-1 ratings of a double-rated image; `stage1-vs-stage2`: the reviewed stage-1
    rating and its review), pair, image, and for each dimension the two values
    (`<dimension>_a`, `<dimension>_b`)."""
    import pandas as pd

    ratings = complete_rows(ratings_frame(engine))
    ratings["fluency_error"] = (ratings["fluency"] > 0).astype(float)
    caption, image = Caption.__table__, Image.__table__
    with engine.connect() as connection:
        primary = {c: r["id"] for c, r in primary_first_ratings(connection).items()}
        double = dict(connection.execute(
            select(caption.c.id, image.c.double_rating)
            .join(image, caption.c.image_id == image.c.id)).all())

    def pair_row(kind: str, caption_id: int, a: dict, b: dict) -> dict[str, object]:
        row: dict[str, object] = {"kind": kind, "caption_id": caption_id,
                                  "image": a["image_id"],
                                  "pair": f"{a['annotator']}|{b['annotator']}"}
        for dimension in dimensions:
            row[f"{dimension}_a"] = float(a[dimension])
            row[f"{dimension}_b"] = float(b[dimension])
        return row

    rows = []
    first = ratings[ratings["stage"] == 1]
    for caption_id, group in first.groupby("caption_id"):
        if double.get(caption_id) and len(group) >= 2:
            a, b = sorted(group.head(2).to_dict("records"), key=lambda r: r["annotator"])
            rows.append(pair_row("blind", caption_id, a, b))
    second = ratings[ratings["stage"] == 2].drop_duplicates("caption_id")
    by_id = ratings.set_index("rating_id")
    for record in second.to_dict("records"):
        if record["caption_id"] in primary:
            a = by_id.loc[primary[record["caption_id"]]].to_dict()
            rows.append(pair_row("stage1-vs-stage2", record["caption_id"], a, record))
    return pd.DataFrame(rows)


def contributing_annotators(engine: Engine) -> list[str]:
    """Everyone whose work is in the scores: raters at any stage and fluency checkers."""
    annotator = Annotator.__table__
    with engine.connect() as connection:
        return sorted(connection.execute(
            select(annotator.c.name).where(
                annotator.c.id.in_(select(Rating.__table__.c.annotator_id))
                | annotator.c.id.in_(select(FluencyCheck.__table__.c.checker_id)))
        ).scalars())


def fluency_checkers(engine: Engine) -> set[str]:
    """Native speakers whose fluency-round verdicts set final fluency penalties."""
    annotator, check = Annotator.__table__, FluencyCheck.__table__
    with engine.connect() as connection:
        return set(connection.execute(
            select(annotator.c.name).join(check, check.c.checker_id == annotator.c.id)
        ).scalars())
