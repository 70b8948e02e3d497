"""Retrieval metrics on many-to-many positives, as eccv-caption defines them, vectorised.

For a query with R distinct positives (all of them, ranked or not) and its ranked list:
- `recall@k`: 1 if any positive is in the top k (R^V, the COCO convention), else 0;
- `recall-share@k`: |top-k ∩ positives| / R (the R of the NCS paper);
- `r-precision`: |top-R ∩ positives| / min(R, length of the list);
- `map@r`: (1/R)·Σ_{r≤R} P@r·rel(r) (rel = 0 past the end of a short list);
- `pmrp`: R-precision on plausible-match positives with R capped (ECCV Table 4: 50).
Each is averaged over the positive set's queries that have at least one positive (a query
with an empty list is left out and not counted in `n`). A fold set (COCO 1K) filters every
ranking to the fold's items and averages the folds' means. Bootstrap CIs (BCa, the jackknife
in closed form) resample queries (within each fold), paired across metrics: each list of
queries that a fold of a direction resamples is drawn once per evaluation, as index draws
seeded by the seed, the direction and the queries, and shared by every metric and every
set over the same queries (COCO 5K's and CxC's image queries, a relevance matrix's); `mean`
averages i2t and t2i replicate by replicate, `rsum` adds R@1, R@5 and R@10 of both
directions.

Semantic metrics (Biten et al., WACV 2022) grade retrieved items by a relevance matrix
φ(image, caption) (a captioning metric of the caption against the image's references):
- `ncs@k`, three averagings over queries (`NCS_AVERAGINGS`; the evaluation's signature
  says which): `authors` (the default) as the authors' released code (`ncs_metric`,
  `metric.py`, the NCS branch of `calculate_ranks`) computes the paper's tables: per
  query mean φ(top-k retrieved) / (mean φ(the k most relevant items) + 1e-10), averaged
  over every query (a query whose best k are all 0 counts 0; `n` counts every query);
  `eq5` the paper's Eq. 5, each query's Σ φ(top-k retrieved) / Σ φ(its k most relevant
  items), averaged over the queries where it is defined (a query whose best k are all 0
  is left out and not counted in `n`); `ratio` Σ_q Σ φ(top-k retrieved of q) / Σ_q Σ φ(the
  k most relevant items for q), a ratio of sums over queries (the authors' earlier line,
  commented out in their code since early 2021; `n` counts every query). A place past
  the end of a short list holds φ = 0. φ is summed in float64 whatever the matrix's dtype
  (relevance files hold float32);
- `sr@k` with m: |top-k ∩ the m most relevant items| / m, averaged over queries.
"Most relevant" ranks by φ, ties broken by ascending id. Without ground truth (`no-gt`),
the query's ground-truth items are removed from both the ranking and the ideal list.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from itertools import chain, compress

import numpy as np

from metrics.arrays import sorted_positions
from metrics.retrieval.positives import Id, PositiveSet
from metrics.retrieval.rankings import Ranked, RankingsError, ScoredRankings
from metrics.stats.confidence import bca_ci, check_ci, resample_counts

DEFAULT_KS = (1, 5, 10)
RSUM_KS = (1, 5, 10)
PMRP_CAP = 50
DIRECTIONS = ("i2t", "t2i")
BOOTSTRAP_CHUNK_BYTES = 2**20  # the resampling counts of one chunk of replicates (in cache)
NCS_AVERAGINGS = ("authors", "eq5", "ratio")
DEFAULT_NCS_AVERAGING = "authors"  # the authors' public code, which gave the paper's tables
# Earlier names still read from stored signatures and accepted on the command line.
NCS_AVERAGING_ALIASES = {"per-query": "eq5"}
AUTHORS_NCS_EPSILON = 1e-10  # added to the ideal mean in the authors' code

Key = tuple[str, int | None, int | None]  # metric, k, m


@dataclass
class Sample:
    """Per-query values of one metric over the folds of one set and direction; a ratio
    metric keeps numerator and denominator (value: Σ numerators / Σ denominators, and the
    same sums over each bootstrap replicate's resampled queries). `left_out` queries are
    in the arrays (so every metric of a direction resamples the same queries) but are not
    counted in `n`: Eq. 5 NCS's undefined queries, whose numerator and denominator
    are both 0. `queries` are each fold's query ids in the arrays' order: what a
    replicate resamples (samples over the same queries share their draws)."""

    folds: list[np.ndarray] = field(default_factory=list)
    denominators: list[np.ndarray] | None = None
    left_out: int = 0
    queries: list[tuple[Id, ...]] = field(default_factory=list)

    @property
    def n(self) -> int:
        return sum(len(f) for f in self.folds) - self.left_out

    def value(self) -> float:
        return self._combine([f.sum() for f in self.folds], None if self.denominators is None
                             else [d.sum() for d in self.denominators],
                             [len(f) for f in self.folds])

    @property
    def width(self) -> int:
        """How many per-query arrays a replicate sums: values (and denominators)."""
        return 1 if self.denominators is None else 2

    def columns(self, fold: int) -> list[np.ndarray]:
        """The per-query arrays of one fold that a replicate sums, in `width` order."""
        parts = [self.folds[fold]]
        if self.denominators is not None:
            parts.append(self.denominators[fold])
        return parts

    def from_sums(self, sums: Sequence[np.ndarray]) -> np.ndarray:
        """One value per replicate from sums[f], (replicates x `width`): each replicate's
        weighted sums of this sample's `columns(f)`."""
        return self._combine([s[:, 0] for s in sums], None if self.denominators is None
                             else [s[:, 1] for s in sums], [len(f) for f in self.folds])

    def jackknife(self) -> list[np.ndarray]:
        """Per fold, the value with each of its queries left out in turn (the other folds
        whole): the jackknife of the BCa interval, in closed form (O(queries))."""
        sums = [f.sum() for f in self.folds]
        dens = None if self.denominators is None else [d.sum() for d in self.denominators]
        with np.errstate(invalid="ignore", divide="ignore"):
            whole = [s / (len(f) if dens is None else dens[i])
                     for i, (s, f) in enumerate(zip(sums, self.folds, strict=True))]
            result = []
            for index, fold in enumerate(self.folds):
                below = (len(fold) - 1 if dens is None
                         else dens[index] - self.denominators[index])  # type: ignore[index]
                left = (sums[index] - fold) / below
                result.append((sum(whole) - whole[index] + left) / len(self.folds))
        return result

    @staticmethod
    def _combine(sums, dens, sizes):
        with np.errstate(invalid="ignore", divide="ignore"):
            if dens is None:
                return np.mean([s / n for s, n in zip(sums, sizes, strict=True)], axis=0)
            return np.mean([s / d for s, d in zip(sums, dens, strict=True)], axis=0)


# --- positives -------------------------------------------------------------------------

def canonical_order(ids: Iterable[Id]) -> tuple[Id, ...]:
    """Ids in one order whatever order a file gives them in (integers ascending, then
    strings), so that two sets over the same queries resample the same list."""
    ids = list(ids)
    try:
        return tuple(sorted(ids))  # ids of one kind compare directly
    except TypeError:  # integers and strings
        return (*sorted(i for i in ids if isinstance(i, int)),
                *sorted(i for i in ids if isinstance(i, str)))


def resampled_queries(positives: Mapping[Id, tuple[Id, ...]]) -> tuple[Id, ...]:
    """The queries of a positive map that have positives, in canonical order: the order of
    their per-query values, and the units a bootstrap replicate resamples."""
    return canonical_order(compress(positives.keys(), positives.values()))  # with items


class MissingLists(RankingsError):
    """Rankings that lack some queries' lists; `direction` says which file the caller
    names (the message cannot: these functions see no files)."""

    def __init__(self, message: str, direction: str) -> None:
        super().__init__(message)
        self.direction = direction


def _query_positives(ranked: Ranked, positives: Mapping[Id, tuple[Id, ...]], source: str,
                     direction: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows of the queries with positives (`resampled_queries`), R per query, and the
    (query, item index) pairs of the positives that the rankings know."""
    queries = resampled_queries(positives)
    rows = ranked.rows_of(queries)
    if (rows < 0).any():
        missing = [q for q, row in zip(queries, rows.tolist(), strict=True) if row < 0]
        raise MissingLists(f"the {direction} rankings have no list for {len(missing)} of "
                           f"the {len(queries)} queries of {source} (e.g. {missing[0]!r})",
                           direction)
    sizes = np.fromiter(map(len, map(positives.__getitem__, queries)), dtype=np.int64,
                        count=len(queries))
    pair_item = ranked.indices_of(list(chain.from_iterable(map(positives.__getitem__,
                                                                queries))))
    pair_query = np.repeat(np.arange(len(queries), dtype=np.int64), sizes)
    known = pair_item >= 0
    return rows, sizes, pair_query[known], pair_item[known]


def _relevance(top: np.ndarray, pair_query: np.ndarray, pair_item: np.ndarray, width: int
               ) -> np.ndarray:
    """(queries x depth) booleans: is the item at that rank a positive of the query (a
    binary search of each (query, item) key among the sorted positive pairs' keys)."""
    keys = np.arange(len(top), dtype=np.int64)[:, None] * width + top
    positives = np.sort(pair_query * width + pair_item)
    return (sorted_positions(positives, keys) >= 0) & (top >= 0)


def _allowed(ranked: Ranked, restriction: frozenset[Id] | None) -> np.ndarray | None:
    if restriction is None:
        return None
    indices = ranked.indices_of(tuple(restriction))
    allowed = np.zeros(len(ranked.items), dtype=bool)
    allowed[indices[indices >= 0]] = True
    return allowed


def positive_scores(ranked: Ranked, positives: PositiveSet, direction: str, *,
                    ks: Sequence[int] = DEFAULT_KS) -> dict[Key, np.ndarray]:
    """Per-query R@k, recall-share@k, R-precision and mAP@R of one direction, over the
    `resampled_queries` of its positives, in that order."""
    rows, sizes, pair_query, pair_item = _query_positives(
        ranked, positives.direction(direction), positives.name, direction)
    depth = max(max(ks), int(sizes.max(initial=1)))
    top = ranked.top(rows, depth, _allowed(ranked, positives.restriction(direction)))
    relevant = _relevance(top, pair_query, pair_item, len(ranked.items) + 1)
    hits = np.cumsum(relevant, axis=1)
    result: dict[Key, np.ndarray] = {}
    for k in ks:
        result[("recall@k", k, None)] = (hits[:, k - 1] > 0).astype(float)
        result[("recall-share@k", k, None)] = hits[:, k - 1] / sizes
    result[("r-precision", None, None)] = _r_precision(top, hits, sizes)
    ranks = np.arange(1, depth + 1)
    within = ranks[None, :] <= sizes[:, None]
    result[("map@r", None, None)] = (relevant * within * hits / ranks).sum(axis=1) / sizes
    return result


def _r_precision(top: np.ndarray, hits: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    listed = np.minimum((top >= 0).sum(axis=1), sizes)
    found = hits[np.arange(len(hits)), sizes - 1]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(listed > 0, found / np.maximum(listed, 1), 0.0)


def pmrp_scores(ranked: Ranked, plausible: PositiveSet, direction: str, *,
                cap: int | None = PMRP_CAP) -> dict[Key, np.ndarray]:
    """Per-query PMRP: R-precision on plausible matches with R = min(R, cap) (no cap:
    the eccv-caption package's `pmrp`), over the `resampled_queries` of `plausible`."""
    rows, sizes, pair_query, pair_item = _query_positives(
        ranked, plausible.direction(direction), plausible.name, direction)
    if cap is not None:
        sizes = np.minimum(sizes, cap)
    top = ranked.top(rows, int(sizes.max(initial=1)), None)
    hits = np.cumsum(_relevance(top, pair_query, pair_item, len(ranked.items) + 1), axis=1)
    return {("pmrp", None, None): _r_precision(top, hits, sizes)}


# --- semantic relevance ----------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class RelevanceView:
    """φ for one direction: rows are the direction's queries, columns its items."""

    queries: tuple[Id, ...]
    items: tuple[Id, ...]
    values: np.ndarray


def semantic_scores(ranked: Ranked, relevance: RelevanceView, *,
                    ground_truth: Mapping[Id, tuple[Id, ...]] | None,
                    ks: Sequence[int] = DEFAULT_KS, ms: Sequence[int] = (1, 2, 3),
                    ) -> tuple[dict[Key, np.ndarray], dict[Key, np.ndarray]]:
    """Per-query (numerators, denominators) of NCS@k (float64: Σ φ(top-k retrieved),
    Σ φ(the k most relevant items); `ncs_sample` averages them) and per-query SR@k(m)
    (denominator None). Every ranked query and item must be in the relevance matrix;
    `ground_truth` (query → items), when given, is removed from both the ranking and the
    ideal list."""
    ideal_ranking = ScoredRankings(relevance.queries, relevance.items, relevance.values)
    row_of, column_of = ideal_ranking.row_of, ideal_ranking.index_of
    for what, ids, known in (("query", ranked.queries, row_of), ("item", ranked.items,
                                                                  column_of)):
        missing = [i for i in ids if i not in known]
        if missing:
            raise RankingsError(f"the relevance matrix lacks {len(missing)} ranked {what} "
                                f"id(s) (e.g. {missing[0]!r})")
    column = np.fromiter((column_of[i] for i in ranked.items), dtype=np.int64,
                         count=len(ranked.items))
    rows = np.arange(len(ranked.queries))
    relevance_rows = np.fromiter((row_of[q] for q in ranked.queries), dtype=np.int64,
                                 count=len(rows))
    excluded = [() if ground_truth is None else tuple(
        column_of[i] for i in ground_truth.get(q, ()) if i in column_of) for q in ranked.queries]
    extra = max(map(len, excluded), default=0)
    depth = max(max(ks), max(ms))
    top = ranked.top(rows, depth + extra, None)
    retrieved = _drop_excluded(np.where(top >= 0, column[np.maximum(top, 0)], -1), excluded,
                               depth)
    ideal = _drop_excluded(ideal_ranking.top(relevance_rows, depth + extra, None), excluded,
                           depth)
    # φ of the retrieved and the ideal items only, widened to float64 before any sum
    # (exact for float32 values); nothing past the end of a list or of the pool.
    phi_rows = relevance_rows[:, None]
    gain = np.where(retrieved >= 0, relevance.values[phi_rows, np.maximum(retrieved, 0)]
                    .astype(np.float64), 0.0)
    best = np.where(ideal >= 0, relevance.values[phi_rows, np.maximum(ideal, 0)]
                    .astype(np.float64), 0.0)
    numerators: dict[Key, np.ndarray] = {}
    denominators: dict[Key, np.ndarray] = {}
    for k in ks:
        numerators[("ncs@k", k, None)] = gain[:, :k].sum(axis=1)
        denominators[("ncs@k", k, None)] = best[:, :k].sum(axis=1)
    for m in ms:
        relevant_count = np.maximum((ideal[:, :m] >= 0).sum(axis=1), 1)
        for k in ks:
            keys = retrieved[:, :k, None]
            found = ((keys == ideal[:, None, :m]) & (keys >= 0)).any(axis=1).sum(axis=1)
            numerators[("sr@k", k, m)] = found / relevant_count
    return numerators, denominators


def _drop_excluded(top: np.ndarray, excluded: Sequence[tuple[int, ...]], depth: int
                   ) -> np.ndarray:
    """Remove each row's excluded items, keep the first `depth` of the rest."""
    if not any(excluded):
        return top[:, :depth]
    result = np.full((len(top), depth), -1, dtype=np.int64)
    for row, skip in enumerate(excluded):
        kept = top[row][~np.isin(top[row], skip)] if skip else top[row]
        result[row, : min(depth, len(kept))] = kept[:depth]
    return result


# --- aggregation -----------------------------------------------------------------------

@dataclass(frozen=True)
class SetSamples:
    """One positive set's (or relevance variant's) part of an evaluation: the label of its
    records, its samples per direction, and whether it reports `rsum`."""

    label: str
    samples: Mapping[str, Mapping[Key, Sample]]
    rsum: bool = False


Replicates = dict[tuple[str, Key], np.ndarray]  # (direction, key) -> one value per replicate


def _query_draws(seed: int, direction: str, queries: tuple[Id, ...]) -> np.random.Generator:
    """The resampling stream of one direction's list of queries. It depends on the seed,
    the direction and the queries alone: a set's CIs do not depend on what else is
    evaluated with it, and sets over the same queries resample them alike."""
    return np.random.default_rng([seed, zlib.crc32(direction.encode()),
                                  zlib.crc32(repr(queries).encode())])


def set_replicates(sets: Sequence[SetSamples], bootstrap: int, seed: int
                   ) -> list[Replicates]:
    """Every metric's bootstrap replicates, set by set. The resampled unit lists are each
    fold's queries in a direction: each distinct list is drawn once (`resample_counts`,
    in chunks of at most BOOTSTRAP_CHUNK_BYTES of counts: few products, bounded memory),
    and each chunk is one product with the per-query arrays of every metric and set over
    that list, side by side."""
    if not bootstrap:
        return [{(direction, key): np.empty(0) for direction, by_key in one.samples.items()
                 for key in by_key} for one in sets]
    columns: dict[tuple[str, tuple[Id, ...]], list[np.ndarray]] = {}
    placed = []  # (set, direction, key, sample, [(unit list, first column) per fold])
    for index, one in enumerate(sets):
        for direction, by_key in one.samples.items():
            for key, sample in by_key.items():
                where = []
                for fold, queries in enumerate(sample.queries):
                    stacked = columns.setdefault((direction, queries), [])
                    where.append(((direction, queries), len(stacked)))
                    stacked += sample.columns(fold)
                placed.append((index, direction, key, sample, where))
    from threadpoolctl import threadpool_limits  # only resampling needs it

    def resampled_sums(unit_list: tuple[str, tuple[Id, ...]]) -> np.ndarray:
        (direction, queries), units = unit_list, len(unit_list[1])
        matrix = np.column_stack(columns[unit_list])
        if not units:
            return np.zeros((bootstrap, matrix.shape[1]))
        chunk = max(1, BOOTSTRAP_CHUNK_BYTES // (8 * units))
        return np.concatenate([counts @ matrix for counts in resample_counts(
            units, bootstrap, _query_draws(seed, direction, queries), chunk=chunk)])

    # Each list has a stream of its own, so lists are resampled side by side, one thread
    # per CPU (the draws and the products let go of the GIL), with the same numbers as one
    # after another; the longest lists first, so that the threads end together (COCO 5K's
    # and CxC's 25,000 captions are more than half of the draws). One BLAS thread each:
    # between these products OpenBLAS's own threads spin, and on a busy machine they
    # doubled the wall time (1.4 to 1.7 s against 0.75 s at load 3).
    longest_first = sorted(columns, key=lambda unit_list: -len(unit_list[1]))
    with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(os.cpu_count()) as pool:
        sums = dict(zip(longest_first, pool.map(resampled_sums, longest_first),
                        strict=True))
    result: list[Replicates] = [{} for _ in sets]
    for index, direction, key, sample, where in placed:
        result[index][(direction, key)] = sample.from_sums(
            [sums[unit][:, first:first + sample.width] for unit, first in where])
    return result


def summarize(one: SetSamples, replicates: Replicates, *, ci: float
              ) -> list[dict[str, object]]:
    """Tidy records {positives, metric, direction, k, m, value, ci_low, ci_high, n} of
    one set's per-direction samples and their `replicates`, plus `mean` over directions
    and `rsum`. The CIs are BCa intervals (`metrics.stats.confidence`): each fold and direction
    is a stratum of the jackknife, as it is of the resampling."""
    check_ci(ci)
    label, samples = one.label, one.samples
    jackknives: dict[tuple[str, Key], list[np.ndarray]] = {}
    records: list[dict[str, object]] = []
    for direction, by_key in samples.items():
        for key, sample in by_key.items():
            reps = replicates[(direction, key)]
            jackknives[(direction, key)] = sample.jackknife()
            records.append(_record(label, key, direction, sample.value(), reps,
                                   jackknives[(direction, key)], ci, sample.n))
    present = [d for d in DIRECTIONS if samples.get(d)]
    if len(present) == 2:
        for key, sample in samples["i2t"].items():
            other = samples["t2i"].get(key)
            if other is None:
                continue
            value = (sample.value() + other.value()) / 2
            reps = (replicates[("i2t", key)] + replicates[("t2i", key)]) / 2
            jack = [(j + other.value()) / 2 for j in jackknives[("i2t", key)]] + [
                (sample.value() + j) / 2 for j in jackknives[("t2i", key)]]
            records.append(_record(label, key, "mean", value, reps, jack, ci,
                                   sample.n + other.n))
        wanted = [("recall@k", k, None) for k in RSUM_KS]
        if one.rsum and all(key in samples[d] for key in wanted for d in DIRECTIONS):
            value = sum(samples[d][key].value() for key in wanted for d in DIRECTIONS)
            reps = sum(replicates[(d, key)] for key in wanted for d in DIRECTIONS)
            jack = []  # one direction's queries left out, the other's values whole
            for d in DIRECTIONS:
                rest = value - sum(samples[d][key].value() for key in wanted)
                jack += [rest + sum(parts) for parts in zip(
                    *(jackknives[(d, key)] for key in wanted), strict=True)]
            n = samples["i2t"][wanted[0]].n + samples["t2i"][wanted[0]].n
            records.append(_record(label, ("rsum", None, None), "both", value, reps, jack, ci,
                                   n))
    return records


def _record(label: str, key: Key, direction: str, value: float, reps: np.ndarray,
            jackknife: list[np.ndarray], ci: float, n: int) -> dict[str, object]:
    metric, k, m = key
    low = high = warning = None
    if len(reps):
        low, high, warning = bca_ci(reps, value, jackknife, ci, unit="queries")
    return {"positives": label, "metric": metric, "direction": direction, "k": k, "m": m,
            "value": _finite(value), "ci_low": _finite(low), "ci_high": _finite(high), "n": n,
            "ci_warning": warning}


def _finite(value: float | None) -> float | None:
    return None if value is None or not np.isfinite(value) else float(value)


def positive_samples(directions: Mapping[str, Ranked], folds: Sequence[PositiveSet], *,
                     ks: Sequence[int] = DEFAULT_KS) -> dict[str, dict[Key, Sample]]:
    """Samples of every positive-set metric, per direction, over the folds of one set."""
    samples: dict[str, dict[Key, Sample]] = {}
    for direction, ranked in directions.items():
        by_key: dict[Key, Sample] = {}
        for fold in folds:
            queries = resampled_queries(fold.direction(direction))
            for key, values in positive_scores(ranked, fold, direction, ks=ks).items():
                sample = by_key.setdefault(key, Sample())
                sample.folds.append(values)
                sample.queries.append(queries)
        samples[direction] = by_key
    return samples


def pmrp_samples(directions: Mapping[str, Ranked], plausible: PositiveSet, *,
                 cap: int | None = PMRP_CAP) -> dict[str, dict[Key, Sample]]:
    samples: dict[str, dict[Key, Sample]] = {}
    for direction, ranked in directions.items():
        queries = resampled_queries(plausible.direction(direction))
        samples[direction] = {key: Sample([values], queries=[queries]) for key, values in
                              pmrp_scores(ranked, plausible, direction, cap=cap).items()}
    return samples


def ncs_averaging_name(averaging: str) -> str:
    """The averaging's current name (`per-query` is Eq. 5's earlier name, `eq5`); a
    ValueError naming the choices for anything else."""
    averaging = NCS_AVERAGING_ALIASES.get(averaging, averaging)
    if averaging not in NCS_AVERAGINGS:
        raise ValueError(f"NCS averaging must be {', '.join(NCS_AVERAGINGS[:-1])} or "
                         f"{NCS_AVERAGINGS[-1]}, not {averaging!r}")
    return averaging


def ncs_averaging_of(signature: str | None) -> str:
    """The NCS averaging a result's signature names (`ncs:…`, an earlier name read as
    the current one); `ratio` for a signature without one (results stored before the
    choice existed were ratios of sums)."""
    from metrics.signature import parse_signature

    found = parse_signature(signature).get("ncs") if signature else None
    return NCS_AVERAGING_ALIASES.get(found, found) if found else "ratio"


def ncs_label_suffix(metric: str, signature: str | None) -> str:
    """What a label adds to an NCS result not averaged as the default (the authors'
    code): `eq5` or `ratio`; empty otherwise."""
    if metric != "ncs@k":
        return ""
    averaging = ncs_averaging_of(signature)
    return "" if averaging == DEFAULT_NCS_AVERAGING else averaging


def ncs_sample(numerators: np.ndarray, denominators: np.ndarray, averaging: str, *,
               k: int) -> Sample:
    """NCS@k over queries from each query's Σ φ(top-k retrieved) and Σ φ(k most relevant).
    `authors`: the mean over every query of (numerator / k) / (denominator / k + 1e-10),
    as the authors' code divides the two means (a query whose ideal is all 0 counts 0);
    `eq5`: the mean of numerator / denominator over the queries whose denominator is
    positive, the others left out of the value and of `n`; `ratio`: Σ_q numerator /
    Σ_q denominator, every query counted. Each way a bootstrap replicate resamples all
    queries and applies the same formula to them."""
    averaging = ncs_averaging_name(averaging)
    numerators = np.asarray(numerators, dtype=np.float64)
    denominators = np.asarray(denominators, dtype=np.float64)
    if averaging == "authors":
        return Sample([(numerators / k) / (denominators / k + AUTHORS_NCS_EPSILON)])
    if averaging == "ratio":
        return Sample([numerators], [denominators])
    defined = denominators > 0
    ratios = np.divide(numerators, denominators, out=np.zeros_like(numerators),
                       where=defined)
    return Sample([ratios], [defined.astype(np.float64)],
                  left_out=int(len(defined) - defined.sum()))


def semantic_samples(directions: Mapping[str, Ranked], views: Mapping[str, RelevanceView], *,
                     ground_truth: PositiveSet | None, ks: Sequence[int] = DEFAULT_KS,
                     ms: Sequence[int] = (1, 2, 3),
                     ncs_averaging: str = DEFAULT_NCS_AVERAGING
                     ) -> dict[str, dict[Key, Sample]]:
    """Samples of every semantic metric, per direction, over every ranked query (in
    canonical order: `canonical_order`)."""
    ncs_averaging = ncs_averaging_name(ncs_averaging)
    samples: dict[str, dict[Key, Sample]] = {}
    for direction, ranked in directions.items():
        truth = None if ground_truth is None else ground_truth.direction(direction)
        numerators, denominators = semantic_scores(ranked, views[direction],
                                                   ground_truth=truth, ks=ks, ms=ms)
        queries = canonical_order(ranked.queries)
        order = ranked.rows_of(queries)  # semantic_scores' values follow the rows
        by_key: dict[Key, Sample] = {}
        for key, values in numerators.items():
            metric, k, _ = key
            sample = (ncs_sample(values[order], denominators[key][order], ncs_averaging,
                                 k=k) if metric == "ncs@k" and k is not None
                      else Sample([values[order]]))
            by_key[key] = replace(sample, queries=[queries])
        samples[direction] = by_key
    return samples


@dataclass(frozen=True)
class SemanticInput:
    """A relevance matrix for evaluation: its label (e.g. `cider-d#1a2b3c`), its i2t and
    t2i views, and the ground truth that its `no-gt` variant removes (None: no variant)."""

    label: str
    views: Mapping[str, RelevanceView]
    ground_truth: PositiveSet | None


def evaluation_sets(directions: Mapping[str, Ranked], *,
                    positive_sets: Sequence[tuple[str, Sequence[PositiveSet]]] = (),
                    plausible: Sequence[PositiveSet] = (), pmrp_cap: int | None = PMRP_CAP,
                    semantic: Sequence[SemanticInput] = (), ks: Sequence[int] = DEFAULT_KS,
                    ms: Sequence[int] = (1, 2, 3),
                    ncs_averaging: str = DEFAULT_NCS_AVERAGING) -> list[SetSamples]:
    """The per-query samples of every set of an evaluation (see `evaluate`), before any
    resampling: `summarize_sets` resamples them together."""
    ncs_averaging = ncs_averaging_name(ncs_averaging)
    if not ks or min(ks) < 1:
        raise ValueError("cut-offs k must be positive integers")
    if not ms or min(ms) < 1:
        raise ValueError("SR's m must be positive integers")
    sets = [SetSamples(label, positive_samples(directions, folds, ks=ks),
                       rsum=set(RSUM_KS) <= set(ks)) for label, folds in positive_sets]
    sets += [SetSamples(one.name, pmrp_samples(directions, one, cap=pmrp_cap))
             for one in plausible]
    for relevance in semantic:
        variants = [(relevance.label, None)]
        if relevance.ground_truth is not None:
            variants.append((f"{relevance.label}/no-gt", relevance.ground_truth))
        sets += [SetSamples(label, semantic_samples(directions, relevance.views,
                                                    ground_truth=truth, ks=ks, ms=ms,
                                                    ncs_averaging=ncs_averaging))
                 for label, truth in variants]
    return sets


def summarize_sets(sets: Sequence[SetSamples], *, bootstrap: int, ci: float, seed: int
                   ) -> list[list[dict[str, object]]]:
    """Each set's tidy records, from one resampling of all of them (`set_replicates`)."""
    check_ci(ci)
    return [summarize(one, replicates, ci=ci)
            for one, replicates in zip(sets, set_replicates(sets, bootstrap, seed),
                                       strict=True)]


def evaluate(directions: Mapping[str, Ranked], *,
             positive_sets: Sequence[tuple[str, Sequence[PositiveSet]]] = (),
             plausible: Sequence[PositiveSet] = (), pmrp_cap: int | None = PMRP_CAP,
             semantic: Sequence[SemanticInput] = (), ks: Sequence[int] = DEFAULT_KS,
             ms: Sequence[int] = (1, 2, 3), bootstrap: int = 1000, ci: float = 0.95,
             seed: int = 0, ncs_averaging: str = DEFAULT_NCS_AVERAGING
             ) -> list[dict[str, object]]:
    """Every metric of one model's rankings, as tidy records (see the module docstring).
    `positive_sets` pairs a label with its folds (one fold, or COCO 1K's five);
    `ncs_averaging` is `authors`, `eq5` or `ratio` (NCS_AVERAGINGS)."""
    check_ci(ci)
    sets = evaluation_sets(directions, positive_sets=positive_sets, plausible=plausible,
                           pmrp_cap=pmrp_cap, semantic=semantic, ks=ks, ms=ms,
                           ncs_averaging=ncs_averaging)
    return [record for records in summarize_sets(sets, bootstrap=bootstrap, ci=ci, seed=seed)
            for record in records]
