"""Every bootstrap CI outside the report's tables (those are `test_report_pinned`) stays the
same numbers for the same seed: retrieval (positive sets with folds, PMRP, semantic NCS and
SR, `mean` and `rsum`), verifier agreement, judgment correlations and pairwise accuracy,
kappa/alpha agreement, on small fixed data, against values recorded from the implementation
before resampling became a reduction (`tests/pinned/bootstrap_statistics.json`, written by
`python -m tests.test_bootstrap_pinned`). The retrieval part was recorded once more when its
resampling became index draws (the same bootstrap distribution, other draws); that it is
still an ordinary bootstrap is checked here against a plain loop over numpy's own choice
of indices, with BCa limits from Efron & Tibshirani's formula."""

from __future__ import annotations

import json
import math
import zlib
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest

import metrics.retrieval.evaluation
from metrics.retrieval.evaluation import (
    RelevanceView,
    SemanticInput,
    evaluate,
    evaluation_sets,
    positive_scores,
    resampled_queries,
    set_replicates,
)
from metrics.retrieval.match import verifier_agreement
from metrics.retrieval.positives import PositiveSet
from metrics.retrieval.rankings import Rankings
from metrics.stats.agreement import agreement_table, alpha_table
from metrics.stats.judgments import pairwise_accuracy, score_correlations

PINNED = Path(__file__).parent / "pinned" / "bootstrap_statistics.json"
RETRIEVAL_BOOTSTRAP = 450
BOOTSTRAP = 100  # the other statistics were pinned at 100 resamples (once Python loops)
TABLES = ("retrieval", "verifier_agreement", "score_correlations", "score_differences",
          "pairwise_accuracy", "agreement_table", "alpha_table")


def _positive_set(name: str, image_to_captions: dict[int, list[int]], *,
                  fold: bool = False) -> PositiveSet:
    """Positives both ways; a `fold` restricts the rankings to its own images and captions
    (as a COCO 1K fold does)."""
    captions: dict[int, list[int]] = {}
    for image, owned in image_to_captions.items():
        for caption in owned:
            captions.setdefault(caption, []).append(image)
    return PositiveSet(name, {i: tuple(c) for i, c in image_to_captions.items()},
                       {c: tuple(i) for c, i in captions.items()},
                       frozenset(image_to_captions) if fold else None,
                       frozenset(captions) if fold else None)


