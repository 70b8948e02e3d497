"""Confidence levels and bootstrap intervals, shared by every bootstrap in metrics/ (kept
apart from the correlation statistics, and built on NumPy and the standard library alone,
so that using them imports nothing heavy: no pandas, no scipy).

Every printed bootstrap CI is a BCa interval (bias-corrected and accelerated; Efron 1987,
Efron & Tibshirani 1993, section 14.3), computed from the replicates already drawn:
- bias correction z0 = Φ⁻¹(share of replicates below the estimate), ties counting half as
  scipy.stats.bootstrap counts them (a replicate within 1e-12 of the estimate is a tie:
  the same value computed along another path);
- acceleration a = Σ(θ̄ - θ_i)³ / (6 (Σ(θ̄ - θ_i)²)^{3/2}) from a jackknife over the
  resampled units (images, queries, items, pairs: θ_i is the statistic with unit i left
  out; strata resampled apart, such as folds, each count as scipy counts several samples;
  past `JACKKNIFE_GROUPS` units, a grouped jackknife);
- limits: the replicates' percentiles at Φ(z0 + (z0 + z_alpha) / (1 - a (z0 + z_alpha))).
A percentile interval can exclude its own estimate when the bootstrap distribution is
biased or skewed (few units, bounded statistics such as kappa or alpha near 1); BCa
corrects for both. Where even BCa leaves the estimate outside (every replicate on one side
of it, or a bias larger than the interval) the nearer limit is moved to the estimate and
the interval says so in its warning; an interval over fewer than `FEW_UNITS` resampled
units carries a warning as well."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np

CI_METHOD = "bca"  # the name reports and signatures give the intervals (`ci_method`)
FEW_UNITS = 10  # fewer resampled units than this: the interval carries a warning
JACKKNIFE_GROUPS = 100  # at most this many jackknife values (see `jackknife_groups`)
TIES = 1e-12  # relative: a replicate this close to the estimate counts as a tie
_COUNTED_AT_ONCE = 1 << 16  # bootstrap counters filled by one bincount (512 KiB)
SINGULAR = {"images": "image", "queries": "query", "items": "item", "pairs": "pair"}
WIDENED = ("the estimate lay outside its BCa limits (at the edge of its bootstrap "
           "distribution): the interval was widened to include it")


class Interval(NamedTuple):
    """A bootstrap CI; `warning` says why it deserves less trust (None: no reason)."""

    low: float
    high: float
    warning: str | None = None


def check_ci(ci: float) -> None:
    """Refuse a confidence level outside (0, 1) before any work is done."""
    if not 0 < ci < 1:
        raise ValueError(f"the confidence level must be between 0 and 1 (0.90 for 90%), "
                         f"not {ci:g}")


def _ndtr(z: float) -> float:
    """Φ(z), the standard normal distribution function."""
    return 0.5 * math.erfc(-z / math.sqrt(2))


def _ndtri(p: float) -> float:
    """Φ⁻¹(p) (Wichura's AS 241 in the standard library); ±inf at 1 and 0."""
    if p <= 0:
        return -math.inf
    if p >= 1:
        return math.inf
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)


def acceleration(jackknife: np.ndarray | Sequence[np.ndarray]) -> float:
    """The BCa acceleration from jackknife values θ_i (the statistic with unit i left
    out): a = Σ(θ̄ - θ_i)³ / (6 (Σ(θ̄ - θ_i)²)^{3/2}). Several arrays are strata resampled
    apart (folds, directions): each contributes U = (n - 1)(θ̄ - θ_i) scaled by 1/n³ and
    1/n² (scipy.stats.bootstrap's multi-sample form; the same as above for one array).
    Undefined (non-finite) θ_i are left out; 0 when the statistic does not move."""
    strata = [jackknife] if isinstance(jackknife, np.ndarray) else list(jackknife)
    numerator = denominator = 0.0
    for values in strata:
        values = np.asarray(values, dtype=float)
        values = values[np.isfinite(values)]
        n = len(values)
        if n < 2:
            continue
        spread = (n - 1) * (values.mean() - values)
        squares = spread * spread  # products, not `**3`: numpy's pow is 80x slower
        numerator += float((squares * spread).sum()) / n**3
        denominator += float(squares.sum()) / n**2
    if denominator <= 0 or not math.isfinite(numerator):
        return 0.0
    return numerator / (6 * denominator**1.5)


def bca_levels(replicates: np.ndarray, estimate: float, accel: float, ci: float
               ) -> tuple[float, float] | None:
    """The BCa percentile levels (fractions) of the finite `replicates`, or None where
    they are undefined: every replicate on one side of the estimate (z0 = ±∞)."""
    noise = TIES * max(1.0, abs(estimate))  # replicates this close are ties (float noise)
    share = (np.count_nonzero(replicates < estimate - noise)
             + np.count_nonzero(replicates <= estimate + noise)) / (2 * len(replicates))
    if not 0 < share < 1:
        return None
    z0 = _ndtri(share)
    levels = []
    for z_alpha in (_ndtri((1 - ci) / 2), _ndtri((1 + ci) / 2)):
        shifted = z0 + z_alpha
        scale = 1 - accel * shifted
        # beyond a(z0 + z_alpha) = 1 the formula's limit is the end of the distribution
        z = z0 + shifted / scale if scale > 0 else math.copysign(math.inf, shifted)
        levels.append(_ndtr(z))
    return levels[0], levels[1]


