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


def below_scores(replicates: np.ndarray, estimate: float) -> np.ndarray:
    """Each finite replicate's count towards the share below the estimate: 1 below it, 0
    above, a half for a tie. Their mean is the share whose Φ⁻¹ is the bias correction z0."""
    noise = TIES * max(1.0, abs(estimate))  # replicates this close are ties (float noise)
    return ((replicates < estimate - noise).astype(float)
            + (replicates <= estimate + noise)) / 2


def bca_level(z0: float, z_alpha: float, accel: float) -> float:
    """The BCa percentile level (a fraction) of the limit whose normal quantile is
    `z_alpha`: Φ(z0 + (z0 + z_alpha) / (1 - a (z0 + z_alpha)))."""
    shifted = z0 + z_alpha
    scale = 1 - accel * shifted
    # beyond a(z0 + z_alpha) = 1 the formula's limit is the end of the distribution
    return _ndtr(z0 + shifted / scale if scale > 0 else math.copysign(math.inf, shifted))


def bca_levels(replicates: np.ndarray, estimate: float, accel: float, ci: float
               ) -> tuple[float, float] | None:
    """The BCa percentile levels (fractions) of the finite `replicates`, or None where
    they are undefined: every replicate on one side of the estimate (z0 = ±∞)."""
    share = float(below_scores(replicates, estimate).mean())
    if not 0 < share < 1:
        return None
    z0 = _ndtri(share)
    return (bca_level(z0, _ndtri((1 - ci) / 2), accel),
            bca_level(z0, _ndtri((1 + ci) / 2), accel))


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


def zero_margins(replicates: np.ndarray, estimate: float,
                 jackknife: np.ndarray | Sequence[np.ndarray], ci: float
                 ) -> tuple[float, float]:
    """How far each limit of `bca_ci`'s interval is from crossing 0, in Monte-Carlo
    standard errors: another seed draws other replicates, and a limit this close to 0 may
    land on its other side. The low limit is above 0 when the share F of replicates at or
    below 0 is under its BCa level L = Φ(w); on the normal scale, where the tails are not
    squeezed against 0 and 1, its margin is (w - Φ⁻¹(F)) / SE, positive on the side
    "above 0" (the high limit's: (Φ⁻¹(F') - w') / SE, F' the share below 0, positive
    "below 0"; no replicate beyond 0 is an infinite margin). SE by the delta method over
    the B finite replicates, from their own moments: F is a mean of indicators x ≤ 0,
    with dΦ⁻¹(F)/dF = 1/φ(Φ⁻¹(F)); w moves with the share p below the estimate (a mean of
    `below_scores` s, z0 = Φ⁻¹(p)) by dw/dp = (1 + 1/(1 - a t)²)/φ(z0), t = z0 + z_alpha;
    so SE² = (Var(x ≤ 0)/φ(Φ⁻¹(F))² + (dw/dp)² Var(s) - 2 dw/dp Cov(x ≤ 0, s)/φ(Φ⁻¹(F)))
    / B. Replicates that all tie (a constant difference) leave p, and so w, fixed."""
    values = np.asarray(replicates, dtype=float)
    values = values[np.isfinite(values)]
    if estimate is None or not math.isfinite(estimate) or not len(values):
        return math.nan, math.nan
    scores = below_scores(values, estimate)
    share = float(scores.mean())
    accel = acceleration(jackknife)
    z0 = _ndtri(share) if 0 < share < 1 else None  # None: percentile levels, fixed
    margins = []
    for tail, beyond in (((1 - ci) / 2, values <= 0), ((1 + ci) / 2, values < 0)):
        z_alpha = _ndtri(tail)
        level, moves = tail, 0.0  # moves: dw/dp
        if z0 is not None:
            level = bca_level(z0, z_alpha, accel)
            scale = 1 - accel * (z0 + z_alpha)
            moves = (1 + 1 / scale**2) / _density(z0) if scale > 0 else 0.0
        crossed = float(beyond.mean())
        where = _ndtri(crossed)  # ±inf: no replicate (every one) beyond 0
        distance = _ndtri(level) - where if tail < 0.5 else where - _ndtri(level)
        if not math.isfinite(distance):  # NaN: limit and 0 both at one end, fixed
            margins.append(math.inf if math.isnan(distance) else distance)
            continue
        stretch = 1 / _density(where)  # dΦ⁻¹(F)/dF
        covariance = float(scores[beyond].sum()) / len(values) - crossed * share
        variance = (stretch**2 * crossed * (1 - crossed) + moves**2 * float(scores.var())
                    - 2 * stretch * moves * covariance) / len(values)
        error = math.sqrt(max(variance, 0.0))
        margins.append(distance / error if error > 0
                       else math.copysign(math.inf, distance) if distance else 0.0)
    return margins[0], margins[1]


def _density(z: float) -> float:
    """φ(z), the standard normal density (0 at ±∞)."""
    return math.exp(-z * z / 2) / math.sqrt(2 * math.pi) if math.isfinite(z) else 0.0


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
