"""Retrieval metrics against the eccv-caption package (when installed) and direct loops."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from metrics.retrieval.evaluation import (
    RelevanceView,
    SemanticInput,
    canonical_order,
    evaluate,
    pmrp_scores,
    positive_scores,
    resampled_queries,
    semantic_scores,
)
from metrics.retrieval.positives import (
    PositiveSet,
    coco_1k_folds,
    coco_test_ids,
    eccv_caption_available,
    positive_set,
    shipped_positive_set,
)
from metrics.retrieval.rankings import (
    Rankings,
    RankingsError,
    ScoredRankings,
    check_known,
    rankings_from_lists,
    read_rankings_json,
    read_scores,
)

needs_eccv_caption = pytest.mark.skipif(
    not eccv_caption_available(), reason="the eccv-caption package is not installed"
)


def _package_metrics():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from eccv_caption import _metrics

    return _metrics


def _random_case(seed: int, queries: int = 1100, items: int = 1400, short: bool = True):
    """Random ids, 1 to 30 positives per query, rankings that favour positives a little,
    some lists shorter than the pool."""
    rng = np.random.default_rng(seed)
    item_ids = [int(x) for x in rng.choice(10**7, items, replace=False)]
    query_ids = [int(x) for x in rng.choice(10**7, queries, replace=False)]
    positives, lists = {}, {}
    for query in query_ids:
        chosen = rng.choice(items, rng.integers(1, 31), replace=False)
        positives[query] = [item_ids[j] for j in chosen]
        score = rng.random(items)
        score[chosen] += rng.random(len(chosen)) * 1.5
        length = int(rng.integers(60, items)) if short else items
        lists[query] = [item_ids[j] for j in np.argsort(-score, kind="stable")[:length]]
    return item_ids, positives, lists


def _mean(values: np.ndarray) -> float:
    return float(np.mean(values))


@needs_eccv_caption
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_positive_metrics_equal_eccv_caption(seed: int):
    package = _package_metrics()
    _, positives, lists = _random_case(seed)
    ours = positive_scores(rankings_from_lists(lists), positive_set("p", positives, {}), "i2t",
                           ks=(1, 5, 10, 50))
    reference = package.compute_eccv_metrics(lists, positives)
    assert _mean(ours[("map@r", None, None)]) == pytest.approx(reference["eccv_map_at_r"],
                                                              abs=1e-9)
    assert _mean(ours[("r-precision", None, None)]) == pytest.approx(
        reference["eccv_rprecision"], abs=1e-9)
    for k in (1, 5, 10, 50):
        assert _mean(ours[("recall@k", k, None)]) == pytest.approx(
            package.compute_r_at_k(lists, positives, k), abs=1e-9)


@needs_eccv_caption
@pytest.mark.parametrize("seed", [3, 4])
def test_uncapped_pmrp_equals_the_package_and_the_cap_is_a_loop(seed: int):
    package = _package_metrics()
    _, positives, lists = _random_case(seed)
    plausible = positive_set("pm", {}, positives)
    rankings = rankings_from_lists(lists)
    uncapped = pmrp_scores(rankings, plausible, "t2i", cap=None)[("pmrp", None, None)]
    assert _mean(uncapped) == pytest.approx(package.compute_rprecision(lists, positives),
                                            abs=1e-9)
    capped = pmrp_scores(rankings, plausible, "t2i", cap=7)[("pmrp", None, None)]
    loop = [len(set(lists[q][: min(len(p), 7)]) & set(p)) / min(len(p), 7, len(lists[q]))
            for q, p in positives.items()]
    assert _mean(capped) == pytest.approx(np.mean(loop), abs=1e-12)


@needs_eccv_caption
@pytest.mark.parametrize("seed", [5, 6])
def test_fold_filtered_recall_equals_the_package_coco1k_routine(seed: int):
    package = _package_metrics()
    items, positives, lists = _random_case(seed, short=False)
    fold_items = set(items[:500]) | {p[0] for p in positives.values()}
    folded = PositiveSet("fold", positive_set("f", positives, {}).image_to_captions, {},
                         captions=frozenset(fold_items))
    ours = positive_scores(rankings_from_lists(lists), folded, "i2t")
    for k in (1, 5, 10):
        expected = package.compute_coco1k_r_at_k(lists, positives, fold_items, k)
        assert _mean(ours[("recall@k", k, None)]) == pytest.approx(expected, abs=1e-9)


def _reference_ranking(scores: np.ndarray, item_ids: list[int]) -> list[list[int]]:
    """Descending score, ties by ascending id: a plain lexsort per row."""
    ids = np.asarray(item_ids)
    return [[item_ids[j] for j in np.lexsort((ids, -row))] for row in scores]


@needs_eccv_caption
@pytest.mark.parametrize("seed", [7, 8])
def test_similarity_matrices_rank_with_ties_by_id(seed: int):
    package = _package_metrics()
    rng = np.random.default_rng(seed)
    images = [int(x) for x in rng.choice(10**6, 1000, replace=False)]
    captions = [int(x) for x in rng.choice(10**6, 1200, replace=False)]
    scores = np.round(rng.random((1000, 1200)), 2)  # many ties
    truth = {c: [images[int(rng.integers(1000))]] for c in captions}
    for image in images[:300]:
        for caption in rng.choice(captions, 3, replace=False):
            truth[int(caption)].append(image)
    t2i = ScoredRankings(tuple(captions), tuple(images), scores.T)
    lists = dict(zip(captions, _reference_ranking(scores.T, images), strict=True))
    ours = positive_scores(t2i, positive_set("p", {}, truth), "t2i")
    reference = package.compute_eccv_metrics(lists, truth)
    assert _mean(ours[("map@r", None, None)]) == pytest.approx(reference["eccv_map_at_r"],
                                                              abs=1e-9)
    for k in (1, 5, 10):
        assert _mean(ours[("recall@k", k, None)]) == pytest.approx(
            package.compute_r_at_k(lists, truth, k), abs=1e-9)
    top = t2i.top(np.arange(len(captions)), 20, None)
    assert [[images[j] for j in row] for row in top[:50]] == [lists[c][:20]
                                                              for c in captions[:50]]


@pytest.mark.slow
@needs_eccv_caption
def test_shipped_sets_equal_the_package_metrics_class():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from eccv_caption import Metrics

    rng = np.random.default_rng(9)
    coco = shipped_positive_set("coco-5k")
    images, captions = list(coco.image_to_captions), coco_test_ids()
    i2t, t2i = {}, {}
    for image in images:  # lists of 120: the package filters them to each 1K fold
        picks = rng.choice(len(captions), 120, replace=False)
        own = list(coco.image_to_captions[image][: int(rng.integers(0, 3))])
        i2t[image] = list(dict.fromkeys(own + [captions[j] for j in picks]))[:120]
    for caption in captions:
        picks = rng.choice(len(images), 120, replace=False)
        own = list(coco.caption_to_images[caption][: int(rng.integers(0, 2))])
        t2i[caption] = list(dict.fromkeys(own + [images[j] for j in picks]))[:120]
    package = Metrics()
    package.verbose = False
    reference = package.compute_all_metrics(
        i2t, t2i, target_metrics=("coco_1k_recalls", "coco_5k_recalls", "cxc_recalls",
                                  "eccv_r1", "eccv_map_at_r", "eccv_rprecision"))
    directions = {"i2t": rankings_from_lists(i2t), "t2i": rankings_from_lists(t2i)}
    records = evaluate(directions, bootstrap=0, positive_sets=[
        ("coco-1k", coco_1k_folds(coco)), ("coco-5k", [coco]),
        ("cxc", [shipped_positive_set("cxc")]), ("eccv", [shipped_positive_set("eccv")])])
    value = {(r["positives"], r["metric"], r["direction"], r["k"]): r["value"]
             for r in records}
    for direction in ("i2t", "t2i"):
        for name in ("coco_1k", "coco_5k", "cxc"):
            for k in (1, 5, 10):
                ours = value[(name.replace("_", "-"), "recall@k", direction, k)]
                assert ours == pytest.approx(reference[f"{name}_r{k}"][direction], abs=1e-9)
        assert value[("eccv", "map@r", direction, None)] == pytest.approx(
            reference["eccv_map_at_r"][direction], abs=1e-9)
        assert value[("eccv", "r-precision", direction, None)] == pytest.approx(
            reference["eccv_rprecision"][direction], abs=1e-9)
        assert value[("eccv", "recall@k", direction, 1)] == pytest.approx(
            reference["eccv_r1"][direction], abs=1e-9)
    rsum = value[("coco-5k", "rsum", "both", None)]
    assert rsum == pytest.approx(sum(reference[f"coco_5k_r{k}"][d] for k in (1, 5, 10)
                                     for d in ("i2t", "t2i")), abs=1e-9)


def test_recall_share_and_r_precision_by_hand():
    rankings = rankings_from_lists({"q": ["a", "b", "c", "d"], "r": ["d"]})
    scores = positive_scores(rankings, positive_set("p", {"q": ["b", "d", "z"], "r": []},
                                                    {}), "i2t", ks=(1, 2, 4))
    # q: R = 3 (z is never ranked); hits at ranks 2 and 4; r has no positives: left out
    assert scores[("recall@k", 1, None)].tolist() == [0.0]
    assert scores[("recall-share@k", 2, None)].tolist() == [pytest.approx(1 / 3)]
    assert scores[("recall-share@k", 4, None)].tolist() == [pytest.approx(2 / 3)]
    assert scores[("r-precision", None, None)].tolist() == [pytest.approx(1 / 3)]
    assert scores[("map@r", None, None)].tolist() == [pytest.approx((1 / 2) / 3)]


def test_missing_queries_are_refused():
    rankings = rankings_from_lists({"q": ["a"]})
    with pytest.raises(RankingsError, match="rankings have no list for 1 of the 2 queries of p"):
        positive_scores(rankings, positive_set("p", {"q": ["a"], "x": ["a"]}, {}), "i2t")


# --- semantic metrics ------------------------------------------------------------------

def _loop_semantic(lists, phi, items, truth, k, m):
    """The paper's formulas, one query at a time (ties in φ by ascending id)."""
    gains, bests, recalls = [], [], []
    for query, ranked in lists.items():
        skip = set(truth.get(query, ())) if truth is not None else set()
        kept = [i for i in ranked if i not in skip]
        ideal = sorted((i for i in items if i not in skip), key=lambda i: (-phi[query][i], i))
        gains.append(sum(phi[query][i] for i in kept[:k]))
        bests.append(sum(phi[query][i] for i in ideal[:k]))
        relevant = ideal[:m]
        recalls.append(len(set(kept[:k]) & set(relevant)) / max(len(relevant), 1))
    return sum(gains) / sum(bests), float(np.mean(recalls))


