"""The pure side of match verification: chunked top-k, batch plans with gold, gold scoring,
vote aggregation, Table-2 precision/recall, model overlap and verifier agreement."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau

from metrics import match
from metrics.agreement import cohen_kappa


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
                              gold_captions={101}, size=6, rng=rng, code=code)
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
                               gold_captions={101}, size=6, rng=np.random.default_rng(3),
                               code=code)
    assert again == plan


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
    assert not match.aggregate_votes(tie).loc[0, "verdict"]  # half is not a majority
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
    # i2t: r' = {ax, ay, bz} (qw unjudged); hits {ax, bz}; positives of r's queries a, b, q
    assert table.loc["i2t", ["size", "judged", "hits"]].tolist() == [4, 3, 2]
    assert table.loc["i2t", "precision"] == pytest.approx(2 / 3)
    assert table.loc["i2t", "recall"] == pytest.approx(2 / 2)
    # t2i: query x has positives a and c; r holds a only
    assert table.loc["t2i", "precision"] == 1.0
    assert table.loc["t2i", "recall"] == pytest.approx(1 / 2)


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
