"""The pure side of match verification: chunked top-k, batch plans with gold, gold scoring,
vote aggregation, Table-2 precision/recall, model overlap and verifier agreement."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import kendalltau

from metrics.retrieval import match
from metrics.stats.agreement import cohen_kappa


def brute_top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Each row's k best columns by (score descending, index ascending), the slow way."""
    return np.array([sorted(range(scores.shape[1]), key=lambda j: (-scores[i, j], j))[:k]
                     for i in range(scores.shape[0])])


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(match, "CHUNK_CELLS", 150)  # several chunks on a tiny matrix


def test_top_k_in_chunks_equals_a_full_sort_ties_to_the_lower_index(small_chunks):
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 6, (41, 29)).astype(np.float32)  # many ties
    assert (match.top_k_rows(scores, 5) == brute_top_k(scores, 5)).all()
    assert (match.top_k_columns(scores, 5) == brute_top_k(scores.T, 5)).all()
    assert (match.top_k_columns(scores, 60) == brute_top_k(scores.T, 60)).all()
    rows, columns = np.array([0, 3, 4, 40]), np.array([2, 9, 28])
    assert (match.top_k_rows(scores, 4, rows) == brute_top_k(scores, 4)[rows]).all()
    assert (match.top_k_columns(scores, 4, columns) == brute_top_k(scores.T, 4)[columns]).all()


def test_top_k_reads_a_memory_map(tmp_path, small_chunks):
    scores = np.random.default_rng(1).random((30, 20)).astype(np.float32)
    np.save(tmp_path / "m.npy", scores)
    mapped = np.load(tmp_path / "m.npy", mmap_mode="r")
    assert (match.top_k_columns(mapped, 3) == brute_top_k(scores.T, 3)).all()


def test_nan_score_is_named_by_row_and_column(small_chunks):
    scores = np.zeros((10, 8), dtype=np.float32)
    scores[6, 2] = np.nan
    for function in (match.top_k_rows, match.top_k_columns):
        with pytest.raises(ValueError, match="row 7, column 3 is nan"):
            function(scores, 2)


def test_proposals_leave_out_known_positives_and_keep_ranks():
    lists = {"i2t": (np.array([10, 11]), np.array([[100, 101, 102], [101, 103, 100]])),
             "t2i": (np.array([100]), np.array([[11, 10, 12]]))}
    own_image = {100: 10, 101: 11, 102: 12, 103: 11}
    frame = match.proposals(lists, 2, own_image)
    assert sorted(map(tuple, frame.to_numpy().tolist())) == [
        (10, 101, "i2t", 2), (11, 100, "t2i", 1)]


def test_batch_plan_has_candidates_and_one_gold_of_each_kind():
    rng = np.random.default_rng(3)
    images, captions = np.arange(1, 11), np.arange(101, 141)
    caption_image = np.repeat(images, 4)
    candidates = np.array([[i, c] for i, c in zip(images[::-1], captions[:23], strict=False)]
                          + [[1, 130 + k] for k in range(10)])
    code = 1 << 32
    near = np.unique(np.concatenate([images[:, None] * code + captions[None, :12]]).ravel())
    plan = match.plan_batches(candidates, image_ids=images, caption_ids=captions,
                              caption_image=caption_image, excluded_codes=near,
                              true_captions=np.arange(len(captions)), gold_captions={101},
                              size=6, rng=rng, code=code)
    assert [len(batch) for batch in plan] == [6, 6, 6, 6, 6]  # 20 candidates / 4 per batch
    placed = [(i, c) for batch in plan for i, c, gold in batch if gold is None]
    assert sorted(placed) == sorted(map(tuple, candidates.tolist()))
    for batch in plan:
        golds = sorted(str(gold) for _, _, gold in batch if gold)
        assert golds == ["negative", "positive"]
        (pi, pc), = [(i, c) for i, c, g in batch if g == "positive"]
        assert caption_image[pc - 101] == pi and pc != 101
        (ni, nc), = [(i, c) for i, c, g in batch if g == "negative"]
        assert ni * code + nc not in set(near.tolist()) and caption_image[nc - 101] != ni
    again = match.plan_batches(candidates, image_ids=images, caption_ids=captions,
                               caption_image=caption_image, excluded_codes=near,
                               true_captions=np.arange(len(captions)), gold_captions={101},
                               size=6, rng=np.random.default_rng(3), code=code)
    assert again == plan


