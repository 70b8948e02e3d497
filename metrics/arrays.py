"""NumPy helpers that more than one metrics subpackage uses (CIDEr-D's sparse idf lookup,
the retrieval rankings and metrics)."""

from __future__ import annotations

import numpy as np


def sorted_positions(values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Where each of `wanted` (any shape) is in the ascending array `values`, by binary
    search; -1 where it is absent."""
    if not len(values):
        return np.full(np.shape(wanted), -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(values, wanted), len(values) - 1)
    return np.where(values[at] == wanted, at, -1)
