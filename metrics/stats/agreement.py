"""Inter-annotator agreement, as plain functions over long-format data
(`data, targets, raters, ratings`), and the agreement table of compared rating pairs.

Two kinds of pairs are reported apart: blind pairs (two independent stage-1 ratings of the
images chosen for double rating) and stage 1 vs stage 2 (the second annotator saw the
first's scores, so this agreement is inflated by design). A statistic that is undefined
(one category only, too few items) is reported as undefined with the reason, never NaN."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

WEIGHTS = (None, "linear", "quadratic")
LEVELS = ("nominal", "ordinal", "interval")
# The two annotators of a compared pair of ratings: two columns, never one joined text,
# since a name may hold any separator; both None in a record over every pair of a kind.
PAIR_COLUMNS = ["annotator_a", "annotator_b"]


def over_every_pair(records: pd.DataFrame) -> pd.Series:
    """Which of `agreement_table`'s records are over every pair of their kind."""
    return records[PAIR_COLUMNS].isna().all(axis=1)


class UndefinedStatistic(ValueError):
    """The statistic has no value on this data; the message says why."""


def _pairs(data: pd.DataFrame, targets: str, raters: str, ratings: str
           ) -> tuple[np.ndarray, np.ndarray]:
    """The two ratings of each target, in a fixed rater order (sorted rater names)."""
    for column in (targets, raters, ratings):
        if column not in data.columns:
            raise ValueError(f"column {column!r} not in data (columns: {list(data.columns)})")
    clean = data.dropna(subset=[ratings])
    counts = clean.groupby(targets)[raters].nunique()
    if (counts != 2).any():
        bad = counts[counts != 2].index[0]
        raise ValueError(f"every target needs ratings by exactly two raters; {bad} has "
                         f"{counts[bad]}")
    ordered = clean.sort_values([targets, raters])
    values = ordered[ratings].to_numpy(dtype=float).reshape(-1, 2)
    return values[:, 0], values[:, 1]


def kappa_from_pairs(first: np.ndarray, second: np.ndarray, weights: str | None = None,
                     categories: Sequence[float] | None = None) -> float:
    """Cohen's kappa of two label arrays; weights None, 'linear' or 'quadratic' (the
    distance between two categories' values, or its square: see `kappa_sums`)."""
    if len(first) < 2:
        raise UndefinedStatistic("fewer than 2 items")
    value = float(total_of(kappa_sums(first, second, weights, categories)))
    if np.isnan(value):
        raise UndefinedStatistic("one category only: chance agreement is perfect")
    return value


def cohen_kappa(data: pd.DataFrame, targets: str, raters: str, ratings: str,
                weights: str | None = None,
                categories: Sequence[float] | None = None) -> float:
    """Cohen's kappa of two raters over long-format data (one row per target and rater)."""
    return kappa_from_pairs(*_pairs(data, targets, raters, ratings), weights, categories)


def alpha_from_matrix(matrix: np.ndarray, level: str) -> float:
    """Krippendorff's alpha of a raters x units matrix (NaN: no value)."""
    if matrix.shape[1] < 2:
        raise UndefinedStatistic("fewer than 2 items")
    if not ((~np.isnan(matrix)).sum(axis=0) >= 2).any():
        raise UndefinedStatistic("no item has values from two raters")
    value = float(total_of(alpha_sums(matrix, level)))
    if np.isnan(value):
        raise UndefinedStatistic("one value only: expected disagreement is zero")
    return value


# -- statistics as sums over units -----------------------------------------------------------
# Kappa, alpha and agreement rates are functions of a sum over units (captions, pairs) of
# per-unit features: a confusion matrix, a coincidence matrix, a count. A bootstrap
# replicate is then one product of its draw counts with the features summed per resampled
# group, not a recomputation (`resampled`).

CHUNK_BYTES = 32 * 2**20  # draw counts held at once while resampling
MAX_COINCIDENCE_CELLS = 2**27  # units x categories² held for nominal or ordinal alpha (1 GiB)


@dataclass(frozen=True)
class UnitSums:
    """A statistic as a sum over units: `features` (units x F) and `finish`, which turns
    summed features (... x F) into the statistic (...), NaN where it is undefined."""

    features: np.ndarray
    finish: Callable[[np.ndarray], np.ndarray]