def test_known_positives_come_only_from_captions_known_to_be_true():
    """A machine caption may be wrong about its own image: a known positive is drawn only
    from the captions named true (references, a trusted system), reused when too few."""
    images, captions = np.arange(1, 11), np.arange(101, 141)
    trusted = np.array([0, 4])  # captions 101 (image 1) and 105 (image 2)
    candidates = np.array([[images[k % 10], captions[(k * 7) % 40]] for k in range(20)])
    plan = match.plan_batches(candidates, image_ids=images, caption_ids=captions,
                              caption_image=np.repeat(images, 4),
                              excluded_codes=np.array([], dtype=np.int64),
                              true_captions=trusted, gold_captions=set(), size=6,
                              rng=np.random.default_rng(0), code=1 << 32)
    positives = {(i, c) for batch in plan for i, c, gold in batch if gold == "positive"}
    assert positives == {(1, 101), (2, 105)}


def test_batch_size_below_three_and_no_room_for_negatives_are_refused():
    with pytest.raises(ValueError, match="at least 3"):
        match.pack_batches(10, 2, np.random.default_rng(0))
    every = np.array([i * 10 + c for i in range(2) for c in range(3)])
    with pytest.raises(ValueError, match="found 0 of the 1 known negatives"):
        match.draw_negatives(1, np.arange(2), np.arange(3), every, 10,
                             np.random.default_rng(0))


def test_gold_scoring_and_quality_tables_flag_a_wrong_gold():
    answers = pd.DataFrame({
        "annotator": ["ann"] * 4 + ["bob"] * 3,
        "batch": [1, 1, 1, 2, 1, 1, 1],
        "claim": [1, 1, 1, 2, 3, 3, 3],
        "status": ["active"] * 7,
        "gold": ["positive", "negative", None, "positive", "positive", "negative", None],
        "answer": [2, 4, 1, 3, 1, 2, 4],
        "seconds": [5.0, 1.0, 7.0, 3.0, 0.5, 0.4, 0.3],
    })
    per_annotator, per_batch = match.quality_tables(answers, rushed_seconds=2)
    ann = per_annotator.set_index("annotator").loc["ann"]
    assert (ann["gold_right"], ann["gold_total"], ann["rushed"]) == (2, 3, 1)
    assert ann["gold_accuracy"] == pytest.approx(2 / 3)
    assert ann["median_seconds"] == pytest.approx(4.0)
    flagged = per_batch.set_index(["batch", "annotator"])["flagged"]
    assert not flagged[(1, "ann")] and flagged[(2, "ann")] and flagged[(1, "bob")]


def test_aggregation_by_majority_under_each_rule_and_min_votes():
    votes = pd.DataFrame({"image": ["a"] * 3 + ["b"] * 2 + ["c"],
                          "caption": ["x"] * 3 + ["y"] * 2 + ["z"],
                          "answer": [1, 2, 4, 2, 2, 1]})
    loose = match.aggregate_votes(votes, "yes+partial").set_index("image")
    assert loose.loc["a", "verdict"] and loose.loc["b", "verdict"]
    strict = match.aggregate_votes(votes, "yes").set_index("image")
    assert not strict.loc["a", "verdict"] and not strict.loc["b", "verdict"]
    two = match.aggregate_votes(votes, "yes+partial", min_votes=2).set_index("image")
    assert pd.isna(two.loc["c", "verdict"]) and two.loc["b", "verdict"]
    tie = pd.DataFrame({"image": ["a", "a"], "caption": ["x", "x"], "answer": [1, 4]})
    # half is a majority neither way: undecided, not negative
    assert pd.isna(match.aggregate_votes(tie).loc[0, "verdict"])
    with pytest.raises(ValueError, match="rule must be"):
        match.aggregate_votes(votes, "maybe")


