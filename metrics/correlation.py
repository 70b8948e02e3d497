"""The THUMB paper's analyses as plain functions over a tidy frame of final scores (one row
per caption: image, system, precision, recall, penalties, total, one column per metric).
Bootstrap CIs resample images and are vectorised: every replicate is a row of per-caption
weights (how often its image was drawn), so statistics become matrix products. A metric
may be undefined (NaN) for some captions; its statistics use the captions where it is
defined."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import sparse, stats

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


def _value_ranks(x: np.ndarray, weights: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(replicates x distinct values) weight and average rank of each distinct value of x,
    and the value of each caption. The weights of a value are one sparse product (counts,
    so exact); everything else stays as small as the number of distinct values."""
    values, group = np.unique(x, return_inverse=True)
    of_value = sparse.csr_matrix((np.ones(len(x)), (group, np.arange(len(x)))),
                                 shape=(len(values), len(x)))
    per_value = np.asarray(of_value @ weights.T).T
    below = np.cumsum(per_value, axis=1) - per_value
    return per_value, below + (per_value + 1) / 2, group


def weighted_ranks(x: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties averaged) of x in each weighted replicate: what
    scipy.stats.rankdata gives on the resampled data, for every replicate at once."""
    _, ranks, group = _value_ranks(x, weights)
    return ranks[:, group]


@dataclass
class _Centred:
    """One quantity's bootstrap statistics for the Spearman CI: its weighted ranks centred
    on each replicate's mean, and their weighted variance."""

    centred: np.ndarray
    variance: np.ndarray

    @classmethod
    def of(cls, x: np.ndarray, weights: np.ndarray, total: np.ndarray) -> _Centred:
        per_value, ranks, group = _value_ranks(x, weights)
        centred = ranks - (per_value * ranks).sum(axis=1, keepdims=True) / total
        return cls(centred[:, group], (per_value * centred**2).sum(axis=1))


def _spearman_replicates(weighted_x: np.ndarray, x: _Centred, y: _Centred) -> np.ndarray:
    """Spearman's rho per replicate; `weighted_x` is the weights times x's centred ranks."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return (weighted_x * y.centred).sum(axis=1) / np.sqrt(x.variance * y.variance)


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
        total = weights.sum(axis=1, keepdims=True)
        ranked = _Centred.of(x, weights, total)
        return _spearman_replicates(weights * ranked.centred, ranked,
                                    _Centred.of(y, weights, total))
    if method in ("kendall-b", "kendall-c"):
        return kendall_replicates(x, y, weights)[method[-1]]
    raise ValueError(f"unknown correlation method {method!r}")


def _tie_pairs(values: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per replicate: pairs tied in `values` and how many distinct values were drawn."""
    per_value, _, _ = _value_ranks(values, weights)
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
    by_image = data.groupby("image_id")
    p, r = data["precision"], data["recall"]
    best = (p == by_image["precision"].transform("max")) & (
        r == by_image["recall"].transform("max"))
    worst = (p == by_image["precision"].transform("min")) & (
        r == by_image["recall"].transform("min"))
    counts = pd.DataFrame({"system": data["system"], "best": best, "worst": worst})
    totals = counts.groupby("system", sort=False)[["best", "worst"]].sum()
    systems = data["system"].unique()
    return pd.DataFrame({"system": systems, "best": totals.loc[systems, "best"].to_numpy(),
                         "worst": totals.loc[systems, "worst"].to_numpy()})


