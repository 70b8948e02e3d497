"""Inter-annotator agreement, as plain functions over long-format data
(`data, targets, raters, ratings`), and the agreement table of compared rating pairs.

Two kinds of pairs are reported apart: blind pairs (two independent stage-1 ratings of the
images chosen for double rating) and stage 1 vs stage 2 (the second annotator saw the
first's scores, so this agreement is inflated by design). A statistic that is undefined
(one category only, too few items) is reported as undefined with the reason, never NaN."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

WEIGHTS = (None, "linear", "quadratic")


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
    """Cohen's kappa of two label arrays; weights None, 'linear' or 'quadratic' (on the
    index distance between categories, as scikit-learn does)."""
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, not {weights!r}")
    if len(first) < 2:
        raise UndefinedStatistic("fewer than 2 items")
    labels = np.asarray(sorted(set(first) | set(second)) if categories is None
                        else categories, dtype=float)
    index = {value: position for position, value in enumerate(labels)}
    try:
        a = np.array([index[v] for v in first])
        b = np.array([index[v] for v in second])
    except KeyError as exc:
        raise ValueError(f"rating {exc.args[0]} is not among the categories") from None
    k = len(labels)
    observed = np.bincount(a * k + b, minlength=k * k).reshape(k, k) / len(a)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    grid = np.abs(np.subtract.outer(np.arange(k), np.arange(k)))
    weight = {None: (grid > 0).astype(float), "linear": grid.astype(float),
              "quadratic": grid.astype(float) ** 2}[weights]
    disagreement = (weight * expected).sum()
    if disagreement == 0:
        raise UndefinedStatistic("one category only: chance agreement is perfect")
    return float(1 - (weight * observed).sum() / disagreement)


def cohen_kappa(data: pd.DataFrame, targets: str, raters: str, ratings: str,
                weights: str | None = None,
                categories: Sequence[float] | None = None) -> float:
    """Cohen's kappa of two raters over long-format data (one row per target and rater)."""
    return kappa_from_pairs(*_pairs(data, targets, raters, ratings), weights, categories)


def alpha_from_matrix(matrix: np.ndarray, level: str) -> float:
    """Krippendorff's alpha (the `krippendorff` package) of a raters x units matrix."""
    import krippendorff

    values = matrix[~np.isnan(matrix)]
    if matrix.shape[1] < 2:
        raise UndefinedStatistic("fewer than 2 items")
    if not ((~np.isnan(matrix)).sum(axis=0) >= 2).any():
        raise UndefinedStatistic("no item has values from two raters")
    if len(np.unique(values)) < 2:
        raise UndefinedStatistic("one value only: expected disagreement is zero")
    return float(krippendorff.alpha(reliability_data=matrix, level_of_measurement=level))


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
    from metrics.confidence import bca_ci, jackknife_groups

    for column in (targets, raters, ratings, groups):
        if column not in data.columns:
            raise ValueError(f"column {column!r} not in data (columns: {list(data.columns)})")
    wide = data.pivot_table(index=raters, columns=targets, values=ratings, aggfunc="first")
    matrix = wide.to_numpy(dtype=float)
    group_of = data.groupby(targets)[groups].first().reindex(wide.columns).to_numpy()
    names = pd.unique(group_of)
    columns_of = [np.flatnonzero(group_of == name) for name in names]
    rng = np.random.default_rng(seed)
    samples = [np.concatenate([columns_of[i] for i in rng.integers(0, len(names), len(names))])
               for _ in range(bootstrap)]
    group = jackknife_groups(len(names))
    left_out = [np.concatenate([columns_of[i] for i in np.flatnonzero(group != g)])
                for g in range(group.max(initial=-1) + 1)] if samples and len(names) > 1 else []
    records = []
    for level in levels:
        record: dict[str, object] = {"statistic": f"alpha_{level}", "value": None,
                                     "ci_low": None, "ci_high": None, "n": matrix.shape[1],
                                     "raters": matrix.shape[0], "note": None,
                                     "ci_warning": None}
        estimate = None
        try:
            estimate = alpha_from_matrix(matrix, level)
            record["value"] = _tidy(estimate)
        except UndefinedStatistic as exc:
            record["note"] = f"undefined: {exc}"
        if estimate is not None and samples and len(names) > 1:
            def alpha(columns: np.ndarray, level: str = level) -> float:
                try:
                    return alpha_from_matrix(matrix[:, columns], level)
                except UndefinedStatistic:
                    return float("nan")

            replicates = np.array([alpha(sample) for sample in samples])
            if np.isfinite(replicates).any():
                interval = bca_ci(replicates, estimate,
                                  np.array([alpha(columns) for columns in left_out]), ci)
                record["ci_low"], record["ci_high"] = _tidy(interval.low), _tidy(interval.high)
                record["ci_warning"] = interval.warning
        elif record["value"] is not None and samples:
            record["note"] = "no CI: resampling needs at least 2 images"
        records.append(record)
    return pd.DataFrame(records)


def _statistics(first: np.ndarray, second: np.ndarray, binary: bool,
                categories: Sequence[float] | None) -> dict[str, float]:
    """Every statistic of one set of pairs; undefined ones raise when asked for."""
    pairs = np.vstack([first, second])
    stats: dict[str, object] = {
        "exact": lambda: float(np.mean(first == second)),
        "change_rate": lambda: float(np.mean(first != second)),
        "kappa": lambda: kappa_from_pairs(first, second, None, categories),
        "kappa_linear": lambda: kappa_from_pairs(first, second, "linear", categories),
        "kappa_quadratic": lambda: kappa_from_pairs(first, second, "quadratic", categories),
        "alpha_ordinal": lambda: alpha_from_matrix(pairs, "ordinal"),
        "alpha_interval": lambda: alpha_from_matrix(pairs, "interval"),
    }
    stats["within_1"] = lambda: _within_one(first, second, binary)
    return stats  # type: ignore[return-value]