def test_table_2_precision_and_recall_on_the_judged_part_only():
    existing = pd.DataFrame({"direction": ["i2t"] * 4 + ["t2i"],
                             "image": ["a", "a", "b", "q", "a"],
                             "caption": ["x", "y", "z", "w", "x"]})
    verified = pd.DataFrame({"image": ["a", "a", "b", "c", "e"],
                             "caption": ["x", "y", "z", "x", "v"],
                             "verdict": [True, False, True, True, None]})
    table = match.positive_set_quality(existing, verified).set_index("direction")
    # i2t: r' = {ax, ay, bz} (qw unjudged: query q dropped); hits {ax, bz}
    assert table.loc["i2t", ["queries", "queries_kept", "recall_queries"]].tolist() == [3, 2, 2]
    assert table.loc["i2t", ["size", "judged", "hits"]].tolist() == [4, 3, 2]
    # per query: a 1/2 precise, recalls its one positive x; b 1 and 1
    assert table.loc["i2t", "precision"] == pytest.approx((1 / 2 + 1) / 2)
    assert table.loc["i2t", "recall"] == pytest.approx(1.0)
    # pooled over pairs: 2 of the 3 judged pairs; the 2 positives of a and b both found
    assert table.loc["i2t", "pooled_precision"] == pytest.approx(2 / 3)
    assert table.loc["i2t", "pooled_recall"] == pytest.approx(2 / 2)
    # t2i: query x has positives a and c; r holds a only
    assert table.loc["t2i", "precision"] == table.loc["t2i", "pooled_precision"] == 1.0
    assert table.loc["t2i", "recall"] == table.loc["t2i", "pooled_recall"] == pytest.approx(0.5)
    assert list(table.reset_index().columns) == list(match.QUALITY_COLUMNS)


def test_table_2_by_hand_from_the_papers_section_3_3():
    """ECCV Caption section 3.3, worked by hand. Existing set r and verdicts (T: verified
    positive, F: verified negative, ?: undecided, -: never judged):

    i2t (image queries; captions in r_i):
      A: r = {a1 T, a2 F, a3 T};  a4 T is judged but not in r
         r' = {a1, a2, a3}, t = {a1, a3, a4}: P = 2/3, R = 1 - |{a4}|/3 = 2/3
      B: r = {b1 T, b2 -};  b3 ?        r' = {b1}, t = {b1}:  P = 1, R = 1
      C: r = {c1 -};  c2 T              r' = ∅: dropped (from both means)
      D: r = {d1 F, d2 F}               r' = {d1, d2}, t = ∅: P = 0, recall dropped
      E: r = {e1 T};  e2 T, e3 F        r' = {e1}, t = {e1, e2}: P = 1, R = 1/2
      (G with g1 T is no query of r.)
      Prec = (2/3 + 1 + 0 + 1) / 4 = 2/3;  Recall = (2/3 + 1 + 1/2) / 3 = 13/18
      pooled: r' has 7 pairs, 4 positive: 4/7; r's queries have 7 verified positives
      (a1 a3 a4 b1 c2 e1 e2), 4 in r': 4/7.
    t2i (caption queries; images in r_i):
      a1: r = {A T}                     r' = {A}, t = {A}: P = 1, R = 1
      a4: r = {A T};  (G, a4) T         r' = {A}, t = {A, G}: P = 1, R = 1/2
      d1: r = {D F}                     r' = {D}, t = ∅: P = 0, recall dropped
      c1: r = {C -}                     r' = ∅: dropped
      Prec = (1 + 1 + 0) / 3 = 2/3;  Recall = (1 + 1/2) / 2 = 3/4
      pooled: 2 of 3 judged pairs; positives of a1, a4, d1, c1: (A,a1) (A,a4) (G,a4),
      2 in r': 2/3 and 2/3."""
    i2t = [("A", "a1"), ("A", "a2"), ("A", "a3"), ("B", "b1"), ("B", "b2"), ("C", "c1"),
           ("D", "d1"), ("D", "d2"), ("E", "e1")]
    t2i = [("A", "a1"), ("A", "a4"), ("D", "d1"), ("C", "c1")]
    existing = pd.DataFrame([("i2t", *pair) for pair in i2t] + [("t2i", *pair) for pair in t2i],
                            columns=["direction", "image", "caption"])
    verdicts = {("A", "a1"): True, ("A", "a2"): False, ("A", "a3"): True, ("A", "a4"): True,
                ("B", "b1"): True, ("B", "b3"): None, ("C", "c2"): True, ("D", "d1"): False,
                ("D", "d2"): False, ("E", "e1"): True, ("E", "e2"): True, ("E", "e3"): False,
                ("G", "g1"): True, ("G", "a4"): True}
    verified = pd.DataFrame([(i, c, v) for (i, c), v in verdicts.items()],
                            columns=["image", "caption", "verdict"])
    table = match.positive_set_quality(existing, verified).set_index("direction")
    counts = ["queries", "queries_kept", "recall_queries", "recall_dropped", "size", "judged",
              "hits", "verified_positives"]
    assert table.loc["i2t", counts].tolist() == [5, 4, 3, 1, 9, 7, 4, 7]
    assert table.loc["i2t", "precision"] == pytest.approx(2 / 3, abs=1e-15)
    assert table.loc["i2t", "recall"] == pytest.approx(13 / 18, abs=1e-15)
    assert table.loc["i2t", "pooled_precision"] == pytest.approx(4 / 7, abs=1e-15)
    assert table.loc["i2t", "pooled_recall"] == pytest.approx(4 / 7, abs=1e-15)
    assert table.loc["t2i", counts].tolist() == [4, 3, 2, 1, 4, 3, 2, 3]
    assert table.loc["t2i", "precision"] == pytest.approx(2 / 3, abs=1e-15)
    assert table.loc["t2i", "recall"] == pytest.approx(3 / 4, abs=1e-15)
    assert table.loc["t2i", "pooled_precision"] == pytest.approx(2 / 3, abs=1e-15)
    assert table.loc["t2i", "pooled_recall"] == pytest.approx(2 / 3, abs=1e-15)


