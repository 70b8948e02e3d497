"""Readers of judgment sets: the set itself, its captions as the metrics take them, the
judgments and the stored metric scores, as tidy frames for the statistics in `metrics`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, Row, func, select

from storage.models import (
    JUDGMENT_SCALE_STEPS,
    JudgmentCaption,
    JudgmentImage,
    JudgmentMetricScore,
    JudgmentPair,
    JudgmentReference,
    JudgmentScore,
    JudgmentSet,
)

if TYPE_CHECKING:  # pandas loads where a frame is built
    import pandas as pd


@dataclass(frozen=True)
class JudgmentSetInfo:
    id: int
    name: str
    kind: str
    scale_min: float | None
    scale_max: float | None
    scale_step: float | None
    source: str
    references_source: str | None

    @property
    def scale(self) -> str:
        if self.scale_min is None:
            return "none"
        return f"{self.scale_min:g}-{self.scale_max:g} ({JUDGMENT_SCALE_STEPS[self.scale_step]})"

    @property
    def continuous(self) -> bool:
        """Scores are any real number in the range (interval data), not ranked levels."""
        return self.scale_step == 0

    @property
    def import_options(self) -> list[str]:
        """The options of `thumb judgments import` that give a set this kind and scale."""
        if self.kind == "pairwise":
            return ["--kind", "pairwise"]
        steps = {1.0: [], 0.5: ["--halves"], 0.0: ["--continuous"]}
        return ["--scale", f"{self.scale_min:g}-{self.scale_max:g}",
                *steps[self.scale_step]]


def judgment_sets(engine: Engine) -> list[JudgmentSetInfo]:
    """Every judgment set, in the order they were imported."""
    table = JudgmentSet.__table__
    with engine.connect() as connection:
        return [JudgmentSetInfo(row.id, row.name, row.kind, row.scale_min, row.scale_max,
                                row.scale_step, row.source, row.references_source)
                for row in connection.execute(select(table).order_by(table.c.id))]


def judgment_set(engine: Engine, name: str) -> JudgmentSetInfo:
    """The set called `name`; a ValueError naming the known sets when there is none."""
    sets = judgment_sets(engine)
    for info in sets:
        if info.name == name:
            return info
    known = ", ".join(repr(info.name) for info in sets) or "none yet (thumb judgments import)"
    raise ValueError(f"no judgment set named {name!r}; known: {known}")


def judgment_caption_rows(engine: Engine, set_id: int
                          ) -> tuple[list[Row], dict[int, list[str]]]:
    """The set's captions (caption_id, image_id, image_key, path, system, text,
    external_id) and each image's references in order: what a metric scores (like
    `readers.caption_rows`)."""
    caption, image, ref = (JudgmentCaption.__table__, JudgmentImage.__table__,
                           JudgmentReference.__table__)
    with engine.connect() as connection:
        references: dict[int, list[str]] = {}
        for row in connection.execute(
            select(ref.c.image_id, ref.c.text).join(image, ref.c.image_id == image.c.id)
            .where(image.c.set_id == set_id).order_by(ref.c.image_id, ref.c.position)
        ):
            references.setdefault(row.image_id, []).append(row.text)
        captions = list(connection.execute(
            select(caption.c.id.label("caption_id"), caption.c.image_id, caption.c.system,
                   caption.c.text, image.c.key.label("image_key"), image.c.path,
                   caption.c.external_id)
            .join(image, caption.c.image_id == image.c.id)
            .where(caption.c.set_id == set_id).order_by(caption.c.id)))
    return captions, references


def judgment_reference_ids(engine: Engine, set_id: int) -> dict[int, list[str | None]]:
    """Each image's reference ids from its references file (None where it gave none), in
    the order of `judgment_caption_rows`' references."""
    ref, image = JudgmentReference.__table__, JudgmentImage.__table__
    ids: dict[int, list[str | None]] = {}
    with engine.connect() as connection:
        for row in connection.execute(
            select(ref.c.image_id, ref.c.external_id).join(image, ref.c.image_id == image.c.id)
            .where(image.c.set_id == set_id).order_by(ref.c.image_id, ref.c.position)
        ):
            ids.setdefault(row.image_id, []).append(row.external_id)
    return ids


def judgment_image_paths(engine: Engine, set_id: int, folder: Path) -> dict[str, str]:
    """image key -> its file as an export in `folder` names it (relative to that folder,
    as the import resolves it), for the images that have a file."""
    from storage.exporter import image_path_in_export  # (loads pandas)

    image = JudgmentImage.__table__
    with engine.connect() as connection:
        return {row.key: image_path_in_export(row.path, folder) for row in connection.execute(
            select(image.c.key, image.c.path).where(image.c.set_id == set_id,
                                                    image.c.path.is_not(None)))}