def total_of(sums: UnitSums) -> np.ndarray:
    """The statistic over every unit once."""
    return sums.finish(sums.features.sum(axis=0))


def rate_sums(hits: np.ndarray) -> UnitSums:
    """The share of units where `hits` is true (exact agreement, change rate, within-1)."""
    features = np.column_stack([np.asarray(hits, dtype=float), np.ones(len(hits))])
    return UnitSums(features, lambda total: total[..., 0] / total[..., 1])


def kappa_sums(first: np.ndarray, second: np.ndarray, weights: str | None,
               categories: Sequence[float] | None) -> UnitSums:
    """Cohen's kappa (Cohen 1960; weighted, Cohen 1968) from each item's cell of the
    confusion matrix: kappa = 1 - sum(w * observed) / sum(w * expected), `expected` the
    product of the observed marginals, w the disagreement weight of two categories: 1 for
    any two (unweighted), or Cohen's weights from their scale values, |x - y| (linear) or
    its square (quadratic); dividing by the range (max - min) cancels in the ratio. The
    values, not their ranks among those observed: Totals 2.0, 2.4 and 3.5 are 0.4 and 1.1
    apart, not 1 and 1. On equally spaced categories (a 1-5 scale) that is the index
    distance scikit-learn's `cohen_kappa_score` uses."""
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, not {weights!r}")
    labels = np.asarray(sorted(set(first) | set(second)) if categories is None
                        else categories, dtype=float)
    index = {value: position for position, value in enumerate(labels)}
    try:
        cells = np.array([index[a] * len(labels) + index[b]
                          for a, b in zip(first, second, strict=True)], dtype=np.int64)
    except KeyError as exc:
        raise ValueError(f"rating {exc.args[0]} is not among the categories") from None
    k = len(labels)
    features = np.zeros((len(cells), k * k))
    features[np.arange(len(cells)), cells] = 1.0
    distance = np.abs(np.subtract.outer(labels, labels))
    weight = {None: (distance > 0).astype(float), "linear": distance,
              "quadratic": distance ** 2}[weights]

    def finish(total: np.ndarray) -> np.ndarray:
        confusion = total.reshape(*total.shape[:-1], k, k)
        observed = confusion / confusion.sum(axis=(-2, -1))[..., None, None]
        expected = observed.sum(axis=-1)[..., :, None] * observed.sum(axis=-2)[..., None, :]
        disagreement = (weight * expected).sum(axis=(-2, -1))
        with np.errstate(divide="ignore", invalid="ignore"):
            value = 1 - (weight * observed).sum(axis=(-2, -1)) / disagreement
        return np.where(disagreement > 0, value, np.nan)

    return UnitSums(features, finish)