def test_table_2_counts_every_pair_shown_in_h_verdict_or_not():
    """Section 3.3's h_i is the query's pairs shown to people: a pair left undecided (a
    tie, too few votes) is in h_i, so in r'_i when the set has it, and is not in t_i.
    i2t (image queries; ?: shown, undecided; -: never shown):
      A: r = {a1 T, a2 ?(tie), a3 ?(too few votes)}
         r' = {a1, a2, a3}, t = {a1}: P = 1/3, R = 1
      B: r = {b1 ?}                     r' = {b1}, t = ∅: P = 0, recall dropped
      C: r = {c1 -};  c2 T              r' = ∅: dropped
      Prec = (1/3 + 0) / 2 = 1/6;  Recall = 1 / 1 = 1
      pooled: r' has 4 pairs, 1 positive: 1/4; r's queries have 2 verified positives
      (a1, c2), 1 in r': 1/2.
    (Counting only decided pairs in h, A's r' would be {a1} with P = 1, and B would be
    dropped: Prec = 1.)"""
    existing = pd.DataFrame([("i2t", "A", "a1"), ("i2t", "A", "a2"), ("i2t", "A", "a3"),
                             ("i2t", "B", "b1"), ("i2t", "C", "c1")],
                            columns=["direction", "image", "caption"])
    verified = pd.DataFrame([("A", "a1", True), ("A", "a2", None), ("A", "a3", None),
                             ("B", "b1", None), ("C", "c2", True)],
                            columns=["image", "caption", "verdict"])
    row = match.positive_set_quality(existing, verified).set_index("direction").loc["i2t"]
    counts = ["queries", "queries_kept", "recall_queries", "recall_dropped", "size", "judged",
              "hits", "verified_positives"]
    assert row[counts].tolist() == [3, 2, 1, 1, 5, 4, 1, 2]
    assert row["precision"] == pytest.approx(1 / 6, abs=1e-15)
    assert row["recall"] == pytest.approx(1.0, abs=1e-15)
    assert row["pooled_precision"] == pytest.approx(1 / 4, abs=1e-15)
    assert row["pooled_recall"] == pytest.approx(1 / 2, abs=1e-15)


def _table_2_loop(existing: pd.DataFrame, verified: pd.DataFrame, direction: str
                  ) -> tuple[float, float, int, int]:
    """Section 3.3 one query at a time: (Prec, Recall, queries kept, queries in recall).
    h_i is every pair of the query shown to people (a row of `verified`, verdict or not)."""
    side = 0 if direction == "i2t" else 1
    r_pairs = {(i, c) for d, i, c in existing.itertuples(index=False) if d == direction}
    shown = {(i, c) for i, c, _ in verified.itertuples(index=False)}
    verified_positive = {(i, c) for i, c, v in verified.itertuples(index=False) if v is True}
    precisions, recalls = [], []
    for query in sorted({pair[side] for pair in r_pairs}):
        r_i = {pair for pair in r_pairs if pair[side] == query}
        h_i = {pair for pair in shown if pair[side] == query}
        t_i = {pair for pair in verified_positive if pair[side] == query}
        r_prime = r_i & h_i
        if not r_prime:
            continue
        precisions.append(len(r_prime & t_i) / len(r_prime))
        if t_i:
            recalls.append(1 - len(t_i - r_prime) / len(t_i))
    return (sum(precisions) / len(precisions) if precisions else float("nan"),
            sum(recalls) / len(recalls) if recalls else float("nan"),
            len(precisions), len(recalls))


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), images=st.integers(1, 6), captions=st.integers(1, 8),
       density=st.floats(0.0, 1.0))