@pytest.mark.parametrize("seed", [0, 1])
def test_ncs_and_semantic_recall_equal_a_direct_loop(seed: int):
    rng = np.random.default_rng(seed)
    queries, items = list(range(30)), list(range(100, 160))
    values = np.round(rng.random((30, 60)) * 3, 1)  # ties
    values[3] = 0.0  # a query whose best items are all irrelevant
    phi = {q: dict(zip(items, values[i], strict=True)) for i, q in enumerate(queries)}
    lists = {q: [int(x) for x in rng.permutation(items)] for q in queries}
    truth = {q: [items[q % 60], items[(q + 7) % 60]] for q in queries}
    view = RelevanceView(tuple(queries), tuple(items), values)
    rankings = rankings_from_lists(lists)
    for ground in (None, truth):
        numerators, denominators = semantic_scores(rankings, view, ground_truth=ground,
                                                   ks=(1, 5, 10), ms=(1, 3))
        for k in (1, 5, 10):
            for m in (1, 3):
                ncs, sr = _loop_semantic(lists, phi, items, ground, k, m)
                key = ("ncs@k", k, None)
                assert numerators[key].sum() / denominators[key].sum() == pytest.approx(ncs)
                assert numerators[("sr@k", k, m)].mean() == pytest.approx(sr)