@dataclass
class _Sample:
    """The captions of a subset where a metric is defined, their bootstrap weights and the
    human side of every correlation, computed once for all metrics defined there."""

    humans: dict[str, np.ndarray]
    weights: np.ndarray | None
    total: np.ndarray | None = None
    ranked: dict[str, _Centred] = field(default_factory=dict)
    moments: np.ndarray | None = None  # replicate means of each human score and its square

    def __post_init__(self) -> None:
        if self.weights is not None:
            self.total = self.weights.sum(axis=1, keepdims=True)
            self.ranked = {name: _Centred.of(y, self.weights, self.total)
                           for name, y in self.humans.items()}
            self.moments = self._means([v for y in self.humans.values() for v in (y, y * y)])

    def _means(self, columns: list[np.ndarray]) -> np.ndarray:
        """(replicates x columns) weighted means: one matrix product for all columns."""
        assert self.weights is not None and self.total is not None
        return self.weights @ np.column_stack(columns) / self.total

    def pearson(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Pearson r of x with each human score in every replicate."""
        assert self.moments is not None
        means = self._means([x, x * x, *(x * y for y in self.humans.values())])
        mx, vx = means[:, 0], means[:, 1] - means[:, 0] ** 2
        result = {}
        for index, name in enumerate(self.humans):
            my, myy = self.moments[:, 2 * index], self.moments[:, 2 * index + 1]
            with np.errstate(invalid="ignore", divide="ignore"):
                result[name] = (means[:, 2 + index] - mx * my) / np.sqrt(vx * (myy - my**2))
        return result


def correlation_records(data: pd.DataFrame, metrics: Sequence[str],
                        subsets: dict[str, pd.Series], *, bootstrap: int, ci: float,
                        seed: int) -> pd.DataFrame:
    """THUMB Table 4: Pearson, Spearman, Kendall tau-b and tau-c of each metric with P, R
    and Total, per subset (`all`, `without:NAME`), with bootstrap CIs over images (Kendall's
    tau gets a point estimate only). Each quantity is ranked once per subset."""
    records = []
    for subset, mask in subsets.items():
        part = data[mask]
        weights = image_weights(part["image_id"], bootstrap, seed) if bootstrap else None
        humans = {dimension: part[dimension].to_numpy(dtype=float) for dimension in HUMAN}
        samples: dict[bytes, _Sample] = {}
        for metric in metrics:
            values = part[metric].to_numpy(dtype=float)
            defined = ~np.isnan(values)
            sample = samples.get(defined.tobytes())
            if sample is None:
                sample = samples[defined.tobytes()] = _Sample(
                    {name: y[defined] for name, y in humans.items()},
                    None if weights is None else weights[:, defined])
            x = values[defined]
            replicates: dict[str, dict[str, np.ndarray]] = {}
            if sample.weights is not None:
                ranked = _Centred.of(x, sample.weights, sample.total)
                weighted = sample.weights * ranked.centred
                replicates = {"pearson": sample.pearson(x), "spearman": {
                    name: _spearman_replicates(weighted, ranked, human)
                    for name, human in sample.ranked.items()}}
            for dimension, y in sample.humans.items():
                for method in ("pearson", "spearman", "kendall-b", "kendall-c"):
                    low = high = float("nan")
                    if method in replicates:
                        low, high = percentile_ci(replicates[method][dimension], ci)
                    records.append({"metric": metric, "dimension": dimension,
                                    "subset": subset, "method": method,
                                    "r": correlation(x, y, method), "ci_low": low,
                                    "ci_high": high, "n": len(x)})
    return pd.DataFrame(records, columns=["metric", "dimension", "subset", "method", "r",
                                          "ci_low", "ci_high", "n"])


def williams_records(data: pd.DataFrame, metrics: Sequence[str],
                     subsets: dict[str, pd.Series]) -> pd.DataFrame:
    """For each pair of metrics and human dimension: is the first metric's Pearson r with
    the human score higher than the second's? (Williams test, one-sided, over the captions
    where both metrics are defined.) All correlations of a subset come from one matrix."""
    records = []
    for subset, mask in subsets.items():
        part = data[mask]
        if len(part) <= 3:  # the test is undefined for so few captions: no rows
            continue
        columns = [*HUMAN, *metrics]
        values = part[columns].to_numpy(dtype=float)
        complete = np.corrcoef(values, rowvar=False) if not np.isnan(values).any() else None
        for dimension in HUMAN:
            for first in metrics:
                for second in metrics:
                    if first == second:
                        continue
                    picked = [columns.index(c) for c in (dimension, first, second)]
                    rows = values[:, picked]
                    if complete is not None:
                        matrix = complete[np.ix_(picked, picked)]
                    else:
                        rows = rows[~np.isnan(rows).any(axis=1)]
                        matrix = np.corrcoef(rows, rowvar=False)
                    r1, r2, r12 = matrix[0, 1], matrix[0, 2], matrix[1, 2]
                    t, p = williams_test(r1, r2, r12, len(rows))
                    records.append({"metric": first, "versus": second, "dimension": dimension,
                                    "subset": subset, "r_metric": r1, "r_versus": r2,
                                    "t": t, "p": p, "n": len(rows)})
    return pd.DataFrame(records, columns=["metric", "versus", "dimension", "subset",
                                          "r_metric", "r_versus", "t", "p", "n"])


def caption_pairs(data: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair (first, second) of row labels of captions of one image whose human Totals
    differ, images in sorted order and pairs in row order within each, with the pair's
    image. Built per group size with NumPy, not per image."""
    codes, images = pd.factorize(data["image_id"], sort=True)
    order = np.argsort(codes, kind="stable")
    sizes = np.bincount(codes, minlength=len(images))
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    firsts, seconds, keys = [], [], []
    width = int(sizes.max()) if len(sizes) else 0  # keys order pairs by (image, i, j)
    for size in np.unique(sizes):
        groups = np.nonzero(sizes == size)[0]
        i, j = np.triu_indices(size, 1)
        firsts.append((starts[groups][:, None] + i).ravel())
        seconds.append((starts[groups][:, None] + j).ravel())
        keys.append((groups[:, None] * width * width + i * width + j).ravel())
    if not keys:
        return np.zeros(0, dtype=int), np.zeros(0, dtype=int), np.zeros(0, dtype=object)
    sequence = np.argsort(np.concatenate(keys), kind="stable")
    first = order[np.concatenate(firsts)[sequence]]
    second = order[np.concatenate(seconds)[sequence]]
    totals = data["total"].to_numpy()
    differ = totals[first] != totals[second]
    labels = data.index.to_numpy()
    first, second = first[differ], second[differ]
    return labels[first], labels[second], np.asarray(images)[codes[first]]