def _within_one(first: np.ndarray, second: np.ndarray, binary: bool) -> float:
    if binary:
        raise UndefinedStatistic("within-1 is not meaningful for a yes/no dimension")
    return float(np.mean(np.abs(first - second) <= 1))


def agreement_table(pairs: pd.DataFrame, *, bootstrap: int = 1000, ci: float = 0.90,
                    seed: int = 0, scales: Mapping[str, Sequence[float]] | None = None
                    ) -> pd.DataFrame:
    """Tidy records {dimension, pair, kind, statistic, value, ci_low, ci_high, n (captions),
    images, note, ci_warning}: per annotator pair and overall (`all`), BCa bootstrap CIs
    resampling images (`metrics.confidence`; the jackknife leaves one image out), with
    `ci_warning` saying why a CI deserves less trust (few images; the estimate at the edge
    of its resamples).

    `pairs`: one row per caption and compared pair of ratings, with columns kind, pair,
    image and `<dimension>_a`, `<dimension>_b` for each dimension compared. `scales`: each
    ordinal dimension's categories (a rubric's levels), so that kappa counts the levels
    nobody used; `fluency_error` is the yes/no dimension."""
    from metrics.confidence import check_ci, jackknife_groups

    check_ci(ci)
    records: list[dict[str, object]] = []
    if pairs.empty:
        return pd.DataFrame(columns=["dimension", "pair", "kind", "statistic", "value",
                                     "ci_low", "ci_high", "n", "images", "note",
                                     "ci_warning"])
    rng = np.random.default_rng(seed)
    dimensions = [c.removesuffix("_a") for c in pairs.columns if c.endswith("_a")]
    for kind, of_kind in pairs.groupby("kind"):
        groups = [("all", of_kind), *of_kind.groupby("pair")]
        for pair, subset in groups:
            images = subset["image"].to_numpy()
            unique_images = np.unique(images)
            rows_of = {img: np.flatnonzero(images == img) for img in unique_images}
            samples = [np.concatenate([rows_of[i] for i in rng.choice(unique_images,
                                                                      len(unique_images))])
                       for _ in range(bootstrap)]
            group = jackknife_groups(len(unique_images))[np.searchsorted(unique_images,
                                                                         images)]
            left_out = [np.flatnonzero(group != g) for g in range(group.max(initial=-1) + 1)
                        ] if bootstrap else []
            for dimension in dimensions:
                a = subset[f"{dimension}_a"].to_numpy()
                b = subset[f"{dimension}_b"].to_numpy()
                categories = (scales or {}).get(dimension)
                binary = dimension == "fluency_error"
                for name, compute in _statistics(a, b, binary, categories).items():
                    record = {"dimension": dimension, "pair": pair, "kind": kind,
                              "statistic": name, "n": len(a), "images": len(unique_images),
                              "value": None, "ci_low": None, "ci_high": None, "note": None,
                              "ci_warning": None}
                    estimate = None
                    try:
                        estimate = compute()
                        record["value"] = _tidy(estimate)
                    except UndefinedStatistic as exc:
                        record["note"] = f"undefined: {exc}"
                    if estimate is not None and bootstrap and len(unique_images) < 2:
                        record["note"] = "no CI: resampling needs at least 2 images"
                    elif estimate is not None and bootstrap:
                        interval = _bootstrap_ci(name, a, b, binary, categories, samples,
                                                 left_out, estimate, ci)
                        record["ci_low"], record["ci_high"] = (_tidy(interval.low),
                                                               _tidy(interval.high))
                        record["ci_warning"] = interval.warning
                    records.append(record)
                for (x, y), count in pd.Series(list(zip(a, b, strict=True))).value_counts(
                        ).sort_index().items():
                    records.append({"dimension": dimension, "pair": pair, "kind": kind,
                                    "statistic": f"confusion:{x:g}->{y:g}", "n": len(a),
                                    "images": len(unique_images), "value": float(count),
                                    "ci_low": None, "ci_high": None, "note": None,
                                    "ci_warning": None})
    return pd.DataFrame(records)


def _tidy(value: float | None) -> float | None:
    """Drop floating-point noise (1e-16 for an exact 0) from a reported value; None for
    no value (None or NaN)."""
    return None if value is None or np.isnan(value) else round(value, 12) + 0.0


def _bootstrap_ci(name: str, a: np.ndarray, b: np.ndarray, binary: bool,
                  categories: Sequence[float] | None, samples: list[np.ndarray],
                  left_out: list[np.ndarray], estimate: float, ci: float):
    """The BCa interval of statistic `name` from the resampled rows `samples` and the
    jackknife's rows `left_out` (each image, or group of images, left out once);
    resamples where the statistic is undefined are left out."""
    from metrics.confidence import bca_ci

    def value(rows: np.ndarray) -> float:
        try:
            return _statistics(a[rows], b[rows], binary, categories)[name]()
        except UndefinedStatistic:
            return float("nan")

    return bca_ci(np.array([value(rows) for rows in samples]), estimate,
                  np.array([value(rows) for rows in left_out]), ci)
