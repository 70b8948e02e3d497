"""How the reports write numbers, for every renderer and the summary's sentences: one rule
for an interval, so that a number reads the same in a table and in the sentence that
cites it, and one for a table written as JSON."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


def is_missing(value: object) -> bool:
    """A value a table has not got: None, or NaN (pandas' missing number)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def ci_bounds(low: float, high: float, digits: int = 2) -> str:
    """`[low, high]` rounded outwards (down, up) to `digits`: a value printed with more
    digits than its interval must not seem to fall outside it (0.698 [0.70, 1.00])."""
    scale = 10**digits
    # a bound within 1e-9 of a printed step is that step (0.29 * 100 is 28.999...)
    return (f"[{math.floor(low * scale + 1e-9) / scale:.{digits}f}, "
            f"{math.ceil(high * scale - 1e-9) / scale:.{digits}f}]")


def mean_with_ci(mean: float, low: float, high: float, digits: int = 2) -> str:
    """A system's mean and its CI, all to `digits` as the systems table prints them (a
    mean's BCa interval holds it, and rounding both alike keeps it inside); "-" for none."""
    if math.isnan(mean):
        return "-"
    interval = "" if math.isnan(low) else f" [{low:.{digits}f}, {high:.{digits}f}]"
    return f"{mean:.{digits}f}{interval}"


def json_records(frame: pd.DataFrame) -> list[dict[str, object]]:
    """A table as JSON records, each number as computed (Python's shortest exact form:
    pandas' `to_json` writes fixed decimals, at most 15, which made a Williams test's
    p = 2.9e-11 a 0.0); a missing or infinite number is null, a time ISO 8601."""
    return [{str(key): _json_value(value) for key, value in row.items()}
            for row in frame.to_dict(orient="records")]


def _json_value(value: object) -> object:
    import numpy as np
    import pandas as pd

    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return None if value is pd.NA or value is pd.NaT else value