def bca_ci(replicates: np.ndarray, estimate: float | None,
           jackknife: np.ndarray | Sequence[np.ndarray], ci: float, *,
           unit: str = "images") -> Interval:
    """The BCa interval of `estimate` from its bootstrap `replicates` (non-finite ones,
    resamples where the statistic is undefined, are left out) and its `jackknife` values,
    one per resampled unit (a sequence of arrays for strata resampled apart; none: a
    single unit, or no jackknife, the acceleration 0 then). Always
    contains the estimate: where the BCa limits (or, with every replicate on one side,
    the percentile limits) leave it out, the nearer limit moves to it and `warning` says
    so; fewer than `FEW_UNITS` units (`unit` names them) add a warning too."""
    strata = [jackknife] if isinstance(jackknife, np.ndarray) else list(jackknife)
    units = max(1, sum(len(values) for values in strata))  # no jackknife: one unit
    values = np.asarray(replicates, dtype=float)
    values = values[np.isfinite(values)]
    if estimate is None or not math.isfinite(estimate) or not len(values):
        return Interval(float("nan"), float("nan"))
    levels = bca_levels(values, estimate, acceleration(strata), ci)
    if levels is None:  # BCa undefined: the percentile limits, widened below
        levels = ((1 - ci) / 2, (1 + ci) / 2)
    low, high = (float(v) for v in np.percentile(values, [100 * levels[0], 100 * levels[1]]))
    warnings = [few] if (few := few_units(units, unit)) else []
    if not low <= estimate <= high:
        low, high = min(low, estimate), max(high, estimate)
        warnings.append(WIDENED)
    return Interval(low, high, "; ".join(warnings) or None)


def resample_counts(units: int, replicates: int, rng: np.random.Generator, *, chunk: int
                    ) -> Iterator[np.ndarray]:
    """The bootstrap's resamples of `units` units, at most `chunk` replicates at a time:
    (replicates of the chunk x units) float arrays, how often each unit is drawn. Each
    replicate is `units` index draws with replacement (`rng.integers`), counted: a
    multinomial(units, 1/units) draw, so a statistic that is a weighted sum per replicate
    is one product with these rows. The draws are the same whatever `chunk` is, and the
    same as one `rng.integers` call per replicate: numpy's generator hands out the 32-bit
    halves of its 64-bit outputs in turn across calls as within one (a test pins it), so
    a call draws a group of replicates at once, `_COUNTED_AT_ONCE` counters of them (in
    the processor's cache), counted by one `bincount` of the draws shifted by each
    replicate's offset."""
    per_call = max(1, _COUNTED_AT_ONCE // max(units, 1))
    offsets = np.arange(0, per_call * units, units)[:, None]  # replicate r counts r*units on
    for start in range(0, replicates, chunk):
        counts = np.empty((min(chunk, replicates - start), units))
        flat = counts.reshape(-1)
        for first in range(0, len(counts), per_call):
            rows = min(per_call, len(counts) - first)
            draws = rng.integers(0, units, size=(rows, units))
            draws += offsets[:rows]
            flat[first * units : (first + rows) * units] = np.bincount(
                draws.reshape(-1), minlength=rows * units)
        yield counts


def jackknife_groups(units: int) -> np.ndarray:
    """Each unit's jackknife group: the unit itself, up to `JACKKNIFE_GROUPS` units; beyond,
    one of that many interleaved groups (a grouped jackknife: its acceleration estimates
    the same quantity, since third and second cumulants add up over a group's units, and
    its cost stays that of `JACKKNIFE_GROUPS` more resamples)."""
    return np.arange(units) % JACKKNIFE_GROUPS


def few_units(units: int, unit: str = "images") -> str | None:
    """The warning of an interval over fewer than `FEW_UNITS` resampled units, or None."""
    if units >= FEW_UNITS:
        return None
    named = SINGULAR.get(unit, unit) if units == 1 else unit
    return (f"only {units} {named} resampled (fewer than {FEW_UNITS}): the interval is "
            "unreliable")


def leave_one_out(units: int) -> np.ndarray:
    """(groups x units) weights of the jackknife: row g draws every unit once but those of
    group g (`jackknife_groups`; one unit per group up to `JACKKNIFE_GROUPS`). No rows for
    a single unit: leaving it out leaves nothing."""
    groups = jackknife_groups(units)
    count = min(units, JACKKNIFE_GROUPS) if units > 1 else 0
    return (groups[None, :] != np.arange(count)[:, None]).astype(float)
