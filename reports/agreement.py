"""`thumb agreement`: the project's compared rating pairs (storage) through the agreement
statistics (metrics)."""

from __future__ import annotations

import pandas as pd
from sqlalchemy import Engine

from metrics.agreement import DIMENSIONS, agreement_table
from storage.readers import rating_pairs


def agreement_report(engine: Engine, *, bootstrap: int = 1000, ci: float = 0.90,
                     seed: int = 0) -> pd.DataFrame:
    """Agreement per annotator pair and overall, blind pairs and stage 1 vs stage 2."""
    return agreement_table(rating_pairs(engine, DIMENSIONS), bootstrap=bootstrap, ci=ci,
                           seed=seed)