def _ncs_loop(lists, phi, items, truth, k, averaging):
    """NCS@k from its definitions, one query at a time in Python floats (float64): per
    query, φ of the first k retrieved items and φ of the k candidate items with the
    highest φ (candidates: every item of the matrix; without ground truth, the query's
    own items are removed from both). `authors` is the authors' public code (`metric.py`,
    NCS branch of `calculate_ranks`): per query, the mean of the k retrieved φ (a place
    past the end of a short list holds 0, as their zero-filled row does) over the mean of
    the k ideal φ plus 1e-10, averaged over every query. `eq5` is Biten et al.'s Eq. 5,
    the mean over queries of Σ retrieved / Σ ideal (a query with an ideal sum of 0 is
    undefined: left out); `ratio` is Σ over queries of the retrieved sums / Σ of the
    ideal sums. Returns (value, queries counted)."""
    numerators, denominators, authors = [], [], []
    for query, ranked in lists.items():
        skip = set(truth.get(query, ())) if truth is not None else set()
        retrieved = [float(phi[query][i]) for i in ranked if i not in skip][:k]
        candidates = sorted((float(phi[query][i]) for i in items if i not in skip),
                            reverse=True)[:k]
        numerators.append(sum(retrieved))
        denominators.append(sum(candidates))
        retrieved_row = retrieved + [0.0] * (k - len(retrieved))
        ideal_row = candidates + [0.0] * (k - len(candidates))
        authors.append((sum(retrieved_row) / k) / (sum(ideal_row) / k + 1e-10))
    if averaging == "authors":
        return sum(authors) / len(authors), len(lists)
    if averaging == "ratio":
        return sum(numerators) / sum(denominators), len(lists)
    ratios = [n / d for n, d in zip(numerators, denominators, strict=True) if d > 0]
    return (sum(ratios) / len(ratios) if ratios else float("nan")), len(ratios)


