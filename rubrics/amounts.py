"""The one rule of which amounts a penalty allows, as closed intervals: every check of a
penalty amount derives from it — `PenaltyCategory.allows` and `.problem` (import, the
sessions, the screens), `Rubric.allowed_ranges` (the `rubric_range` rows that the
database's triggers read) and the rubric schema's check of its worked examples.

A penalty whose errors add up (`multiple`) allows anything from 0 to its cap; any other
allows none (0) or one error type's value or range. Comparisons allow `EPSILON`: sums of
0.1 steps are not exact in binary (the triggers use the same tolerance)."""

from __future__ import annotations

from collections.abc import Iterable

EPSILON = 1e-9

Ranges = tuple[tuple[float, float], ...]


def penalty_ranges(multiple: bool, cap: float, amounts: Iterable[tuple[float, float]]
                   ) -> Ranges:
    """The amounts a rating may hold, as sorted closed intervals: 0 to the cap when errors
    add up; else 0 and each error type's (low, high) (low = high for a fixed value)."""
    if multiple:
        return ((0.0, float(cap)),)
    return ((0.0, 0.0), *sorted({(float(low), float(high)) for low, high in amounts}))


def within(ranges: Ranges, amount: float) -> bool:
    """Whether `amount` lies in one of the closed intervals (within EPSILON)."""
    return any(low - EPSILON <= amount <= high + EPSILON for low, high in ranges)


def describe(ranges: Ranges) -> str:
    """The intervals in words: "one of 0, 0.5" (values only), "between 0 and 0.6" (one
    range), "0 or between 0.5 and 1.5" (values and ranges)."""
    values = [f"{low:g}" for low, high in ranges if low == high]
    spans = [f"between {low:g} and {high:g}" for low, high in ranges if low != high]
    if not spans:
        return "one of " + ", ".join(values) if len(values) > 1 else values[0]
    words = [*values, *spans]
    return ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else words[0]
