"""`thumb agreement`: the project's compared rating pairs (storage) through the agreement
statistics (metrics)."""

from __future__ import annotations

import pandas as pd
from sqlalchemy import Engine

from metrics.stats.agreement import agreement_table
from rubrics import Rubric
from storage.rating.rating_frames import rating_pairs
from storage.rubric_registry import project_rubric


def compared_dimensions(rubric: Rubric) -> list[str]:
    """What agreement compares: the rubric's scores, "fluency penalty > 0" when it has
    fluency, and Total."""
    fluency = ["fluency_error"] if rubric.has_penalty("fluency") else []
    return [*rubric.score_keys, *fluency, "total"]


def agreement_report(engine: Engine, *, bootstrap: int = 1000, ci: float = 0.90,
                     seed: int = 0) -> pd.DataFrame:
    """Agreement per annotator pair and overall, blind pairs and stage 1 vs stage 2, on
    the project rubric's dimensions and scales."""
    rubric = project_rubric(engine)
    scales = {d.key: [float(level) for level in d.scale] for d in rubric.dimensions}
    return agreement_table(rating_pairs(engine, compared_dimensions(rubric)),
                           bootstrap=bootstrap, ci=ci, seed=seed, scales=scales)