def _ncs_case(seed: int):
    """φ in float32 (as relevance files hold it) with ties, queries whose φ is all 0,
    a query whose only relevant item is its ground truth, and lists shorter than the
    pool."""
    rng = np.random.default_rng(seed)
    queries, items = list(range(40)), list(range(500, 570))
    values = (np.round(rng.random((40, 70)) * 4, 1) * rng.random((40, 70)).round(1)
              ).astype(np.float32)
    values[[2, 11, 25]] = 0.0  # every item irrelevant: Eq. 5 NCS undefined
    values[7] = 0.0
    values[7, 7] = 2.5  # only its ground-truth item is relevant: undefined without it
    values[:, 30:33] = values[:, 30:31]  # ties in φ between items
    phi = {q: dict(zip(items, values[i], strict=True)) for i, q in enumerate(queries)}
    lists = {q: [int(x) for x in rng.permutation(items)[: int(rng.integers(3, 71))]]
             for q in queries}
    truth = {q: [items[q % 70], items[(q + 11) % 70]] for q in queries}
    return queries, items, values, phi, lists, truth


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ncs_averagings_equal_loops_from_the_definitions(seed: int):
    from metrics.retrieval.evaluation import semantic_samples

    queries, items, values, phi, lists, truth = _ncs_case(seed)
    view = RelevanceView(tuple(queries), tuple(items), values)
    directions = {"i2t": rankings_from_lists(lists)}
    for ground in (None, truth):
        gt = None if ground is None else positive_set("gt", ground, {})
        for averaging in ("authors", "eq5", "ratio"):
            samples = semantic_samples(directions, {"i2t": view}, ground_truth=gt,
                                       ks=(1, 5, 10, 70), ms=(1,), ncs_averaging=averaging)
            for k in (1, 5, 10, 70):
                sample = samples["i2t"][("ncs@k", k, None)]
                expected, counted = _ncs_loop(lists, phi, items, ground, k, averaging)
                assert abs(sample.value() - expected) <= 1e-12, (averaging, k, ground)
                assert sample.n == counted
    # the zero rows are undefined per query, and query 7 once its own item is removed
    plain = semantic_samples(directions, {"i2t": view}, ground_truth=None, ks=(5,),
                             ms=(1,), ncs_averaging="eq5")["i2t"][("ncs@k", 5, None)]
    without = semantic_samples(directions, {"i2t": view}, ms=(1,), ks=(5,),
                               ground_truth=positive_set("gt", truth, {}),
                               ncs_averaging="eq5")["i2t"][("ncs@k", 5, None)]
    assert (plain.n, without.n) == (37, 36)


def test_ncs_is_summed_in_float64_from_a_float32_matrix():
    rng = np.random.default_rng(9)
    values = rng.random((3, 4000)).astype(np.float32)
    lists = {q: list(range(4000)) for q in range(3)}
    view = RelevanceView((0, 1, 2), tuple(range(4000)), values)
    numerators, denominators = semantic_scores(rankings_from_lists(lists), view,
                                               ground_truth=None, ks=(4000,), ms=(1,))
    key = ("ncs@k", 4000, None)
    assert numerators[key].dtype == denominators[key].dtype == np.float64
    exact = values.astype(np.float64).sum(axis=1)
    assert np.abs(numerators[key] - exact).max() <= 1e-9
    assert np.abs(denominators[key] - exact).max() <= 1e-9


