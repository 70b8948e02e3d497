"""When a comparison may be called significant: the one rule behind every "significantly
different" and "significantly higher" a report prints (its Summary in every format, the
differences table, the Williams tables), so that no renderer calls one on less evidence
than another.

A call needs three things:
- enough units: at least `MIN_UNITS` (10) images (a bootstrap's unit; captions for a test
  that treats captions as its items). The bootstrap stands in for the population the
  units were drawn from; with fewer, each resample is a reshuffle of a handful of values
  (one image gives every resample the same difference, two give three distinct ones),
  the variance of a mean among them is (n - 1)/n of the unbiased estimate and the BCa
  correction has no tail to read: the interval's coverage is not what it says. It is
  the same number under which `metrics.stats.confidence.few_units` marks an interval
  unreliable. A difference the same on every image (an interval of no width) is no
  lack of evidence: no seed moves it, and over enough images it is called.
- for a bootstrap interval, a limit that is not within Monte-Carlo noise of 0: the
  replicates are a sample of the bootstrap distribution, and another `--seed` draws
  another, moving each limit. `metrics.stats.confidence.zero_margins` says how many
  Monte-Carlo standard errors each limit is from crossing 0; within `NOISE_SES` the call
  is borderline (it depends on the seed). 4, not 3: the margin is itself measured from
  one seed's replicates, so a call that other seeds flip now and then can sit more than
  3 of its SEs from 0 in the run at hand. On 200 simulated paired differences (10 to 60
  images, 1000 resamples; the slow test in tests/test_significance.py), the 21 whose
  call changed across 30 seeds were borderline at seed 0 with 4 SEs (1 was missed with
  3), and in all 630 of their runs (32 were not with 3); 18 calls that held over the 30
  seeds were borderline at seed 0 as well (8 with 3): the price of the margin. With 100
  resamples, the fewest a command takes, the normal approximation of a tail of 5
  replicates is coarse: 3 of 51 such calls were missed at seed 0.
- then the interval (or the test's p) decides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from metrics.stats.confidence import FEW_UNITS, SINGULAR, Interval, zero_margins

MIN_UNITS = FEW_UNITS  # fewer units than this: too few to call, whatever the interval says
NOISE_SES = 4.0  # a CI limit this many Monte-Carlo SEs from 0, or nearer: borderline
LEVEL = 0.05  # a test's p below this is significant (Williams' test, one-sided)


class Verdict(StrEnum):
    SIGNIFICANT = "significant"
    NOT_SIGNIFICANT = "not significant"
    TOO_FEW = "too few"
    BORDERLINE = "borderline"


@dataclass(frozen=True)
class Call:
    """A comparison's verdict and, in words, why."""

    verdict: Verdict
    reason: str

    @property
    def significant(self) -> bool:
        return self.verdict is Verdict.SIGNIFICANT


def too_few(units: int, unit: str) -> Call | None:
    """The call of a comparison over fewer than `MIN_UNITS` units, or None for enough."""
    if units >= MIN_UNITS:
        return None
    named = SINGULAR.get(unit, unit) if units == 1 else unit
    return Call(Verdict.TOO_FEW, f"{units} {named}, fewer than {MIN_UNITS}")


def interval_call(interval: Interval, replicates: np.ndarray, estimate: float,
                  jackknife: np.ndarray | Sequence[np.ndarray], ci: float, *, units: int,
                  unit: str = "images") -> Call:
    """Whether a difference is significant by its bootstrap `interval` (`bca_ci` of these
    `replicates`, `estimate` and `jackknife`, over `units` resampled units): too few
    units, a limit within `NOISE_SES` Monte-Carlo SEs of 0 (borderline), or the interval
    leaving out 0 or holding it."""
    if (few := too_few(units, unit)) is not None:
        return few
    if math.isnan(interval.low):
        return Call(Verdict.TOO_FEW, "no interval: the difference is undefined in every "
                                     "resample")
    low, high = zero_margins(replicates, estimate, jackknife, ci)
    if min(abs(low), abs(high)) <= NOISE_SES:
        return Call(Verdict.BORDERLINE,
                    f"a CI limit is within {NOISE_SES:g} Monte-Carlo standard errors of 0: "
                    "another --seed may call it either way")
    if interval.low > 0 or interval.high < 0:
        return Call(Verdict.SIGNIFICANT, "its CI leaves out 0")
    return Call(Verdict.NOT_SIGNIFICANT, "its CI holds 0")


def p_value_call(p: float, units: int, *, level: float = LEVEL, unit: str = "captions"
                 ) -> Call:
    """Whether a test's one p-value is significant at `level`, over `units` items that
    the test counts as independent: too few of them, or p decides (a closed-form test has
    no resampling noise)."""
    if (few := too_few(units, unit)) is not None:
        return few
    if math.isnan(p):
        return Call(Verdict.NOT_SIGNIFICANT, "the test is undefined here")
    if p < level:
        return Call(Verdict.SIGNIFICANT, f"p below {level:g}")
    return Call(Verdict.NOT_SIGNIFICANT, f"p of {level:g} or more")
