"""How well metrics agree with human judgments from elsewhere, as the caption-metric
literature reports it: Kendall tau-b and tau-c, Spearman and Pearson against Likert scores
(judgments flattened, one pair per judgment, or averaged per caption), and accuracy against
the majority choice between two captions. Plain functions over tidy frames; bootstrap CIs
resample images, with the correlation code shared with the THUMB report; they are BCa
intervals (`metrics.stats.confidence`), each record's `ci_warning` saying why one deserves less
trust (few images; the estimate at the edge of its bootstrap distribution)."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from metrics.stats.confidence import Interval
from metrics.stats.correlation import (
    bca,
    correlation,
    image_weights,
    kendall_replicates,
    replicate_correlations,
    williams_test,
)

AGGREGATES = ("flat", "mean")
# correlation method -> the statistic's name in reports
STATISTICS = {"kendall-b": "tau_b", "kendall-c": "tau_c", "spearman": "spearman",
              "pearson": "pearson"}
TIE_RULE = ("human majority over a/b votes (tie votes count for neither side; pairs with "
            "equal a and b votes are left out and counted); a metric tie scores 1/2")


def human_scores(scores: pd.DataFrame, aggregate: str) -> pd.DataFrame:
    """`flat`: one row per judgment (caption_id, image, score), the literature's usual
    protocol; `mean`: one row per caption with the mean of its judges' scores."""
    for column in ("caption_id", "image", "score"):
        if column not in scores.columns:
            raise ValueError(f"column {column!r} not in scores (columns: "
                             f"{list(scores.columns)})")
    if aggregate == "flat":
        return scores[["caption_id", "image", "score"]].reset_index(drop=True)
    if aggregate == "mean":
        return (scores.groupby("caption_id", sort=False)
                .agg(image=("image", "first"), score=("score", "mean")).reset_index())
    raise ValueError(f"aggregate must be flat or mean, not {aggregate!r}")


def _correlation(x: np.ndarray, y: np.ndarray, method: str) -> float:
    """NaN, without a warning, when either side is constant."""
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return correlation(x, y, method)


