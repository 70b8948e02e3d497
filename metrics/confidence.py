"""Confidence levels and percentile intervals, shared by every bootstrap in metrics/ (kept
apart from the correlation statistics so that using them imports nothing heavy)."""

from __future__ import annotations

import numpy as np


def check_ci(ci: float) -> None:
    """Refuse a confidence level outside (0, 1) before any work is done."""
    if not 0 < ci < 1:
        raise ValueError(f"the confidence level must be between 0 and 1 (0.90 for 90%), "
                         f"not {ci:g}")


def percentile_ci(values: np.ndarray, ci: float) -> tuple[float, float]:
    finite = values[np.isfinite(values)]
    if not len(finite):
        return float("nan"), float("nan")
    tail = (1 - ci) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)
