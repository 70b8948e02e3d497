"""The THUMB paper's analyses as plain functions over a tidy frame of final scores (one row
per caption: image, system, precision, recall, penalties, total, one column per metric).
Bootstrap CIs resample images and are vectorised: every replicate is a row of per-caption
weights (how often its image was drawn), so statistics become matrix products."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

HUMAN = ("precision", "recall", "total")


def image_weights(images: Sequence[object], bootstrap: int, seed: int) -> np.ndarray:
    """(bootstrap x captions) weights: how often each caption's image was drawn when the
    images are resampled with replacement."""
    codes, uniques = pd.factorize(pd.Series(list(images)))
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(len(uniques), np.full(len(uniques), 1 / len(uniques)),
                             size=bootstrap)
    return counts[:, codes].astype(float)


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


def weighted_pearson(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Pearson r of x and y under each row of weights (one r per replicate)."""
    total = weights.sum(axis=1)
    mx, my = weights @ x / total, weights @ y / total
    cov = weights @ (x * y) / total - mx * my
    vx = weights @ (x * x) / total - mx**2
    vy = weights @ (y * y) / total - my**2
    with np.errstate(invalid="ignore", divide="ignore"):
        return cov / np.sqrt(vx * vy)


def weighted_ranks(x: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties averaged) of x in each weighted replicate: what
    scipy.stats.rankdata gives on the resampled data, for every replicate at once."""
    values, group = np.unique(x, return_inverse=True)
    per_value = np.zeros((weights.shape[0], len(values)))
    np.add.at(per_value.T, group, weights.T)
    below = np.cumsum(per_value, axis=1) - per_value
    return (below + (per_value + 1) / 2)[:, group]


def correlation(x: np.ndarray, y: np.ndarray, method: str) -> float:
    if method == "pearson":
        return float(stats.pearsonr(x, y).statistic)
    if method == "spearman":
        return float(stats.spearmanr(x, y).statistic)
    if method in ("kendall-b", "kendall-c"):
        return float(stats.kendalltau(x, y, variant=method[-1]).statistic)
    raise ValueError(f"unknown correlation method {method!r}")


def replicate_correlations(x: np.ndarray, y: np.ndarray, method: str,
                           weights: np.ndarray) -> np.ndarray:
    """The correlation under each row of weights (a bootstrap replicate each). Pearson and
    Spearman are matrix products; Kendall's tau is one O(n log n) pass per replicate."""
    if method == "pearson":
        return weighted_pearson(x, y, weights)
    if method == "spearman":
        rx, ry = weighted_ranks(x, weights), weighted_ranks(y, weights)
        total = weights.sum(axis=1, keepdims=True)
        mx = (weights * rx).sum(axis=1, keepdims=True) / total
        my = (weights * ry).sum(axis=1, keepdims=True) / total
        cov = (weights * (rx - mx) * (ry - my)).sum(axis=1)
        vx = (weights * (rx - mx) ** 2).sum(axis=1)
        vy = (weights * (ry - my) ** 2).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return cov / np.sqrt(vx * vy)
    if method in ("kendall-b", "kendall-c"):
        return kendall_replicates(x, y, weights)[method[-1]]
    raise ValueError(f"unknown correlation method {method!r}")