def test_ncs_bootstrap_resamples_queries_under_each_averaging():
    from metrics.retrieval.evaluation import ncs_sample
    from metrics.stats.confidence import resample_counts

    rng = np.random.default_rng(4)
    numerators = rng.random(30) * 3
    denominators = numerators + rng.random(30)
    numerators[[4, 9]] = denominators[[4, 9]] = 0.0  # undefined per query
    counts = next(resample_counts(30, 50, np.random.default_rng(1), chunk=50))
    draws = [np.repeat(np.arange(30), c.astype(int)) for c in counts]  # resampled rows

    def replicates(sample) -> np.ndarray:
        return sample.from_sums([counts @ np.column_stack(sample.columns(0))])

    ratio = replicates(ncs_sample(numerators, denominators, "ratio", k=5))
    assert np.allclose(ratio, [numerators[d].sum() / denominators[d].sum() for d in draws],
                       rtol=0, atol=1e-12)
    eq5 = ncs_sample(numerators, denominators, "eq5", k=5)
    expected = []
    for draw in draws:
        kept = draw[denominators[draw] > 0]
        expected.append(np.mean(numerators[kept] / denominators[kept]))
    assert np.allclose(replicates(eq5), expected, rtol=0, atol=1e-12)
    assert eq5.n == 28
    # the authors' code: each query's mean over its mean + 1e-10, every query counted
    authors = ncs_sample(numerators, denominators, "authors", k=5)
    per_query = [(n / 5) / (d / 5 + 1e-10) for n, d in zip(numerators, denominators,
                                                             strict=True)]
    assert np.allclose(replicates(authors), [np.mean([per_query[i] for i in draw])
                                             for draw in draws], rtol=0, atol=1e-12)
    assert authors.n == 30
    # Eq. 5's earlier name still works; anything else names the choices
    assert ncs_sample(numerators, denominators, "per-query", k=5).value() == eq5.value()
    with pytest.raises(ValueError, match="authors, eq5 or ratio, not 'mean'"):
        ncs_sample(numerators, denominators, "mean", k=5)


def test_ncs_default_is_the_authors_code_on_a_small_matrix():
    """Three queries over five items, worked from the authors' `calculate_ranks` (NCS
    branch): per query mean(φ of the top k retrieved) / (mean(φ of the k best) + 1e-10),
    then the mean over all queries. q1's φ is all 0: it counts 0 (Eq. 5 leaves it out).
      q0 φ = (3, 1, 0, 2, 0), ranked b a c d e: k=1: 1 / 3;  k=2: (1+3)/2 / ((3+2)/2) = 0.8
      q1 φ = 0 everywhere:                       k=1: 0;      k=2: 0
      q2 φ = (0, 0, 4, 0, 1), ranked c e a b d: k=1: 4 / 4;  k=2: (4+1)/2 / ((4+1)/2) = 1
    NCS@1 = (1/3 + 0 + 1) / 3 = 4/9;  NCS@2 = (0.8 + 0 + 1) / 3 = 0.6.
    Eq. 5: NCS@1 = (1/3 + 1) / 2 = 2/3 over 2 queries; ratio: (1 + 0 + 4) / (3 + 0 + 4)."""
    items = ("a", "b", "c", "d", "e")
    values = np.array([[3, 1, 0, 2, 0], [0, 0, 0, 0, 0], [0, 0, 4, 0, 1]], dtype=np.float32)
    lists = {"q0": ["b", "a", "c", "d", "e"], "q1": ["e", "d", "c", "b", "a"],
             "q2": ["c", "e", "a", "b", "d"]}
    view = RelevanceView(("q0", "q1", "q2"), items, values)
    directions = {"i2t": rankings_from_lists(lists)}
    records = evaluate(directions, semantic=[SemanticInput("phi", {"i2t": view}, None)],
                       ks=(1, 2), ms=(1,), bootstrap=0)
    ncs = {r["k"]: r for r in records if r["metric"] == "ncs@k"}
    assert ncs[1]["value"] == pytest.approx(4 / 9, abs=1e-9) and ncs[1]["n"] == 3
    assert ncs[2]["value"] == pytest.approx(0.6, abs=1e-9) and ncs[2]["n"] == 3
    phi = {q: dict(zip(items, row.tolist(), strict=True)) for q, row in zip(lists, values,
                                                                            strict=True)}
    for k in (1, 2):
        assert abs(ncs[k]["value"] - _ncs_loop(lists, phi, items, None, k, "authors")[0]
                   ) <= 1e-15
    for averaging, value, n in (("eq5", 2 / 3, 2), ("ratio", 5 / 7, 3)):
        other = evaluate(directions, semantic=[SemanticInput("phi", {"i2t": view}, None)],
                         ks=(1,), ms=(1,), bootstrap=0, ncs_averaging=averaging)
        record = next(r for r in other if r["metric"] == "ncs@k")
        assert record["value"] == pytest.approx(value, abs=1e-15) and record["n"] == n