def _replicates(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> dict[str, np.ndarray]:
    """Every statistic under each bootstrap replicate (Kendall's tau-b and tau-c from one
    pass)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        kendall = kendall_replicates(x, y, weights)
        return {"kendall-b": kendall["b"], "kendall-c": kendall["c"],
                **{method: replicate_correlations(x, y, method, weights)
                   for method in ("spearman", "pearson")}}


def score_correlations(data: pd.DataFrame, metrics: Sequence[str], *, human: str = "score",
                       images: str = "image", bootstrap: int = 1000, ci: float = 0.90,
                       seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each metric's tau-b, tau-c, Spearman and Pearson with the human column, each with a
    bootstrap CI over images; and for every pair of metrics the difference of each
    statistic with a paired bootstrap CI (the same resamples), plus Williams' test for
    Pearson (one-sided p that the higher r is higher).

    Returns (records {metric, statistic, value, ci_low, ci_high, n, ci_warning},
    differences {metric, versus, statistic, difference, ci_low, ci_high, williams_t,
    williams_p, n, ci_warning})."""
    missing = [c for c in (human, images, *metrics) if c not in data.columns]
    if missing:
        raise ValueError(f"column(s) {missing} not in data (columns: {list(data.columns)})")
    if len(data) < 3:
        raise ValueError(f"correlations need at least 3 judgments, not {len(data)}")
    weights = (image_weights(data[images], bootstrap, seed, jackknife=True) if bootstrap
               else None)
    y = data[human].to_numpy(float)
    values: dict[tuple[str, str], float] = {}
    replicates: dict[tuple[str, str], np.ndarray] = {}
    records = []
    for metric in metrics:
        x = data[metric].to_numpy(float)
        of_metric = _replicates(x, y, weights) if weights is not None else {}
        for method, statistic in STATISTICS.items():
            value = values[(metric, method)] = _correlation(x, y, method)
            interval = Interval(float("nan"), float("nan"))
            if weights is not None:
                replicates[(metric, method)] = of_metric[method]
                interval = bca(of_metric[method], value, bootstrap, ci)
            records.append({"metric": metric, "statistic": statistic, "value": value,
                            "ci_low": interval.low, "ci_high": interval.high,
                            "n": len(data), "ci_warning": interval.warning})
    differences = []
    for first, second in itertools.combinations(metrics, 2):
        between = _correlation(data[first].to_numpy(float), data[second].to_numpy(float),
                               "pearson")
        for method, statistic in STATISTICS.items():
            a, b = values[(first, method)], values[(second, method)]
            t = p = float("nan")
            interval = Interval(float("nan"), float("nan"))
            if weights is not None:
                interval = bca(replicates[(first, method)] - replicates[(second, method)],
                               a - b, bootstrap, ci)
            if method == "pearson" and not np.isnan([a, b, between]).any() and len(data) > 3:
                high_r, low_r = (a, b) if a >= b else (b, a)
                t, p = williams_test(high_r, low_r, between, len(data))
            differences.append({"metric": first, "versus": second, "statistic": statistic,
                                "difference": a - b, "ci_low": interval.low,
                                "ci_high": interval.high, "williams_t": t, "williams_p": p,
                                "n": len(data), "ci_warning": interval.warning})
    return pd.DataFrame(records), pd.DataFrame(differences)


def oriented_votes(pairs: pd.DataFrame) -> pd.DataFrame:
    """One row per choice with the pair in a fixed order: first, second (caption ids,
    first < second), image, category, judge, and `vote` = +1 for `first`, -1 for
    `second`, 0 for a tie, whichever order the judge saw them in."""
    for column in ("image", "caption_a_id", "caption_b_id", "choice"):
        if column not in pairs.columns:
            raise ValueError(f"column {column!r} not in pairs (columns: "
                             f"{list(pairs.columns)})")
    unknown = sorted(set(pairs["choice"]) - {"a", "b", "tie"})
    if unknown:
        raise ValueError(f"choice must be a, b or tie, not {unknown[0]!r}")
    a, b = pairs["caption_a_id"].to_numpy(), pairs["caption_b_id"].to_numpy()
    first = np.minimum(a, b)
    choice = pairs["choice"].to_numpy()
    preference = (choice == "a").astype(int) - (choice == "b").astype(int)  # +1 for a
    return pd.DataFrame({
        "first": first, "second": np.maximum(a, b), "image": pairs["image"].to_numpy(),
        "category": (pairs["category"] if "category" in pairs else pd.Series(
            [None] * len(pairs))).to_numpy(),
        "judge": (pairs["judge"] if "judge" in pairs else pd.Series(
            range(len(pairs)))).to_numpy(),
        "vote": np.where(a == first, 1, -1) * preference})


def majority_pairs(pairs: pd.DataFrame) -> pd.DataFrame:
    """One row per pair of captions (in either order) with the human majority: first,
    second (caption ids, first < second), image, category, judges, and `human` = +1 when
    the majority prefers `first`, -1 `second`, 0 no majority (equal a and b votes)."""
    grouped = oriented_votes(pairs).groupby(["first", "second"], sort=False).agg(
        image=("image", "first"), category=("category", "first"), judges=("vote", "size"),
        votes=("vote", "sum")).reset_index()
    grouped["human"] = np.sign(grouped.pop("votes")).astype(int)
    return grouped


def pairwise_accuracy(pairs: pd.DataFrame, values: pd.DataFrame, metrics: Sequence[str], *,
                      bootstrap: int = 1000, ci: float = 0.90, seed: int = 0
                      ) -> pd.DataFrame:
    """Accuracy of each metric's preference against the majority human choice, over all
    pairs and per category, with a bootstrap CI over images (`TIE_RULE` says how ties
    count). `values` has one row per caption id and a column per metric.

    Returns {metric, category, value, ci_low, ci_high, n (pairs with a majority),
    metric_ties, no_majority, ci_warning}."""
    majority = majority_pairs(pairs)
    decided = majority[majority["human"] != 0].reset_index(drop=True)
    categories = ["all", *sorted({c for c in decided["category"] if c is not None
                                  and not pd.isna(c)})]
    records = []
    for metric in metrics:
        if metric not in values.columns:
            raise ValueError(f"no scores of {metric!r} (columns: {list(values.columns)})")
        scores = values[metric]
        machine = np.sign(scores.reindex(decided["first"]).to_numpy(float)
                          - scores.reindex(decided["second"]).to_numpy(float))
        if np.isnan(machine).any():
            raise ValueError(f"{metric} has no score for some captions of the pairs")
        correct = (machine == decided["human"].to_numpy()) + 0.5 * (machine == 0)
        for category in categories:
            mask = (np.ones(len(decided), bool) if category == "all"
                    else (decided["category"] == category).to_numpy())
            of_category = majority if category == "all" else majority[
                majority["category"] == category]
            hits = correct[mask]
            value = float(hits.mean()) if len(hits) else float("nan")
            interval = Interval(float("nan"), float("nan"))
            if bootstrap and mask.any():
                weights = image_weights(decided.loc[mask, "image"], bootstrap, seed,
                                        jackknife=True)
                interval = bca(weights @ hits / weights.sum(axis=1), value, bootstrap, ci)
            records.append({
                "metric": metric, "category": category, "value": value,
                "ci_low": interval.low, "ci_high": interval.high, "n": int(mask.sum()),
                "metric_ties": int((machine[mask] == 0).sum()),
                "no_majority": int((of_category["human"] == 0).sum()),
                "ci_warning": interval.warning})
    return pd.DataFrame(records)