def _tie_pairs(values: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per replicate: pairs tied in `values` and how many distinct values were drawn."""
    _, group = np.unique(values, return_inverse=True)
    per_value = np.zeros((weights.shape[0], group.max() + 1))
    np.add.at(per_value.T, group, weights.T)
    return (per_value * (per_value - 1) / 2).sum(axis=1), (per_value > 0).sum(axis=1)


def kendall_replicates(x: np.ndarray, y: np.ndarray, weights: np.ndarray
                       ) -> dict[str, np.ndarray]:
    """tau-b and tau-c under each row of weights (integer draw counts), as SciPy gives them
    on the resampled data: one O(n log n) tau-b per replicate; tau-c follows from the same
    concordance count C - D = tau-b * sqrt((n0 - n1)(n0 - n2))."""
    counts = weights.astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        tau_b = np.array([stats.kendalltau(np.repeat(x, row), np.repeat(y, row)).statistic
                          for row in counts])
        n = counts.sum(axis=1).astype(float)
        pairs = n * (n - 1) / 2
        (ties_x, distinct_x), (ties_y, distinct_y) = _tie_pairs(x, counts), _tie_pairs(y, counts)
        concordance = tau_b * np.sqrt((pairs - ties_x) * (pairs - ties_y))
        m = np.minimum(distinct_x, distinct_y).astype(float)
        tau_c = 2 * concordance / (n**2 * (m - 1) / m)
    return {"b": tau_b, "c": tau_c}


def correlation_ci(x: np.ndarray, y: np.ndarray, method: str, weights: np.ndarray,
                   ci: float, kendall: bool = False) -> tuple[float, float]:
    """Bootstrap CI; for Kendall's tau only when `kendall` is set (one O(n log n) pass per
    replicate, which the THUMB report does not spend), else NaN."""
    if method.startswith("kendall") and not kendall:
        return float("nan"), float("nan")
    return percentile_ci(replicate_correlations(x, y, method, weights), ci)


def williams_test(r12: float, r13: float, r23: float, n: int) -> tuple[float, float]:
    """Williams (1959) test that r12 > r13 for dependent correlations sharing variable 1
    (the human score; 2 and 3 are two metrics with correlation r23). One-sided p."""
    if n <= 3:
        raise ValueError("the Williams test needs more than 3 items")
    det = 1 - r12**2 - r13**2 - r23**2 + 2 * r12 * r13 * r23
    mean = (r12 + r13) / 2
    t = (r12 - r13) * np.sqrt((n - 1) * (1 + r23)) / np.sqrt(
        2 * (n - 1) / (n - 3) * det + mean**2 * (1 - r23) ** 3)
    return float(t), float(stats.t.sf(t, n - 3))


def system_table(data: pd.DataFrame, metrics: Sequence[str], *, scores: Sequence[str],
                 bootstrap: int, ci: float, seed: int) -> pd.DataFrame:
    """THUMB Table 2: per system, the mean of each human score and penalty in `scores`
    (a rubric's) and of Total (bootstrap CIs over images), next to each metric's mean."""
    rows = []
    for system, part in data.groupby("system", sort=False):
        weights = image_weights(part["image_id"], bootstrap, seed) if bootstrap else None
        row: dict[str, object] = {"system": system, "n": len(part)}
        for column in (*scores, "total"):
            row[column] = float(part[column].mean())
        if weights is not None:
            means = weights @ part["total"].to_numpy() / weights.sum(axis=1)
            row["total_ci_low"], row["total_ci_high"] = percentile_ci(means, ci)
        for metric in metrics:
            row[metric] = float(part[metric].mean())
        rows.append(row)
    return pd.DataFrame(rows).sort_values("total", ascending=False).reset_index(drop=True)


def strict_best_worst(data: pd.DataFrame) -> pd.DataFrame:
    """THUMB Table 3: how often a system is best (worst) in its image's caption set in both
    P and R: its P and its R are each at least (at most) every other caption's."""
    counts = {system: {"best": 0, "worst": 0} for system in data["system"].unique()}
    for _, group in data.groupby("image_id"):
        p, r = group["precision"].to_numpy(), group["recall"].to_numpy()
        for index, system in enumerate(group["system"]):
            if (p[index] >= p).all() and (r[index] >= r).all():
                counts[system]["best"] += 1
            if (p[index] <= p).all() and (r[index] <= r).all():
                counts[system]["worst"] += 1
    return pd.DataFrame([{"system": s, **c} for s, c in counts.items()])


def correlation_records(data: pd.DataFrame, metrics: Sequence[str],
                        subsets: dict[str, pd.Series], *, bootstrap: int, ci: float,
                        seed: int) -> pd.DataFrame:
    """THUMB Table 4: Pearson, Spearman, Kendall tau-b and tau-c of each metric with P, R
    and Total, per subset (`all`, `without:NAME`), with bootstrap CIs over images."""
    records = []
    for subset, mask in subsets.items():
        part = data[mask]
        weights = image_weights(part["image_id"], bootstrap, seed) if bootstrap else None
        for metric in metrics:
            x = part[metric].to_numpy(dtype=float)
            for dimension in HUMAN:
                y = part[dimension].to_numpy(dtype=float)
                for method in ("pearson", "spearman", "kendall-b", "kendall-c"):
                    low, high = (correlation_ci(x, y, method, weights, ci)
                                 if weights is not None else (float("nan"),) * 2)
                    records.append({"metric": metric, "dimension": dimension,
                                    "subset": subset, "method": method,
                                    "r": correlation(x, y, method), "ci_low": low,
                                    "ci_high": high, "n": len(part)})
    return pd.DataFrame(records, columns=["metric", "dimension", "subset", "method", "r",
                                          "ci_low", "ci_high", "n"])


def williams_records(data: pd.DataFrame, metrics: Sequence[str],
                     subsets: dict[str, pd.Series]) -> pd.DataFrame:
    """For each pair of metrics and human dimension: is the first metric's Pearson r with
    the human score higher than the second's? (Williams test, one-sided.)"""
    records = []
    for subset, mask in subsets.items():
        part = data[mask]
        if len(part) <= 3:  # the test is undefined for so few captions: no rows
            continue
        for dimension in HUMAN:
            human = part[dimension].to_numpy(dtype=float)
            for first in metrics:
                for second in metrics:
                    if first == second:
                        continue
                    a, b = part[first].to_numpy(float), part[second].to_numpy(float)
                    r1, r2 = np.corrcoef(human, a)[0, 1], np.corrcoef(human, b)[0, 1]
                    t, p = williams_test(r1, r2, np.corrcoef(a, b)[0, 1], len(part))
                    records.append({"metric": first, "versus": second, "dimension": dimension,
                                    "subset": subset, "r_metric": r1, "r_versus": r2,
                                    "t": t, "p": p, "n": len(part)})
    return pd.DataFrame(records, columns=["metric", "versus", "dimension", "subset",
                                          "r_metric", "r_versus", "t", "p", "n"])


def pairwise_records(data: pd.DataFrame, metrics: Sequence[str], *, bootstrap: int,
                     ci: float, seed: int) -> pd.DataFrame:
    """BISON-style choices: over every pair of captions of one image whose human Totals
    differ, how often does the metric prefer the caption humans scored higher? Ties of the
    metric are counted apart and left out of the accuracy."""
    first, second, image = [], [], []
    for key, group in data.groupby("image_id"):
        rows = group.index.to_numpy()
        totals = group["total"].to_numpy()
        for i in range(len(rows)):
            for j in range(i + 1, len(rows)):
                if totals[i] != totals[j]:
                    first.append(rows[i])
                    second.append(rows[j])
                    image.append(key)
    human = np.sign(data.loc[first, "total"].to_numpy() - data.loc[second, "total"].to_numpy())
    weights = image_weights(image, bootstrap, seed) if bootstrap and image else None
    records = []
    for metric in metrics:
        machine = np.sign(data.loc[first, metric].to_numpy(float)
                          - data.loc[second, metric].to_numpy(float))
        correct, tie = (machine == human).astype(float), (machine == 0).astype(float)
        decided = len(human) - tie.sum()
        accuracy = correct.sum() / decided if decided else float("nan")
        low = high = float("nan")
        if weights is not None:
            with np.errstate(invalid="ignore", divide="ignore"):
                replicate = (weights @ correct) / (weights @ (1 - tie))
            low, high = percentile_ci(replicate, ci)
        records.append({"metric": metric, "accuracy": float(accuracy), "ci_low": low,
                        "ci_high": high, "pairs": len(human), "ties": int(tie.sum())})
    return pd.DataFrame(records, columns=["metric", "accuracy", "ci_low", "ci_high", "pairs",
                                          "ties"])