def test_ncs_averagings_differ_and_records_count_defined_queries():
    queries, items, values, _, lists, _ = _ncs_case(3)
    views = {"i2t": RelevanceView(tuple(queries), tuple(items), values),
             "t2i": RelevanceView(tuple(items), tuple(queries), values.T)}
    back = {i: list(queries) for i in items}
    directions = {"i2t": rankings_from_lists(lists), "t2i": rankings_from_lists(back)}
    semantic = SemanticInput("phi", views, None)
    keyed = {}
    for averaging in ("authors", "eq5", "ratio"):
        records = evaluate(directions, semantic=[semantic], ks=(5,), ms=(1,), bootstrap=100,
                           ci=0.9, seed=2, ncs_averaging=averaging)
        keyed[averaging] = {(r["metric"], r["direction"], r["k"]): r for r in records}
    authors, eq5, ratio = keyed["authors"], keyed["eq5"], keyed["ratio"]
    # 3 rows of φ are all 0 (query 7 keeps its own item here): 37 of 40 defined for Eq. 5;
    # the authors' code and the ratio of sums count all 40
    assert authors[("ncs@k", "i2t", 5)]["n"] == ratio[("ncs@k", "i2t", 5)]["n"] == 40
    assert eq5[("ncs@k", "i2t", 5)]["n"] == 37
    assert eq5[("ncs@k", "mean", 5)]["n"] == 37 + eq5[("ncs@k", "t2i", 5)]["n"]
    i2t_values = {a: keyed[a][("ncs@k", "i2t", 5)]["value"] for a in keyed}
    assert len(set(i2t_values.values())) == 3, i2t_values
    assert authors[("sr@k", "i2t", 5)] == eq5[("sr@k", "i2t", 5)] == ratio[("sr@k", "i2t", 5)]
    for record in (*authors.values(), *eq5.values()):
        assert record["ci_low"] <= record["value"] <= record["ci_high"]
    with pytest.raises(ValueError, match="NCS averaging"):
        evaluate(directions, semantic=[semantic], ncs_averaging="mean")


def test_semantic_metrics_need_every_ranked_id_in_the_matrix():
    view = RelevanceView((1,), ("a",), np.ones((1, 1)))
    with pytest.raises(RankingsError, match="lacks 1 ranked item"):
        semantic_scores(rankings_from_lists({1: ["a", "b"]}), view, ground_truth=None)


def test_records_carry_mean_rsum_and_cis():
    rng = np.random.default_rng(1)
    lists = {i: [int(x) for x in rng.permutation(40)] for i in range(100, 140)}
    truth = {i: [i - 100] for i in range(100, 140)}
    back = {c: [int(x) for x in rng.permutation(range(100, 140))] for c in range(40)}
    directions = {"i2t": rankings_from_lists(lists), "t2i": rankings_from_lists(back)}
    view = np.round(rng.random((40, 40)), 1)
    semantic = SemanticInput("phi", {"i2t": RelevanceView(tuple(range(100, 140)),
                                                          tuple(range(40)), view),
                                     "t2i": RelevanceView(tuple(range(40)),
                                                          tuple(range(100, 140)), view.T)},
                             positive_set("gt", truth, {c: [c + 100] for c in range(40)}))
    records = evaluate(directions, positive_sets=[("gt", [semantic.ground_truth])],
                       semantic=[semantic], bootstrap=200, ci=0.9, seed=3)
    keyed = {(r["positives"], r["metric"], r["direction"], r["k"], r["m"]): r for r in records}
    mean = keyed[("gt", "map@r", "mean", None, None)]
    i2t, t2i = keyed[("gt", "map@r", "i2t", None, None)], keyed[("gt", "map@r", "t2i", None, None)]
    assert mean["value"] == pytest.approx((i2t["value"] + t2i["value"]) / 2)
    assert mean["n"] == 80 and i2t["n"] == 40
    for record in records:
        assert record["ci_low"] <= record["value"] <= record["ci_high"]
    rsum = keyed[("gt", "rsum", "both", None, None)]
    assert rsum["value"] == pytest.approx(sum(
        keyed[("gt", "recall@k", d, k, None)]["value"] for d in ("i2t", "t2i") for k in (1, 5, 10)))
    assert ("phi/no-gt", "ncs@k", "mean", 5, None) in keyed
    assert ("phi", "sr@k", "t2i", 10, 3) in keyed
    again = evaluate(directions, positive_sets=[("gt", [semantic.ground_truth])],
                     semantic=[semantic], bootstrap=200, ci=0.9, seed=3)
    assert again == records  # seeded