def test_table_2_equals_a_loop_over_queries_on_random_sets(seed, images, captions, density):
    rng = np.random.default_rng(seed)
    pairs = [(f"i{i}", f"c{c}") for i in range(images) for c in range(captions)]
    rows = [(d, i, c) for d in ("i2t", "t2i") for i, c in pairs if rng.random() < density]
    existing = pd.DataFrame(rows, columns=["direction", "image", "caption"])
    verdict = rng.choice(np.array([True, False, None], dtype=object), len(pairs))
    judged = rng.random(len(pairs)) < 0.7  # the rest were never shown to anyone
    verified = pd.DataFrame([(i, c, v) for (i, c), v, j in zip(pairs, verdict, judged,
                                                                strict=True) if j],
                            columns=["image", "caption", "verdict"])
    table = match.positive_set_quality(existing, verified).set_index("direction")
    for direction in ("i2t", "t2i"):
        precision, recall, kept, in_recall = _table_2_loop(existing, verified, direction)
        row = table.loc[direction]
        assert (row["queries_kept"], row["recall_queries"]) == (kept, in_recall)
        assert row["recall_dropped"] == kept - in_recall
        for ours, loop in ((row["precision"], precision), (row["recall"], recall)):
            assert (np.isnan(ours) and np.isnan(loop)) or abs(ours - loop) <= 1e-12


def test_kendall_tau_of_top_lists_equals_scipy_on_the_union():
    rng = np.random.default_rng(5)
    first = np.array([rng.permutation(40)[:25] for _ in range(60)])
    second = np.array([rng.permutation(40)[:25] for _ in range(60)])

    def reference(a: np.ndarray, b: np.ndarray) -> float:
        union = list(dict.fromkeys([*a.tolist(), *b.tolist()]))
        rank_a = [a.tolist().index(x) if x in a else len(a) for x in union]
        rank_b = [b.tolist().index(x) if x in b else len(b) for x in union]
        return kendalltau(rank_a, rank_b).statistic

    ours = match.kendall_tau_top_lists(first, second)
    assert np.allclose(ours, [reference(a, b) for a, b in zip(first, second, strict=True)])
    assert match.kendall_tau_top_lists(first[:1], first[:1])[0] == pytest.approx(1.0)


def test_model_bias_counts_positives_per_proposer():
    proposed = pd.DataFrame({"model": ["m1", "m1", "m2", "m2"],
                             "image": ["a", "b", "a", "c"], "caption": ["x", "y", "x", "z"]})
    verdicts = pd.DataFrame({"image": ["a", "b", "c"], "caption": ["x", "y", "z"],
                             "verdict": [True, False, True]})
    table = match.model_bias(proposed, verdicts).set_index("model")
    assert table.loc["m1"].tolist()[:4] == [2, 2, 1, 0]
    assert table.loc["m2"].tolist()[:4] == [2, 2, 2, 1]
    assert table.loc["m2", "positive_share"] == 1.0


@pytest.mark.slow
def test_verifier_agreement_reuses_kappa_and_reports_undefined_with_reason():
    rng = np.random.default_rng(2)
    pairs = np.arange(30)
    first = rng.integers(1, 5, 30)
    second = np.where(rng.random(30) < 0.7, first, rng.integers(1, 5, 30))
    votes = pd.DataFrame({"pair": np.concatenate([pairs, pairs]),
                          "annotator": ["ann"] * 30 + ["bob"] * 30,
                          "answer": np.concatenate([first, second])})
    table = match.verifier_agreement(votes, bootstrap=50, seed=1).set_index("statistic")
    expected = cohen_kappa(votes, "pair", "annotator", "answer", "linear", [1, 2, 3, 4])
    row = table.loc["kappa_linear:answer"]
    assert row["value"] == pytest.approx(expected)
    assert row["ci_low"] <= row["value"] <= row["ci_high"] and row["n"] == 30
    same = votes.assign(answer=1)
    undefined = match.verifier_agreement(same, bootstrap=0).set_index("statistic")
    assert undefined.loc["kappa_linear:answer", "value"] is None
    assert undefined.loc["kappa_linear:answer", "note"].startswith("undefined:")
