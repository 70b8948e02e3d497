"""The THUMB paper's analyses as plain functions over a tidy frame of final scores (one row
per caption: image, system, precision, recall, penalties, total, one column per metric).
Bootstrap CIs resample images and are vectorised: every replicate is a row of per-caption
weights (how often its image was drawn), so statistics become matrix products; the
jackknife that a BCa interval needs (`metrics.stats.confidence`) is more rows of weights, each
image (or group of images, past 100) left out once. A metric may be undefined (NaN) for
some captions; its statistics use the captions where it is defined."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import sparse

from metrics.stats.confidence import Interval, bca_ci, jackknife_groups, leave_one_out
from metrics.stats.significance import Verdict, interval_call, p_value_call

HUMAN = ("precision", "recall", "total")
METHODS = ("pearson", "spearman", "kendall-b", "kendall-c")


DRAWN_AT_ONCE = 64  # replicates per multinomial call (its integers, then floats, at once
# would hold the whole matrix twice); the generator's stream is the same in blocks
GATHERED_AT_ONCE = 1 << 25  # bytes of (replicates x captions) weights `weighted_sums` holds


@lru_cache(maxsize=2)  # a report draws for one image count; judgments add another
def _draw_counts(images: int, bootstrap: int, seed: int, jackknife: bool) -> np.ndarray:
    """(bootstrap x images) how often each image is drawn per replicate, with the rows of
    `leave_one_out` below them where `jackknife`. The draws depend only on how many images
    there are, so every table of a report that resamples the same number of images shares
    them: drawn once (read-only) into one matrix, not once per table."""
    rng = np.random.default_rng(seed)
    jackknife_rows = leave_one_out(images) if jackknife else np.zeros((0, images))
    counts = np.empty((bootstrap + len(jackknife_rows), images))
    for start in range(0, bootstrap, DRAWN_AT_ONCE):
        size = min(DRAWN_AT_ONCE, bootstrap - start)
        counts[start:start + size] = rng.multinomial(images, np.full(images, 1 / images),
                                                     size=size)
    counts[bootstrap:] = jackknife_rows
    counts.flags.writeable = False
    return counts


def image_draws(images: Sequence[object], bootstrap: int, seed: int, *,
                jackknife: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Each caption's image index and the (bootstrap x images) draw counts, so sums per
    image can be weighted per image instead of per caption. With `jackknife`, the rows of
    `metrics.stats.confidence.leave_one_out` below them: every image once but one (or one
    group, past `JACKKNIFE_GROUPS` images), the jackknife that gives a BCa interval its
    acceleration (`bca` splits the statistic's values again). A column or array is factorized
    as it is: copied into Python objects first, it cost more than the draws it indexes."""
    codes, uniques = pd.factorize(images if isinstance(images, pd.Series | np.ndarray)
                                  else pd.Series(list(images)))
    return codes, _draw_counts(len(uniques), bootstrap, seed, jackknife)


def image_weights(images: Sequence[object], bootstrap: int, seed: int, *,
                  jackknife: bool = False) -> np.ndarray:
    """(bootstrap x captions) weights: how often each caption's image was drawn when the
    images are resampled with replacement (and the jackknife's rows below, as
    `image_draws` gives them)."""
    codes, counts = image_draws(images, bootstrap, seed, jackknife=jackknife)
    return counts[:, codes]