def judgment_references(engine: Engine, set_id: int) -> pd.DataFrame:
    """The set's references as a references file gives them: image_id (the image's key),
    reference, reference_id (None where its file gave none), each image's in order."""
    import pandas as pd

    ref, image = JudgmentReference.__table__, JudgmentImage.__table__
    with engine.connect() as connection:
        return pd.read_sql(
            select(image.c.key.label("image_id"), ref.c.text.label("reference"),
                   ref.c.external_id.label("reference_id"))
            .join(image, ref.c.image_id == image.c.id)
            .where(image.c.set_id == set_id).order_by(image.c.id, ref.c.position),
            connection)


def judgment_scores(engine: Engine, set_id: int) -> pd.DataFrame:
    """One row per score: caption_id, image (key), caption_key, caption, system, judge,
    score, note."""
    import pandas as pd

    score, caption, image = (JudgmentScore.__table__, JudgmentCaption.__table__,
                             JudgmentImage.__table__)
    with engine.connect() as connection:
        return pd.read_sql(
            select(score.c.caption_id, image.c.key.label("image"),
                   caption.c.external_id.label("caption_key"), caption.c.text.label("caption"),
                   caption.c.system, score.c.judge, score.c.score, score.c.note)
            .join(caption, score.c.caption_id == caption.c.id)
            .join(image, caption.c.image_id == image.c.id)
            .where(score.c.set_id == set_id).order_by(score.c.id), connection)


def judgment_pairs(engine: Engine, set_id: int) -> pd.DataFrame:
    """One row per choice: image (key), caption_a_id, caption_b_id, caption_a, caption_b,
    judge, choice (a, b or tie), category."""
    import pandas as pd

    pair, image = JudgmentPair.__table__, JudgmentImage.__table__
    first, second = JudgmentCaption.__table__.alias("a"), JudgmentCaption.__table__.alias("b")
    with engine.connect() as connection:
        return pd.read_sql(
            select(image.c.key.label("image"), pair.c.caption_a_id, pair.c.caption_b_id,
                   first.c.text.label("caption_a"), second.c.text.label("caption_b"),
                   pair.c.judge, pair.c.choice, pair.c.category)
            .join(image, pair.c.image_id == image.c.id)
            .join(first, pair.c.caption_a_id == first.c.id)
            .join(second, pair.c.caption_b_id == second.c.id)
            .where(pair.c.set_id == set_id).order_by(pair.c.id), connection)


def judgment_metric_scores(engine: Engine, set_id: int) -> pd.DataFrame:
    """Every stored metric score of the set's captions: caption_id, metric, signature,
    value."""
    import pandas as pd

    score, caption = JudgmentMetricScore.__table__, JudgmentCaption.__table__
    with engine.connect() as connection:
        return pd.read_sql(
            select(score.c.caption_id, score.c.metric, score.c.signature, score.c.value)
            .join(caption, score.c.caption_id == caption.c.id)
            .where(caption.c.set_id == set_id), connection)


def judgment_counts(engine: Engine) -> dict[str, int]:
    """Judgments (scores or choices) per set name."""
    table, score, pair = JudgmentSet.__table__, JudgmentScore.__table__, JudgmentPair.__table__
    with engine.connect() as connection:
        counts = dict(connection.execute(
            select(table.c.name, func.count(score.c.id)).join(
                score, score.c.set_id == table.c.id).group_by(table.c.name)).all())
        counts.update(connection.execute(
            select(table.c.name, func.count(pair.c.id)).join(
                pair, pair.c.set_id == table.c.id).group_by(table.c.name)).all())
    return counts


def judgment_metric_summary(engine: Engine, set_id: int
                            ) -> list[tuple[str, int, float | None, int]]:
    """(signature, captions scored, mean of the defined scores, captions where the score is
    undefined) per signature stored for the set's captions."""
    score, caption = JudgmentMetricScore.__table__, JudgmentCaption.__table__
    with engine.connect() as connection:
        return [tuple(row) for row in connection.execute(  # type: ignore[misc]
            select(score.c.signature, func.count(score.c.value), func.avg(score.c.value),
                   func.count(score.c.undefined))
            .join(caption, score.c.caption_id == caption.c.id)
            .where(caption.c.set_id == set_id)
            .group_by(score.c.signature).order_by(score.c.signature))]