# --- files -----------------------------------------------------------------------------

def test_the_fast_parser_reads_what_json_reads(tmp_path: Path):
    _, _, lists = _random_case(11, queries=200, items=300)
    path = tmp_path / "i2t.json"
    path.write_text(json.dumps({str(k): v for k, v in lists.items()}, indent=1))
    fast = read_rankings_json(path)
    slow = rankings_from_lists(lists)
    assert fast.queries == slow.queries
    decoded = [[fast.items[j] for j in row if j >= 0] for row in fast.order]
    assert decoded == [lists[q] for q in fast.queries]


@pytest.mark.parametrize("text", ['{"img-1": ["c1", "c2"], "7": [1]}', '{"007": [1, 2]}',
                                  '{"5": [-1, 2]}'])
def test_other_id_spellings_go_through_json(tmp_path: Path, text: str):
    path = tmp_path / "r.json"
    path.write_text(text)
    rankings = read_rankings_json(path)
    assert rankings.queries == tuple(json.loads(text, object_hook=lambda d: [
        int(k) if k.isdigit() and not k.startswith("0") else k for k in d]))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{\n"1": [1, 2],\n"2": [3, 3]\n}', r"r\.json:3: query 2: item 3 appears twice"),
        ('{\n"1": [1, 2, 5],\n"2": [3, 3]\n}', r"r\.json:3: query 2: item 3 appears twice"),
        ('{\n"1": [1, 2, 5],\n"2": [3, 4, 3, 6]\n}', r"r\.json:3: query 2: item 3 appears twice"),
        ('{\n"1": [1, 2],\n"2": []\n}', r"r\.json:3: query 2: the ranked list is empty"),
        ('{\n"1": [1, 2],\n"1": [3]\n}', r"r\.json:2: query '1' appears twice"),
        ('{\n"1": [1, 2],\n"2": [3 4]\n}', r"r\.json:3: not valid JSON"),
        ('{\n"a": [1, 2],\n"b": ["x", "x"]\n}', r"r\.json:3: query 'b': item 'x' appears twice"),
        ('{\n"a": [1, 2],\n"b": 5\n}', r"r\.json:3: the value of 'b' must be a list"),
        ('[[1, 2]]', r"r\.json:1: expected a JSON object"),
    ],
)
def test_bad_ranking_files_name_file_and_line(tmp_path: Path, text: str, message: str):
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(RankingsError, match=message):
        read_rankings_json(path)


def test_unknown_ids_are_refused():
    rankings = Rankings((1, 2), (10, 11, 99), np.array([[0, 1], [2, 0]]))
    kinds = ("image", "caption")
    check_known(rankings, {1, 2}, {10, 11, 99}, "x", kinds=kinds)
    with pytest.raises(RankingsError, match=r"^x: query 2: caption id 99 is not one of the "
                                             r"known captions \(1 unknown caption id"):
        check_known(rankings, {1, 2}, {10, 11}, "x", kinds=kinds)


def test_score_matrices_are_checked(tmp_path: Path):
    path = tmp_path / "m.npz"
    np.savez(path, scores=np.zeros((2, 3)), image_ids=np.array([1, 2]),
             caption_ids=np.array(["a", "b"]))
    with pytest.raises(RankingsError, match=r"shape \(2, 3\), expected \(2, 2\)"):
        read_scores(path)
    np.savez(path, scores=np.array([[1.0, np.nan]]), image_ids=np.array([1]),
             caption_ids=np.array(["a", "b"]))
    with pytest.raises(RankingsError, match="finite"):
        read_scores(path)
    np.savez(path, scores=np.array([[1.0, 2.0]]), image_ids=np.array([1]),
             caption_ids=np.array(["a", "10"]))
    _, images, captions = read_scores(path)
    assert images == (1,) and captions == ("a", 10)


def test_a_score_matrix_and_its_ranked_lists_agree_on_fold_filtered_metrics():
    rng = np.random.default_rng(12)
    images = [int(x) for x in rng.choice(10**5, 300, replace=False)]
    captions = [int(x) for x in rng.choice(10**5, 400, replace=False)]
    scores = np.round(rng.random((300, 400)), 2)
    truth = {i: [captions[int(j)] for j in rng.choice(400, 4, replace=False)] for i in images}
    fold = frozenset(captions[:150]) | {c for cs in truth.values() for c in cs[:1]}
    folded = PositiveSet("fold", positive_set("p", truth, {}).image_to_captions, {},
                         captions=fold)
    scored = ScoredRankings(tuple(images), tuple(captions), scores)
    listed = rankings_from_lists(dict(zip(images, _reference_ranking(scores, captions),
                                          strict=True)))
    ours = positive_scores(scored, folded, "i2t")
    reference = positive_scores(listed, folded, "i2t")
    for key, values in reference.items():
        np.testing.assert_allclose(ours[key], values, atol=1e-12)