def weighted_sums(codes: np.ndarray, counts: np.ndarray, columns: Sequence[np.ndarray]
                  ) -> list[np.ndarray]:
    """`replicate_sums` of each column under the weights `counts[:, codes]` (`image_draws`,
    `image_weights`), gathered a block of replicates at a time: the whole matrix is
    replicates times captions, gigabytes on a large project. Each sum is the one the whole
    matrix gives: a replicate's is its row's alone, summed in the gathered layout's order
    (blocks of two rows or more, as einsum sums a single row another way)."""
    replicates = len(counts)
    step = max(2, GATHERED_AT_ONCE // (8 * max(1, len(codes))))
    starts = list(range(0, replicates, step))
    if len(starts) > 1 and replicates - starts[-1] == 1:  # no block of a single row
        starts.pop()
    sums = [np.empty(replicates) for _ in columns]
    for start, end in zip(starts, [*starts[1:], replicates], strict=True):
        block = counts[start:end][:, codes]
        for total, column in zip(sums, columns, strict=True):
            total[start:end] = replicate_sums(block, column)
    return sums


def bca(values: np.ndarray, estimate: float, bootstrap: int, ci: float, *,
        unit: str = "images") -> Interval:
    """The BCa interval of a statistic computed under each row of `image_draws(...,
    jackknife=True)`: the first `bootstrap` values are its replicates, the rest its
    jackknife."""
    return bca_ci(values[:bootstrap], estimate, values[bootstrap:], ci, unit=unit)


def replicate_sums(weights: np.ndarray, values: np.ndarray) -> np.ndarray:
    """weights @ values, one weighted sum per replicate (row), without BLAS: OpenBLAS
    would start its threads for products this size, and on a machine whose cores are
    busy their spinning costs more time than the product itself."""
    return np.einsum("ij,j->i", weights, values)


def weighted_pearson(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Pearson r of x and y under each row of weights (one r per replicate)."""
    total = weights.sum(axis=1)
    mx, my = weights @ x / total, weights @ y / total
    cov = weights @ (x * y) / total - mx * my
    vx = weights @ (x * x) / total - mx**2
    vy = weights @ (y * y) / total - my**2
    with np.errstate(invalid="ignore", divide="ignore"):
        return cov / np.sqrt(vx * vy)


def _value_ranks(x: np.ndarray, by_caption: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct values x replicates) weight and average rank of each distinct value of
    x, and the value of each caption; `by_caption` is the weights transposed (captions x
    replicates, C order). The weights of a value are one sparse product (sums of draw
    counts, so exact); everything else stays as small as the number of distinct values."""
    values, group = np.unique(x, return_inverse=True)
    of_value = sparse.csr_matrix((np.ones(len(x)), (group, np.arange(len(x)))),
                                 shape=(len(values), len(x)))
    per_value = of_value @ by_caption
    ranks = _cumulative_rows(per_value)  # weight of the values up to each value
    ranks -= (per_value - 1) / 2  # ties averaged: whole and half numbers, exact
    return per_value, ranks, group


def _cumulative_rows(rows: np.ndarray) -> np.ndarray:
    """np.cumsum(rows, axis=0) one row at a time: each step is a contiguous vector add,
    where cumsum along the first axis strides through memory (3x slower here)."""
    total = rows.copy()
    for index in range(1, len(total)):
        np.add(total[index - 1], total[index], out=total[index])
    return total


def by_caption(weights: np.ndarray) -> np.ndarray:
    """The (captions x replicates) layout the rank statistics work in: a caption's row
    and a value's row are contiguous, so gathers and sums over them are row operations."""
    return np.ascontiguousarray(weights.T)


def weighted_ranks(x: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties averaged) of x in each weighted replicate: what
    scipy.stats.rankdata gives on the resampled data, for every replicate at once."""
    _, ranks, group = _value_ranks(x, by_caption(weights))
    return ranks[group].T


@dataclass
class _Centred:
    """One quantity's bootstrap statistics for the Spearman CI: its weighted ranks centred
    on each replicate's mean (captions x replicates), and their weighted variance."""

    centred: np.ndarray
    variance: np.ndarray

    @classmethod
    def of(cls, x: np.ndarray, by_caption: np.ndarray, total: np.ndarray) -> _Centred:
        per_value, centred, group = _value_ranks(x, by_caption)
        centred -= np.einsum("ij,ij->j", per_value, centred) / total
        return cls(centred[group], np.einsum("ij,ij,ij->j", per_value, centred, centred))

    def weighted(self, by_caption: np.ndarray) -> np.ndarray:
        """The weights times the centred ranks (in place: `centred` is not needed again
        for this quantity once its products with the others are taken from this)."""
        return np.multiply(self.centred, by_caption, out=self.centred)


def _spearman_replicates(weighted_x: np.ndarray, x: _Centred, y: _Centred) -> np.ndarray:
    """Spearman's rho per replicate; `weighted_x` is the weights times x's centred ranks."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.einsum("ij,ij->j", weighted_x, y.centred)
                / np.sqrt(x.variance * y.variance))


def correlation(x: np.ndarray, y: np.ndarray, method: str) -> float:
    """One of `METHODS` (see `correlations`)."""
    if method not in METHODS:
        raise ValueError(f"unknown correlation method {method!r}")
    return correlations(x, y, (method,))[method]


def correlations(x: np.ndarray, y: np.ndarray, methods: Sequence[str] = METHODS
                 ) -> dict[str, float]:
    """Pearson's r, Spearman's rho, Kendall's tau-b and tau-c as SciPy's pearsonr,
    spearmanr and kendalltau compute them (same steps, same counts; both taus from one
    count of pairs), without importing scipy.stats, whose import alone costs more than a
    whole report's statistics. NaN when either side is constant, has fewer than two
    values or holds a NaN."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if (len(x) < 2 or np.isnan(x).any() or np.isnan(y).any()
            or (x == x[0]).all() or (y == y[0]).all()):
        return dict.fromkeys(methods, float("nan"))
    result = {}
    if "pearson" in methods:
        result["pearson"] = _pearson(x, y)
    if "spearman" in methods:
        ranks = np.column_stack([_average_ranks(x), _average_ranks(y)])
        result["spearman"] = float(np.corrcoef(ranks, rowvar=False)[1, 0])
    if "kendall-b" in methods or "kendall-c" in methods:
        result["kendall-b"], result["kendall-c"] = _kendall_taus(x, y)
    return {method: result[method] for method in methods}


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    """scipy.stats.pearsonr's statistic: centred, scaled by the largest deviation before
    the norms (no overflow), then one dot product."""
    xm, ym = x - x.mean(), y - y.mean()
    xmax, ymax = np.abs(xm).max(), np.abs(ym).max()
    normxm = xmax * np.linalg.norm(xm / xmax, axis=-1)
    normym = ymax * np.linalg.norm(ym / ymax, axis=-1)
    return float(np.clip(np.vecdot(xm / normxm, ym / normym), -1.0, 1.0))


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks, ties averaged (scipy.stats.rankdata's default)."""
    _, group, counts = np.unique(x, return_inverse=True, return_counts=True)
    below = np.cumsum(counts) - counts
    return (below + (counts + 1) / 2)[group]


def _tied_pairs(dense: np.ndarray) -> int:
    counts = np.bincount(dense).astype(np.int64)
    return int((counts * (counts - 1) // 2).sum())


FEW_VALUES = 32  # up to this many distinct values, inversions are counted value by value


def _inversions(values: np.ndarray) -> int:
    """Pairs i < j with values[i] > values[j] (dense ranks 0, 1, ...). With few distinct
    values (Likert scores), one running count per value; otherwise by merging blocks of
    doubling size, each element of a right half counting the greater elements of its left
    half with one search over keys offset by block, O(n log^2 n) in all."""
    span = int(values.max()) + 1 if len(values) else 1
    if span <= FEW_VALUES:
        return sum(int(np.cumsum(values > level)[values == level].sum())
                   for level in range(span - 1))
    position = np.arange(len(values))
    total, size = 0, 1
    while size < len(values):
        block = position // (2 * size)
        right = (position // size) % 2 == 1
        left_keys = np.sort((block * span + values)[~right])
        block_ends = np.searchsorted(left_keys, (block[right] + 1) * span, side="left")
        not_greater = np.searchsorted(left_keys, (block * span + values)[right],
                                      side="right")
        total += int((block_ends - not_greater).sum())
        size *= 2
    return total


def _kendall_taus(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Kendall's tau-b and tau-c with scipy.stats.kendalltau's counts and formulas: items
    sorted by x then y, discordant pairs are the inversions of y (x and y swapped when y
    has more distinct values: the counts are symmetric, and fewer values count faster)."""
    _, dense_x = np.unique(x, return_inverse=True)
    _, dense_y = np.unique(y, return_inverse=True)
    size = len(dense_x)
    first, second = ((dense_x, dense_y) if dense_y.max() <= dense_x.max()
                     else (dense_y, dense_x))
    order = np.lexsort((second, first))
    first, second = first[order], second[order]
    discordant = _inversions(second)
    runs = np.r_[True, (first[1:] != first[:-1]) | (second[1:] != second[:-1]), True]
    joint = np.diff(np.nonzero(runs)[0]).astype(np.int64)
    both_tied = int((joint * (joint - 1) // 2).sum())
    x_tied, y_tied = _tied_pairs(dense_x), _tied_pairs(dense_y)
    pairs = size * (size - 1) // 2
    if x_tied == pairs or y_tied == pairs:
        return float("nan"), float("nan")
    concordance = pairs - x_tied - y_tied + both_tied - 2 * discordant
    # one square root of the product (SciPy divides by two): τ of a ranking with itself
    # is then exactly 1, not 0.9999999999999999
    tau_b = concordance / np.sqrt(float(pairs - x_tied) * float(pairs - y_tied))
    classes = min(int(dense_x.max()) + 1, int(dense_y.max()) + 1)
    tau_c = 2 * concordance / (size**2 * (classes - 1) / classes)
    return (float(np.minimum(1.0, max(-1.0, tau_b))),
            float(np.minimum(1.0, max(-1.0, tau_c))))


def replicate_correlations(x: np.ndarray, y: np.ndarray, method: str,
                           weights: np.ndarray) -> np.ndarray:
    """The correlation under each row of weights (a bootstrap replicate each). Pearson and
    Spearman are matrix products; Kendall's tau is one O(n log n) pass per replicate."""
    if method == "pearson":
        return weighted_pearson(x, y, weights)
    if method == "spearman":
        columns = by_caption(weights)
        total = columns.sum(axis=0)
        ranked_y = _Centred.of(y, columns, total)
        ranked = _Centred.of(x, columns, total)
        return _spearman_replicates(ranked.weighted(columns), ranked, ranked_y)
    if method in ("kendall-b", "kendall-c"):
        return kendall_replicates(x, y, weights)[method[-1]]
    raise ValueError(f"unknown correlation method {method!r}")


def _tie_pairs(values: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per replicate: pairs tied in `values` and how many distinct values were drawn."""
    per_value, _, _ = _value_ranks(values, by_caption(weights))
    return (per_value * (per_value - 1) / 2).sum(axis=0), (per_value > 0).sum(axis=0)


def kendall_replicates(x: np.ndarray, y: np.ndarray, weights: np.ndarray
                       ) -> dict[str, np.ndarray]:
    """tau-b and tau-c under each row of weights (integer draw counts), as SciPy gives them
    on the resampled data: one O(n log n) tau-b per replicate; tau-c follows from the same
    concordance count C - D = tau-b * sqrt((n0 - n1)(n0 - n2))."""
    counts = weights.astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        tau_b = np.array([correlation(np.repeat(x, row), np.repeat(y, row), "kendall-b")
                          for row in counts])
        n = counts.sum(axis=1).astype(float)
        pairs = n * (n - 1) / 2
        (ties_x, distinct_x), (ties_y, distinct_y) = _tie_pairs(x, counts), _tie_pairs(y, counts)
        concordance = tau_b * np.sqrt((pairs - ties_x) * (pairs - ties_y))
        m = np.minimum(distinct_x, distinct_y).astype(float)
        tau_c = 2 * concordance / (n**2 * (m - 1) / m)
    return {"b": tau_b, "c": tau_c}


def correlation_ci(x: np.ndarray, y: np.ndarray, method: str, weights: np.ndarray,
                   ci: float, kendall: bool = False, *, bootstrap: int,
                   estimate: float | None = None) -> Interval:
    """BCa bootstrap CI; `weights` are `image_weights(..., jackknife=True)`, their first
    `bootstrap` rows the resamples. For Kendall's tau only when `kendall` is set (one
    O(n log n) pass per replicate, which the THUMB report does not spend), else NaN."""
    if method.startswith("kendall") and not kendall:
        return Interval(float("nan"), float("nan"))
    if estimate is None:
        estimate = correlation(x, y, method)
    return bca(replicate_correlations(x, y, method, weights), estimate, bootstrap, ci)


def williams_test(r12: float, r13: float, r23: float, n: int) -> tuple[float, float]:
    """Williams (1959) test that r12 > r13 for dependent correlations sharing variable 1
    (the human score; 2 and 3 are two metrics with correlation r23). One-sided p."""
    if n <= 3:
        raise ValueError("the Williams test needs more than 3 items")
    det = 1 - r12**2 - r13**2 - r23**2 + 2 * r12 * r13 * r23
    mean = (r12 + r13) / 2
    t = (r12 - r13) * np.sqrt((n - 1) * (1 + r23)) / np.sqrt(
        2 * (n - 1) / (n - 3) * det + mean**2 * (1 - r23) ** 3)
    from scipy.special import stdtr  # scipy.stats.t.sf is stdtr(df, -t)

    return float(t), float(stdtr(n - 3, -t))


def system_table(data: pd.DataFrame, metrics: Sequence[str], *, scores: Sequence[str],
                 bootstrap: int, ci: float, seed: int) -> pd.DataFrame:
    """THUMB Table 2: per system, the mean of each human score and penalty in `scores`
    (a rubric's), of Total and of each metric, each with a BCa bootstrap CI over images
    (`COLUMN_ci_low`, `COLUMN_ci_high`, `COLUMN_ci_warning`; none for a metric undefined
    for some of the system's captions, whose mean is over the captions it is defined for:
    an image without references leaves the text metrics' means of the others)."""
    rows = []
    for system, part in data.groupby("system", sort=False):
        columns = {column: part[column].to_numpy(dtype=float)
                   for column in (*scores, "total", *metrics)}
        defined = [column for column, values in columns.items()
                   if bootstrap and not np.isnan(values).any()]
        means: dict[str, np.ndarray] = {}
        if defined:
            codes, counts = image_draws(part["image_id"], bootstrap, seed, jackknife=True)
            # the draws per replicate: whole numbers, so their sum is exact in any order
            drawn, *sums = weighted_sums(codes, counts, [np.ones(len(part)),
                                                         *(columns[c] for c in defined)])
            means = {column: total / drawn for column, total in zip(defined, sums,
                                                                    strict=True)}
        row: dict[str, object] = {"system": system, "n": len(part)}
        for column, values in columns.items():
            if column in metrics:  # over the captions the metric is defined for
                values = values[~np.isnan(values)]
            row[column] = float(values.mean()) if len(values) else float("nan")
            if column in means:
                (row[f"{column}_ci_low"], row[f"{column}_ci_high"],
                 row[f"{column}_ci_warning"]) = bca(means[column], row[column], bootstrap, ci)
        rows.append(row)
    return pd.DataFrame(rows).sort_values("total", ascending=False).reset_index(drop=True)


def system_differences(data: pd.DataFrame, *, bootstrap: int, ci: float, seed: int
                       ) -> pd.DataFrame:
    """Every pair of systems, higher mean Total first: the difference of their mean Totals
    over the images both captioned, with a paired BCa bootstrap CI (an image drawn brings
    both systems' captions of it) and the call on it (`metrics.stats.significance.interval_call`:
    `verdict` significant, not significant, too few or borderline, `verdict_reason`;
    `significant` is the verdict "significant"; none of them without a bootstrap). A tidy
    frame: system, versus, difference, ci_low, ci_high, ci_warning, images, verdict,
    verdict_reason, significant."""
    order = data.groupby("system", sort=False)["total"].mean().sort_values(ascending=False)
    images, _ = pd.factorize(data["image_id"])  # pairs are picked in arrays, not frames
    all_totals = data["total"].to_numpy(dtype=float)
    rows_of = {system: (data["system"] == system).to_numpy() for system in order.index}
    captioned = {system: np.bincount(images[rows], minlength=images.max() + 1) > 0
                 for system, rows in rows_of.items()}  # the images a system captioned
    rows = []
    for index, system in enumerate(order.index):
        for versus in order.index[index + 1:]:
            shared = captioned[system] & captioned[versus]
            in_pair = (rows_of[system] | rows_of[versus]) & shared[images]
            if not in_pair.any():
                continue
            first = rows_of[system][in_pair].astype(float)
            totals = all_totals[in_pair]
            difference = float(totals[first == 1].mean() - totals[first == 0].mean())
            row = {"system": system, "versus": versus, "difference": difference,
                   "ci_low": np.nan, "ci_high": np.nan, "ci_warning": None,
                   "images": int(shared.sum()), "verdict": None, "verdict_reason": None}
            if bootstrap:
                codes, counts = image_draws(images[in_pair], bootstrap, seed, jackknife=True)
                first_totals, firsts, second_totals, seconds = weighted_sums(
                    codes, counts, [totals * first, first, totals * (1 - first), 1 - first])
                with np.errstate(invalid="ignore", divide="ignore"):
                    replicates = first_totals / firsts - second_totals / seconds
                interval = bca(replicates, difference, bootstrap, ci)
                call = interval_call(interval, replicates[:bootstrap], difference,
                                     replicates[bootstrap:], ci, units=row["images"])
                row["ci_low"], row["ci_high"], row["ci_warning"] = interval
                row["verdict"], row["verdict_reason"] = call.verdict.value, call.reason
            rows.append(row)
    columns = ["system", "versus", "difference", "ci_low", "ci_high", "ci_warning",
               "images", "verdict", "verdict_reason"]
    table = pd.DataFrame(rows, columns=columns)
    table["significant"] = table["verdict"] == Verdict.SIGNIFICANT
    return table


def strict_best_worst(data: pd.DataFrame,
                      image_captions: Mapping[object, int] | None = None) -> pd.DataFrame:
    """THUMB Table 3: how often a system is best (worst) in its image's caption set in both
    P and R: its P and its R are each at least (at most) every other caption's. An image
    counts only when at least two of its captions are rated and, where `image_captions`
    gives how many captions each image has, every one of them: a caption alone is compared
    with nothing, and one compared with only part of its set (an early report) may be
    beaten by a caption not yet rated, so neither is best or worst."""
    by_image = data.groupby("image_id")
    p, r = data["precision"], data["recall"]
    rated = (p.notna() & r.notna()).groupby(data["image_id"]).transform("sum")
    compared = rated >= 2
    if image_captions is not None:
        compared &= rated >= data["image_id"].map(image_captions).fillna(0)
    best = compared & (p == by_image["precision"].transform("max")) & (
        r == by_image["recall"].transform("max"))
    worst = compared & (p == by_image["precision"].transform("min")) & (
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
    by_caption: np.ndarray | None  # (captions x replicates) weights
    total: np.ndarray | None = None
    ranked: dict[str, _Centred] = field(default_factory=dict)
    moments: np.ndarray | None = None  # replicate means of each human score and its square

    def __post_init__(self) -> None:
        if self.by_caption is not None:
            self.total = self.by_caption.sum(axis=0)
            self.ranked = {name: _Centred.of(y, self.by_caption, self.total)
                           for name, y in self.humans.items()}
            self.moments = self._means([v for y in self.humans.values() for v in (y, y * y)])

    def _means(self, columns: list[np.ndarray]) -> np.ndarray:
        """(replicates x columns) weighted means of each column."""
        assert self.by_caption is not None and self.total is not None
        return np.column_stack([replicate_sums(self.by_caption.T, column)
                                for column in columns]) / self.total[:, None]

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
    tau gets a point estimate only; BCa intervals, `ci_warning` saying why one deserves
    less trust). Each quantity is ranked once per subset; the jackknife of the BCa
    intervals is computed with the resamples, as more rows of weights."""
    records = []
    for subset, mask in subsets.items() if metrics else ():  # no metric: nothing to draw
        part = data[mask]
        columns = codes = None
        if bootstrap:
            codes, counts = image_draws(part["image_id"], bootstrap, seed, jackknife=True)
            columns = by_caption(counts)[codes]
        humans = {dimension: part[dimension].to_numpy(dtype=float) for dimension in HUMAN}
        samples: dict[bytes, _Sample] = {}
        for metric in metrics:
            values = part[metric].to_numpy(dtype=float)
            defined = ~np.isnan(values)
            sample = samples.get(defined.tobytes())
            if sample is None:
                sample = samples[defined.tobytes()] = _Sample(
                    {name: y[defined] for name, y in humans.items()},
                    # every caption scored (as usual): the weights themselves, not a copy
                    columns if columns is None or defined.all() else columns[defined])
            x = values[defined]
            replicates: dict[str, dict[str, np.ndarray]] = {}
            present = None  # the jackknife's groups (images) with a caption where the
            if codes is not None:  # metric is defined: leaving out any other changes nothing
                groups = jackknife_groups(codes.max(initial=-1) + 1)
                present = np.zeros(groups.max(initial=-1) + 1, dtype=bool)
                present[groups[codes[defined]]] = True
            if sample.by_caption is not None:
                ranked = _Centred.of(x, sample.by_caption, sample.total)
                weighted = ranked.weighted(sample.by_caption)
                replicates = {"pearson": sample.pearson(x), "spearman": {
                    name: _spearman_replicates(weighted, ranked, human)
                    for name, human in sample.ranked.items()}}
            for dimension, y in sample.humans.items():
                for method, r in correlations(x, y).items():
                    interval = Interval(float("nan"), float("nan"))
                    if method in replicates:
                        values_of = replicates[method][dimension]
                        jackknife = values_of[bootstrap:]  # none for a single image
                        interval = bca_ci(values_of[:bootstrap], r, jackknife[present]
                                          if len(jackknife) else jackknife, ci)
                    records.append({"metric": metric, "dimension": dimension,
                                    "subset": subset, "method": method, "r": r,
                                    "ci_low": interval.low, "ci_high": interval.high,
                                    "n": len(x), "ci_warning": interval.warning})
    return pd.DataFrame(records, columns=["metric", "dimension", "subset", "method", "r",
                                          "ci_low", "ci_high", "n", "ci_warning"])


def _pearson_matrix(values: np.ndarray) -> np.ndarray:
    """Pearson's r between every two columns; NaN (not a warning) where a column is
    constant, as `correlations` gives."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.corrcoef(values, rowvar=False)


def williams_records(data: pd.DataFrame, metrics: Sequence[str],
                     subsets: dict[str, pd.Series]) -> pd.DataFrame:
    """For each pair of metrics and human dimension: is the first metric's Pearson r with
    the human score higher than the second's? (Williams test, one-sided, over the captions
    where both metrics are defined.) All correlations of a subset come from one matrix.
    `verdict`: the call on it (`metrics.stats.significance.p_value_call`), so that no reader of
    the records applies its own rule."""
    records = []
    for subset, mask in subsets.items():
        part = data[mask]
        if len(part) <= 3:  # the test is undefined for so few captions: no rows
            continue
        columns = [*HUMAN, *metrics]
        values = part[columns].to_numpy(dtype=float)
        complete = _pearson_matrix(values) if not np.isnan(values).any() else None
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
                        matrix = _pearson_matrix(rows)
                    r1, r2, r12 = matrix[0, 1], matrix[0, 2], matrix[1, 2]
                    t, p = williams_test(r1, r2, r12, len(rows))
                    records.append({"metric": first, "versus": second, "dimension": dimension,
                                    "subset": subset, "r_metric": r1, "r_versus": r2,
                                    "t": t, "p": p, "n": len(rows),
                                    "verdict": p_value_call(p, len(rows)).verdict.value})
    return pd.DataFrame(records, columns=["metric", "versus", "dimension", "subset",
                                          "r_metric", "r_versus", "t", "p", "n", "verdict"])


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
    first, second = data.index.get_indexer(first), data.index.get_indexer(second)
    totals = data["total"].to_numpy()
    human = np.sign(totals[first] - totals[second])
    draws = (image_draws(image, bootstrap, seed, jackknife=True) if bootstrap and len(image)
             else None)
    records = []
    for metric in metrics:
        values = data[metric].to_numpy(float)
        difference = values[first] - values[second]
        scored = ~np.isnan(difference)
        machine = np.sign(difference)
        correct = (machine == human).astype(float)
        tie = ((machine == 0) | ~scored).astype(float)
        decided = len(human) - tie.sum()
        accuracy = correct.sum() / decided if decided else float("nan")
        interval = Interval(float("nan"), float("nan"))
        if draws is not None:
            codes, counts = draws
            # pair counts per image times draw counts: whole numbers, so exact
            correct_of, decided_of = (np.bincount(codes, weights=v, minlength=counts.shape[1])
                                      for v in (correct, 1 - tie))
            with np.errstate(invalid="ignore", divide="ignore"):
                replicate = replicate_sums(counts, correct_of) / replicate_sums(counts,
                                                                                decided_of)
            interval = bca(replicate, accuracy, bootstrap, ci)
        records.append({"metric": metric, "accuracy": float(accuracy),
                        "ci_low": interval.low, "ci_high": interval.high,
                        "pairs": int(scored.sum()), "ties": int((machine[scored] == 0).sum()),
                        "ci_warning": interval.warning})
    return pd.DataFrame(records, columns=["metric", "accuracy", "ci_low", "ci_high", "pairs",
                                          "ties", "ci_warning"])