def pairwise_records(data: pd.DataFrame, metrics: Sequence[str], *, bootstrap: int,
                     ci: float, seed: int) -> pd.DataFrame:
    """BISON-style choices: over every pair of captions of one image whose human Totals
    differ, how often does the metric prefer the caption humans scored higher? Ties of the
    metric are counted apart and left out of the accuracy, and so are pairs where the
    metric is undefined for a caption."""
    first, second, image = caption_pairs(data)
    human = np.sign(data.loc[first, "total"].to_numpy() - data.loc[second, "total"].to_numpy())
    weights = image_weights(image, bootstrap, seed) if bootstrap and len(image) else None
    records = []
    for metric in metrics:
        difference = (data.loc[first, metric].to_numpy(float)
                      - data.loc[second, metric].to_numpy(float))
        scored = ~np.isnan(difference)
        machine = np.sign(difference)
        correct = (machine == human).astype(float)
        tie = ((machine == 0) | ~scored).astype(float)
        decided = len(human) - tie.sum()
        accuracy = correct.sum() / decided if decided else float("nan")
        low = high = float("nan")
        if weights is not None:
            with np.errstate(invalid="ignore", divide="ignore"):
                replicate = (weights @ correct) / (weights @ (1 - tie))
            low, high = percentile_ci(replicate, ci)
        records.append({"metric": metric, "accuracy": float(accuracy), "ci_low": low,
                        "ci_high": high, "pairs": int(scored.sum()),
                        "ties": int((machine[scored] == 0).sum())})
    return pd.DataFrame(records, columns=["metric", "accuracy", "ci_low", "ci_high", "pairs",
                                          "ties"])