@pytest.mark.parametrize("layout", ["C", "F"])  # F: laid out as a t2i view (transposed)
def test_a_score_matrix_evaluates_as_its_ranked_lists_over_several_sets_and_depths(layout):
    """One evaluation asks a matrix for shallow tops, deep ones (R past what it keeps from
    its first partial sort), folds and row subsets: every record, CIs included, is the
    list path's, whichever way the matrix lies in memory (the t2i view is transposed)."""
    rng = np.random.default_rng(21)
    images = [int(x) for x in rng.choice(10**5, 120, replace=False)]
    captions = [int(x) for x in rng.choice(10**5, 300, replace=False)]
    scores = np.round(rng.random((120, 300)), 2)  # many ties, broken by ascending id
    shallow = {i: [captions[int(j)] for j in rng.choice(300, 3, replace=False)]
               for i in images}
    deep = {i: [captions[int(j)] for j in rng.choice(300, int(rng.integers(1, 90)),
                                                     replace=False)] for i in images[:80]}
    fold = PositiveSet("fold", positive_set("p", shallow, {}).image_to_captions, {},
                       captions=frozenset(captions[:200]))
    sets = [("shallow", [positive_set("shallow", shallow, {})]),
            ("deep", [positive_set("deep", deep, {})]), ("fold", [fold])]

    def records(i2t) -> list[dict]:
        return evaluate({"i2t": i2t}, positive_sets=sets, bootstrap=60, seed=3)

    listed = rankings_from_lists(dict(zip(images, _reference_ranking(scores, captions),
                                          strict=True)))
    scored = records(ScoredRankings(tuple(images), tuple(captions),
                                    np.asarray(scores, order=layout)))
    assert max(len(deep[i]) for i in deep) > 64  # deeper than the first sort kept
    for ours, theirs in zip(scored, records(listed), strict=True):
        assert ours.keys() == theirs.keys()
        for key, value in theirs.items():
            assert ours[key] == (pytest.approx(value, abs=1e-12)
                                 if isinstance(value, float) else value), (key, theirs)


@pytest.mark.parametrize("layout", ["C", "F"])  # F: laid out as a t2i view (transposed)
def test_float32_and_float64_matrices_rank_alike_with_ties_signs_and_folds(layout):
    """float32 scores are ordered by one sort of packed integer keys, float64 ones by a
    lexsort: both give descending score, ties by ascending id (-0.0 tied with 0.0,
    negative scores below zero), for the whole pool and for fold-restricted tops, whether
    the whole pool's top holds a row's allowed items (a wide fold) or not (a narrow one)."""
    rng = np.random.default_rng(5)
    images = [int(x) for x in rng.choice(10**5, 90, replace=False)]
    captions = [int(x) for x in rng.choice(10**5, 400, replace=False)]
    scores = np.round(rng.normal(size=(90, 400)), 1)  # many ties, both signs
    scores[:, :40] = np.where(rng.random((90, 40)) < 0.5, -0.0, 0.0)
    ids = np.asarray(captions)
    reference = [np.lexsort((ids, -row)) for row in scores]
    for dtype in (np.float32, np.float64):
        matrix = np.asarray(scores.astype(dtype), order=layout)
        ranked = ScoredRankings(tuple(images), tuple(captions), matrix)
        rows = np.arange(len(images))
        assert np.array_equal(ranked.top(rows, 80, None), [r[:80] for r in reference])
        for share in (0.05, 0.6):
            allowed = rng.random(len(captions)) < share
            expected = [[j for j in r if allowed[j]][:12] for r in reference]
            assert np.array_equal(ranked.top(rows[::-1], 12, allowed), expected[::-1])


def test_resampled_queries_are_those_with_positives_integers_then_strings():
    """The units a replicate resamples: queries with at least one positive, in one order
    whatever the file's (integers ascending, then strings), ids of one kind or both."""
    assert resampled_queries({10: (1,), 2: (3,), 7: (), 5: (1, 2)}) == (2, 5, 10)
    assert resampled_queries({"b": ("x",), "a": ("y",), "c": ()}) == ("a", "b")
    assert canonical_order(["b", 10, "a", 2]) == (2, 10, "a", "b")
