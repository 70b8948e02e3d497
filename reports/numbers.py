"""How the report prints an interval, for every renderer and the summary's sentences: one
rule, so that a number reads the same in a table and in the sentence that cites it."""

from __future__ import annotations

import math


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