def retrieval_case() -> tuple[dict[str, Rankings], dict]:
    """40 images, 5 captions each, scores that favour each caption's own image; a set of
    two folds, one with extra positives, plausible matches and a relevance matrix: the
    rankings and what `evaluate` evaluates against them."""
    rng = np.random.default_rng(3)
    images, captions = list(range(40)), list(range(1000, 1200))
    own = {c: (c - 1000) // 5 for c in captions}
    scores = rng.random((40, 200)) + np.array([[0.6 * (own[c] == i) for c in captions]
                                               for i in images])
    directions = {"i2t": Rankings(tuple(images), tuple(captions),
                                  np.argsort(-scores, axis=1, kind="stable")),
                  "t2i": Rankings(tuple(captions), tuple(images),
                                  np.argsort(-scores.T, axis=1, kind="stable"))}
    truth = {i: [c for c in captions if own[c] == i] for i in images}
    folds = [_positive_set("fold", {i: truth[i] for i in images[:20]}, fold=True),
             _positive_set("fold", {i: truth[i] for i in images[20:]}, fold=True)]
    extra = {i: truth[i] + [int(c) for c in rng.choice(captions, 3, replace=False)]
             for i in images}
    plausible = _positive_set("plausible", extra)
    relevance = rng.random((40, 200)).astype(np.float32)
    views = {"i2t": RelevanceView(tuple(images), tuple(captions), relevance),
             "t2i": RelevanceView(tuple(captions), tuple(images), relevance.T.copy())}
    return directions, {
        "positive_sets": [("truth", [_positive_set("truth", truth)]), ("folded", folds),
                          ("extra", [plausible])],
        "plausible": [plausible], "pmrp_cap": 4,
        "semantic": [SemanticInput("phi", views, _positive_set("truth", truth))]}


def retrieval_records(seed: int = 0) -> list[dict]:
    """NCS as a ratio of sums, the averaging the numbers were pinned with (the default
    was then the ratio; the authors' per-query mean resamples as the other means do)."""
    directions, against = retrieval_case()
    return evaluate(directions, **against, bootstrap=RETRIEVAL_BOOTSTRAP, seed=seed,
                    ncs_averaging="ratio")


def votes() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    pairs = np.arange(40)
    first = rng.integers(1, 5, 40)
    second = np.where(rng.random(40) < 0.7, first, rng.integers(1, 5, 40))
    third = np.where(rng.random(40) < 0.6, first, rng.integers(1, 5, 40))
    return pd.DataFrame({"pair": np.tile(pairs, 3),
                         "annotator": ["ann"] * 40 + ["bob"] * 40 + ["cy"] * 40,
                         "answer": np.concatenate([first, second, third])})


def judgments() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Scores with ties (judgment correlations), and choices between captions with some
    ties and split majorities (pairwise accuracy)."""
    rng = np.random.default_rng(9)
    scores = pd.DataFrame({"image": np.repeat(np.arange(30), 3),
                           "score": rng.integers(1, 6, 90).astype(float)})
    scores["m1"] = scores["score"] + rng.normal(0, 1.0, 90)
    scores["m2"] = np.round(scores["score"] + rng.normal(0, 2.0, 90))
    rows = []
    for image in range(30):
        a, b = 2 * image, 2 * image + 1
        for judge in range(3):
            rows.append({"image": image, "caption_a_id": a, "caption_b_id": b,
                         "choice": rng.choice(["a", "b", "tie"], p=[0.5, 0.3, 0.2]),
                         "category": "HC" if image % 2 else "MM", "judge": judge})
    values = pd.DataFrame({"m1": rng.random(60), "m2": np.round(rng.random(60), 1)})
    return scores, pd.DataFrame(rows), values


def rating_pairs() -> pd.DataFrame:
    rng = np.random.default_rng(13)
    n = 60
    precision = rng.integers(1, 6, n)
    return pd.DataFrame({
        "kind": ["blind"] * n, "annotator_a": ["ann"] * n,
        "annotator_b": ["bob"] * (n // 2) + ["cy"] * (n // 2),
        "image": np.repeat(np.arange(20), 3),
        "precision_a": precision,
        "precision_b": np.where(rng.random(n) < 0.6, precision, rng.integers(1, 6, n)),
        "fluency_error_a": rng.integers(0, 2, n),
        "fluency_error_b": rng.integers(0, 2, n)})


def ratings() -> pd.DataFrame:
    rng = np.random.default_rng(17)
    truth = rng.integers(1, 6, 45)
    rows = [{"caption": c, "image": c // 3, "rater": r,
             "score": int(truth[c]) if rng.random() < 0.6 else int(rng.integers(1, 6))}
            for c in range(45) for r in ("ann", "bob", "cy") if rng.random() < 0.85]
    return pd.DataFrame(rows)


def _rows(frame: pd.DataFrame | list[dict]) -> list[dict]:
    records = frame.to_dict("records") if isinstance(frame, pd.DataFrame) else frame
    return [{key: _plain(value) for key, value in record.items()} for record in records]


def _plain(value: object) -> object:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def statistics() -> dict[str, list[dict]]:
    scores, choices, values = judgments()
    correlations, differences = score_correlations(scores, ["m1", "m2"], bootstrap=BOOTSTRAP,
                                                   seed=0)
    return {
        "retrieval": _rows(retrieval_records()),
        "verifier_agreement": _rows(verifier_agreement(votes(), bootstrap=BOOTSTRAP, seed=0)),
        "score_correlations": _rows(correlations),
        "score_differences": _rows(differences),
        "pairwise_accuracy": _rows(pairwise_accuracy(choices, values, ["m1", "m2"],
                                                     bootstrap=BOOTSTRAP, seed=0)),
        "agreement_table": _rows(agreement_table(rating_pairs(), bootstrap=BOOTSTRAP, seed=0,
                                                 scales={"precision": [1, 2, 3, 4, 5]})),
        "alpha_table": _rows(alpha_table(ratings(), "caption", "rater", "score", "image",
                                         bootstrap=BOOTSTRAP, seed=0)),
    }


@pytest.fixture(scope="module")
def computed() -> dict[str, list[dict]]:
    return statistics()


@pytest.mark.slow
@pytest.mark.parametrize("table", TABLES)
def test_bootstrap_intervals_are_the_pinned_numbers(computed, table):
    pinned = json.loads(PINNED.read_text(encoding="utf-8"))[table]
    assert any(record.get("ci_low") is not None for record in pinned)  # CIs were drawn
    _assert_same(computed[table], pinned, table)


def _assert_same(ours: list[dict], pinned: list[dict], table: str) -> None:
    assert len(ours) == len(pinned)
    for mine, theirs in zip(ours, pinned, strict=True):
        assert mine.keys() == theirs.keys()
        for key, expected in theirs.items():
            if isinstance(expected, float):
                assert mine[key] == pytest.approx(expected, rel=1e-12, abs=1e-12), (
                    table, key, theirs)
            else:
                assert mine[key] == expected, (table, key, theirs)


def test_retrieval_intervals_do_not_depend_on_the_chunk_size(computed, monkeypatch):
    """One replicate per chunk gives the records of the default chunks (all 450
    replicates in one); another seed gives other intervals."""
    monkeypatch.setattr(metrics.retrieval.evaluation, "BOOTSTRAP_CHUNK_BYTES", 1)
    _assert_same(_rows(retrieval_records()), computed["retrieval"], "retrieval")
    monkeypatch.undo()
    other = _rows(retrieval_records(seed=1))
    assert [r["value"] for r in other] == [r["value"] for r in computed["retrieval"]]
    assert [r["ci_low"] for r in other] != [r["ci_low"] for r in computed["retrieval"]]


def test_a_sets_intervals_do_not_depend_on_what_is_evaluated_with_it(computed):
    directions, against = retrieval_case()
    alone = evaluate(directions, positive_sets=against["positive_sets"][:1],
                     bootstrap=RETRIEVAL_BOOTSTRAP, seed=0)
    together = [r for r in computed["retrieval"] if r["positives"] == "truth"]
    _assert_same(_rows(alone), together, "retrieval")


def _plain_bootstrap(values: np.ndarray, queries: tuple, direction: str, seed: int
                     ) -> np.ndarray:
    """Replicate means, one replicate at a time: `len(values)` indices drawn by numpy's
    `choice` from the stream of the query list (the seed, the CRC-32 of the direction
    and of the queries' repr, as README says)."""
    rng = np.random.default_rng([seed, zlib.crc32(direction.encode()),
                                 zlib.crc32(repr(queries).encode())])
    return np.array([values[rng.choice(len(values), len(values))].mean()
                     for _ in range(RETRIEVAL_BOOTSTRAP)])


def _paper_bca(replicates: np.ndarray, estimate: float, jackknife: np.ndarray, ci: float
               ) -> tuple[float, float] | None:
    """Efron & Tibshirani (1993) section 14.3: z0 = Φ⁻¹(share of replicates below the
    estimate, ties counting half), a = Σ(θ̄ - θ_i)³ / (6 (Σ(θ̄ - θ_i)²)^{3/2}), limits at
    the percentiles Φ(z0 + (z0 + z) / (1 - a (z0 + z))), z = Φ⁻¹ of each tail's level.
    None where z0 is infinite."""
    normal = NormalDist()
    tie = np.isclose(replicates, estimate, rtol=0, atol=1e-9)
    share = ((replicates < estimate) & ~tie).mean() + tie.mean() / 2
    if not 0 < share < 1:
        return None
    z0 = normal.inv_cdf(share)
    spread = jackknife.mean() - jackknife
    accel = (spread**3).sum() / (6 * (spread**2).sum() ** 1.5)
    levels = [normal.cdf(z0 + (z0 + z) / (1 - accel * (z0 + z)))
              for z in (normal.inv_cdf((1 - ci) / 2), normal.inv_cdf((1 + ci) / 2))]
    low, high = np.percentile(replicates, [100 * level for level in levels])
    return float(low), float(high)


def test_retrieval_intervals_are_an_ordinary_bootstrap_over_queries(computed):
    """For the set over every query: the replicates equal a plain loop's means over
    numpy's index draws, and each interval is the paper's BCa of those replicates."""
    directions, against = retrieval_case()
    truth = against["positive_sets"][0][1][0]
    replicates = set_replicates(evaluation_sets(directions, positive_sets=[("truth", [truth])]),
                                RETRIEVAL_BOOTSTRAP, seed=0)[0]
    records = {(r["metric"], r["direction"], r["k"]): r for r in computed["retrieval"]
               if r["positives"] == "truth"}
    compared = 0
    for direction in ("i2t", "t2i"):
        queries = resampled_queries(truth.direction(direction))
        for key, values in positive_scores(directions[direction], truth, direction).items():
            plain = _plain_bootstrap(values, queries, direction, seed=0)
            np.testing.assert_allclose(replicates[(direction, key)], plain, rtol=0,
                                       atol=1e-12)
            jackknife = np.array([np.delete(values, i).mean() for i in range(len(values))])
            limits = _paper_bca(plain, values.mean(), jackknife, 0.95)
            record = records[(key[0], direction, key[1])]
            if limits is None or not limits[0] <= values.mean() <= limits[1]:
                continue  # ours widens such an interval to its estimate (test_confidence)
            assert (record["ci_low"], record["ci_high"]) == pytest.approx(limits, abs=1e-12)
            compared += 1
    assert compared >= 8


if __name__ == "__main__":
    PINNED.write_text(json.dumps(statistics(), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {PINNED}")