def alpha_sums(matrix: np.ndarray, level: str) -> UnitSums:
    """Krippendorff's alpha (Krippendorff 2011, "Computing Krippendorff's
    Alpha-Reliability") of a raters x units matrix from each unit's coincidences: a unit
    with m_u >= 2 values adds n_uc * n_uk / (m_u - 1) to o_ck (n_uc (n_uc - 1) / (m_u - 1)
    on the diagonal), and alpha = 1 - (n - 1) sum(o_ck d_ck) / sum(n_c n_k d_ck) with
    n_c = sum_k o_ck, n = sum_c n_c and the level's squared distance d: nominal c != k,
    ordinal (sum_{g=c..k} n_g - (n_c + n_k) / 2)^2, interval (c - k)^2. Interval alpha
    needs only each unit's count, sum and sum of squares of values, so a continuous scale
    costs no values x values matrix."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, not {level!r}")
    present = ~np.isnan(matrix)
    domain = np.unique(matrix[present])
    raters, units = np.nonzero(present)
    k = len(domain)
    counts = np.bincount(units * k + np.searchsorted(domain, matrix[raters, units]),
                         minlength=matrix.shape[1] * k).reshape(matrix.shape[1], k)
    pairable = counts.sum(axis=1)
    scale = np.where(pairable >= 2, 1 / np.maximum(pairable - 1, 1), 0.0)
    if level == "interval":
        return _interval_alpha_sums(counts, domain, scale)
    if len(counts) * k * k > MAX_COINCIDENCE_CELLS:
        raise ValueError(f"{level} alpha over {k} distinct values of {len(counts)} units: "
                         "too many categories to resample by units; a continuous scale "
                         "takes interval alpha")
    coincidences = (counts[:, :, None] * counts[:, None, :]
                    - np.einsum("uc,ck->uck", counts, np.eye(k))) * scale[:, None, None]
    distance = (1.0 - np.eye(k)) if level == "nominal" else None

    def finish(total: np.ndarray) -> np.ndarray:
        observed = total.reshape(*total.shape[:-1], k, k)
        marginal = observed.sum(axis=-1)
        if distance is None:  # ordinal: the distance depends on the marginals
            below = np.cumsum(marginal, axis=-1)
            squared = (below[..., None, :] - below[..., :, None]
                       + (marginal[..., :, None] - marginal[..., None, :]) / 2) ** 2
        else:
            squared = distance
        n = marginal.sum(axis=-1)
        disagreement = (observed * squared).sum(axis=(-2, -1))
        expected = (marginal[..., :, None] * marginal[..., None, :] * squared
                    ).sum(axis=(-2, -1))
        with np.errstate(divide="ignore", invalid="ignore"):
            value = 1 - (n - 1) * disagreement / expected
        return np.where(expected > 0, value, np.nan)

    return UnitSums(coincidences.reshape(len(counts), k * k), finish)


def _interval_alpha_sums(counts: np.ndarray, domain: np.ndarray, scale: np.ndarray
                         ) -> UnitSums:
    """Interval alpha's sums: per pairable unit its values' count m_u, sum S1, sum of
    squares S2 and its disagreement, the sum over ordered pairs of (v_i - v_j)^2 / (m_u - 1)
    = 2 (m_u S2 - S1^2) / (m_u - 1); the expected term over all pairable values is
    2 (n S2 - S1^2). Values are centred first (alpha does not change), which keeps those
    differences of sums exact; a difference within rounding of 0 is no disagreement."""
    centred = domain - domain.mean() if len(domain) else domain
    kept = (scale > 0)[:, None] * counts
    count, total, squares = kept.sum(axis=1), kept @ centred, kept @ centred**2
    features = np.column_stack([count, total, squares,
                                2 * (count * squares - total**2) * scale])

    def finish(sums: np.ndarray) -> np.ndarray:
        n, first, second, disagreement = np.moveaxis(sums, -1, 0)
        expected = 2 * (n * second - first**2)
        with np.errstate(divide="ignore", invalid="ignore"):
            value = 1 - (n - 1) * disagreement / expected
        return np.where(expected > 1e-12 * n * second, value, np.nan)

    return UnitSums(features, finish)


def resampled(statistics: Sequence[UnitSums], group_of_unit: np.ndarray, groups: int,
              bootstrap: int, rng: np.random.Generator
              ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each statistic's bootstrap replicates and grouped-jackknife values, resampling the
    `groups` groups of units (images) with `rng` (`metrics.stats.confidence.resample_counts`:
    the draws are those of `bootstrap` calls of rng.integers(0, groups, groups), also when
    no statistic is given, so later draws do not depend on which statistics were defined).
    One product of the draw counts with every statistic's features summed per group."""
    from metrics.stats.confidence import jackknife_groups, resample_counts

    widths = [sums.features.shape[1] for sums in statistics]
    per_group = np.zeros((groups, sum(widths)))
    if statistics:
        np.add.at(per_group, group_of_unit,
                  np.hstack([sums.features for sums in statistics]))
    edges = np.cumsum([0, *widths])
    replicates = [np.empty(bootstrap) for _ in statistics]
    done = 0
    for counts in resample_counts(groups, bootstrap, rng,
                                  chunk=max(1, CHUNK_BYTES // (8 * max(groups, 1)))):
        totals = counts @ per_group
        for sums, values, low, high in zip(statistics, replicates, edges, edges[1:],
                                           strict=False):
            values[done : done + len(counts)] = sums.finish(totals[:, low:high])
        done += len(counts)
    jackknife = jackknife_groups(groups)
    left_out = (jackknife[None, :] != np.arange(jackknife.max(initial=-1) + 1)[:, None]
                ) @ per_group
    return replicates, [sums.finish(left_out[:, low:high]) for sums, low, high
                        in zip(statistics, edges, edges[1:], strict=False)]


def krippendorff_alpha(data: pd.DataFrame, targets: str, raters: str, ratings: str,
                       level: str = "ordinal") -> float:
    """Krippendorff's alpha over long-format data; any number of raters, missing allowed."""
    for column in (targets, raters, ratings):
        if column not in data.columns:
            raise ValueError(f"column {column!r} not in data (columns: {list(data.columns)})")
    matrix = data.pivot_table(index=raters, columns=targets, values=ratings, aggfunc="first")
    return alpha_from_matrix(matrix.to_numpy(dtype=float), level)


def alpha_table(data: pd.DataFrame, targets: str, raters: str, ratings: str, groups: str,
                *, levels: Sequence[str] = ("ordinal", "interval"), bootstrap: int = 1000,
                ci: float = 0.90, seed: int = 0) -> pd.DataFrame:
    """Krippendorff's alpha among any number of raters at each level of measurement, with
    a BCa bootstrap CI that resamples `groups` (images) with all their targets. Tidy
    records {statistic, value, ci_low, ci_high, n (targets), raters, note, ci_warning};
    an undefined alpha has no value and says why in `note`; `ci_warning` says why a CI
    deserves less trust (few images; the estimate at the edge of its resamples)."""
    from metrics.stats.confidence import bca_ci

    for column in (targets, raters, ratings, groups):
        if column not in data.columns:
            raise ValueError(f"column {column!r} not in data (columns: {list(data.columns)})")
    wide = data.pivot_table(index=raters, columns=targets, values=ratings, aggfunc="first")
    matrix = wide.to_numpy(dtype=float)
    # clusters numbered by their labels, not by their targets' (caption ids are drawn at
    # random at import: the same project imported twice must draw the same resamples)
    group_of, names = pd.factorize(data.groupby(targets)[groups].first()
                                   .reindex(wide.columns), sort=True)
    records, estimates = [], {}
    for level in levels:
        record: dict[str, object] = {"statistic": f"alpha_{level}", "value": None,
                                     "ci_low": None, "ci_high": None, "n": matrix.shape[1],
                                     "raters": matrix.shape[0], "note": None,
                                     "ci_warning": None}
        try:
            estimates[level] = alpha_from_matrix(matrix, level)
            record["value"] = _tidy(estimates[level])
        except UndefinedStatistic as exc:
            record["note"] = f"undefined: {exc}"
        if level in estimates and bootstrap and len(names) < 2:
            record["note"] = "no CI: resampling needs at least 2 images"
        records.append(record)
    if bootstrap and len(names) > 1:
        replicates, jackknife = resampled([alpha_sums(matrix, level) for level in estimates],
                                          group_of, len(names), bootstrap,
                                          np.random.default_rng(seed))
        for level, values, left_out in zip(estimates, replicates, jackknife, strict=True):
            if np.isfinite(values).any():
                interval = bca_ci(values, estimates[level], left_out, ci)
                record = records[list(levels).index(level)]
                record["ci_low"], record["ci_high"] = _tidy(interval.low), _tidy(interval.high)
                record["ci_warning"] = interval.warning
    return pd.DataFrame(records)


def _statistics(first: np.ndarray, second: np.ndarray, binary: bool,
                categories: Sequence[float] | None
                ) -> dict[str, tuple[Callable[[], float], Callable[[], UnitSums]]]:
    """Every statistic of one set of pairs: its value over every pair (which raises where
    it is undefined) and its sums over pairs, which the bootstrap resamples."""
    both = np.vstack([first, second])
    stats = {
        "exact": (lambda: float(np.mean(first == second)),
                  lambda: rate_sums(first == second)),
        "change_rate": (lambda: float(np.mean(first != second)),
                        lambda: rate_sums(first != second)),
    }
    for weights in WEIGHTS:
        stats["kappa" + (f"_{weights}" if weights else "")] = (
            lambda w=weights: kappa_from_pairs(first, second, w, categories),
            lambda w=weights: kappa_sums(first, second, w, categories))
    for level in ("ordinal", "interval"):
        stats[f"alpha_{level}"] = (lambda lv=level: alpha_from_matrix(both, lv),
                                   lambda lv=level: alpha_sums(both, lv))
    stats["within_1"] = (lambda: _within_one(first, second, binary),
                         lambda: rate_sums(np.abs(first - second) <= 1))
    return stats


def _within_one(first: np.ndarray, second: np.ndarray, binary: bool) -> float:
    if binary:
        raise UndefinedStatistic("within-1 is not meaningful for a yes/no dimension")
    return float(np.mean(np.abs(first - second) <= 1))


def agreement_table(pairs: pd.DataFrame, *, bootstrap: int = 1000, ci: float = 0.90,
                    seed: int = 0, scales: Mapping[str, Sequence[float]] | None = None
                    ) -> pd.DataFrame:
    """Tidy records {dimension, annotator_a, annotator_b, kind, statistic, n (captions),
    images, value, ci_low, ci_high, note, ci_warning}: per annotator pair and overall (both
    annotators None: every pair of that kind), BCa bootstrap CIs resampling images
    (`metrics.stats.confidence`; the jackknife leaves one image out), with `ci_warning` saying
    why a CI deserves less trust (few images; the estimate at the edge of its resamples).

    `pairs`: one row per caption and compared pair of ratings, with columns kind,
    annotator_a, annotator_b, image and `<dimension>_a`, `<dimension>_b` for each dimension
    compared. `scales`: each ordinal dimension's categories (a rubric's levels), so that
    kappa counts the levels nobody used; `fluency_error` is the yes/no dimension."""
    from metrics.stats.confidence import bca_ci, check_ci

    check_ci(ci)
    records: list[dict[str, object]] = []
    if pairs.empty:
        return pd.DataFrame(columns=["dimension", *PAIR_COLUMNS, "kind", "statistic", "n",
                                     "images", "value", "ci_low", "ci_high", "note",
                                     "ci_warning"])  # the records' order
    rng = np.random.default_rng(seed)
    dimensions = [c.removesuffix("_a") for c in pairs.columns
                  if c.endswith("_a") and c not in PAIR_COLUMNS]
    for kind, of_kind in pairs.groupby("kind"):
        for annotators, subset in [((None, None), of_kind), *of_kind.groupby(PAIR_COLUMNS)]:
            pair = dict(zip(PAIR_COLUMNS, annotators, strict=True))
            unique_images, image_of_row = np.unique(subset["image"].to_numpy(),
                                                    return_inverse=True)
            resampled_records, sums = [], []
            for dimension in dimensions:
                a = subset[f"{dimension}_a"].to_numpy()
                b = subset[f"{dimension}_b"].to_numpy()
                binary = dimension == "fluency_error"
                statistics = _statistics(a, b, binary, (scales or {}).get(dimension))
                for name, (estimate_of, sums_of) in statistics.items():
                    record = {"dimension": dimension, **pair, "kind": kind,
                              "statistic": name, "n": len(a), "images": len(unique_images),
                              "value": None, "ci_low": None, "ci_high": None, "note": None,
                              "ci_warning": None}
                    try:
                        estimate = estimate_of()
                    except UndefinedStatistic as exc:
                        record["note"] = f"undefined: {exc}"
                    else:
                        record["value"] = _tidy(estimate)
                        if bootstrap and len(unique_images) < 2:
                            record["note"] = "no CI: resampling needs at least 2 images"
                        elif bootstrap:
                            resampled_records.append((record, estimate))
                            sums.append(sums_of())
                    records.append(record)
                for (x, y), count in pd.Series(list(zip(a, b, strict=True))).value_counts(
                        ).sort_index().items():
                    records.append({"dimension": dimension, **pair, "kind": kind,
                                    "statistic": f"confusion:{x:g}->{y:g}", "n": len(a),
                                    "images": len(unique_images), "value": float(count),
                                    "ci_low": None, "ci_high": None, "note": None,
                                    "ci_warning": None})
            if bootstrap:  # drawn for every subset, so that each subset's draws stay its own
                replicates, jackknife = resampled(sums, image_of_row, len(unique_images),
                                                  bootstrap, rng)
                for (record, estimate), values, left_out in zip(
                        resampled_records, replicates, jackknife, strict=True):
                    interval = bca_ci(values, estimate, left_out, ci)
                    record["ci_low"], record["ci_high"] = (_tidy(interval.low),
                                                           _tidy(interval.high))
                    record["ci_warning"] = interval.warning
    return pd.DataFrame(records)


def _tidy(value: float | None) -> float | None:
    """Drop floating-point noise (1e-16 for an exact 0) from a reported value; None for
    no value (None or NaN)."""
    return None if value is None or np.isnan(value) else round(value, 12) + 0.0
