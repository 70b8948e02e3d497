"""Ranking files are encoded and checked for repeats a block of rows at a time, on several
threads when cores are idle: the rankings, and the query an error names (the first one
with a problem, as the file orders them), must not depend on the blocks or the threads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import metrics.retrieval.rankings
from metrics.retrieval.rankings import RankingsError, read_rankings_json

QUERIES, ITEMS, DEPTH = 300, 120, 40


def _lists(seed: int, *, ragged: bool) -> dict[str, list[int]]:
    rng = np.random.default_rng(seed)
    item_ids = rng.choice(10**6, ITEMS, replace=False)
    lengths = rng.integers(1, DEPTH + 1, QUERIES) if ragged else np.full(QUERIES, DEPTH)
    return {str(10 * q + 3): [int(i) for i in rng.permutation(item_ids)[:length]]
            for q, length in enumerate(lengths)}


def _read(path: Path, monkeypatch: pytest.MonkeyPatch, *, threads: int, rows: int
          ) -> metrics.retrieval.rankings.Rankings:
    monkeypatch.setattr(metrics.retrieval.rankings, "idle_cores", lambda: threads)
    monkeypatch.setattr(metrics.retrieval.rankings, "_DUPLICATE_CHUNK", rows * (ITEMS + 1))
    monkeypatch.setattr(metrics.retrieval.rankings, "_ENCODE_CHUNK", rows * DEPTH)
    return read_rankings_json(path)


@pytest.mark.parametrize("ragged", [False, True])
def test_blocks_and_threads_read_the_same_rankings(tmp_path, monkeypatch, ragged):
    lists = _lists(1, ragged=ragged)
    path = tmp_path / "i2t.json"
    path.write_text(json.dumps(lists), encoding="utf-8")
    whole = _read(path, monkeypatch, threads=1, rows=QUERIES)
    assert whole.queries == tuple(int(q) for q in lists)
    assert [[whole.items[i] for i in row if i >= 0] for row in whole.order.tolist()] == list(
        lists.values())
    for threads, rows in ((2, 7), (3, 1), (2, QUERIES)):
        pieces = _read(path, monkeypatch, threads=threads, rows=rows)
        assert pieces.items == whole.items
        assert np.array_equal(pieces.order, whole.order)


@pytest.mark.parametrize(("rows", "threads"), [(QUERIES, 1), (7, 2), (1, 3)])
def test_the_first_bad_list_is_named_whatever_the_blocks(tmp_path, monkeypatch, rows, threads):
    lists = _lists(2, ragged=False)
    keys = list(lists)
    lists[keys[250]][5] = lists[keys[250]][3]  # a later block repeats an item too
    lists[keys[100]][9] = lists[keys[100]][0]
    path = tmp_path / "t2i.json"
    path.write_text(json.dumps(lists, indent=0), encoding="utf-8")
    line = path.read_text(encoding="utf-8").splitlines().index(f'"{keys[100]}": [') + 1
    with pytest.raises(RankingsError, match=(
            rf"t2i\.json:{line}: query {keys[100]}: item {lists[keys[100]][0]} appears "
            "twice in the list")):
        _read(path, monkeypatch, threads=threads, rows=rows)


@pytest.mark.parametrize(("rows", "threads"), [(QUERIES, 1), (7, 2), (1, 3)])
def test_an_empty_list_is_named_whatever_the_blocks(tmp_path, monkeypatch, rows, threads):
    lists = _lists(3, ragged=True)
    keys = list(lists)
    lists[keys[260]] = lists[keys[260]] + lists[keys[260]][:1]  # later: a repeat
    lists[keys[120]] = []
    path = tmp_path / "i2t.json"
    path.write_text(json.dumps(lists), encoding="utf-8")
    with pytest.raises(RankingsError, match=rf"query {keys[120]}: the ranked list is empty"):
        _read(path, monkeypatch, threads=threads, rows=rows)
