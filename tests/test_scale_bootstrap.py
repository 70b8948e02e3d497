"""The bootstrap's draws held in bounded memory give the numbers of the whole matrix: drawn
a block of replicates at a time, and weighted sums gathered a block at a time."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from metrics.stats import correlation
from metrics.stats.confidence import leave_one_out
from metrics.stats.correlation import (
    bca,
    image_draws,
    image_weights,
    replicate_sums,
    system_differences,
    system_table,
    weighted_sums,
)


@pytest.fixture(autouse=True)
def fresh_draws():
    correlation._draw_counts.cache_clear()
    yield
    correlation._draw_counts.cache_clear()


@pytest.mark.parametrize("bootstrap", [1, 63, 64, 150])
def test_draws_in_blocks_are_one_multinomial_draw(bootstrap: int) -> None:
    """Row r of the draws is the r-th multinomial draw of the seed's generator (each image
    equally likely), whatever the block size; the jackknife's rows follow."""
    images, seed = 37, 11
    whole = np.random.default_rng(seed).multinomial(images, np.full(images, 1 / images),
                                                    size=bootstrap)
    _, counts = image_draws(np.arange(images), bootstrap, seed, jackknife=True)
    assert np.array_equal(counts[:bootstrap], whole)
    assert np.array_equal(counts[bootstrap:], leave_one_out(images))
    assert counts[:bootstrap].sum(axis=1).tolist() == [images] * bootstrap
    _, plain = image_draws(np.arange(images), bootstrap, seed)
    assert np.array_equal(plain, whole)


def test_weighted_sums_in_blocks_equal_the_whole_matrix(monkeypatch) -> None:
    """Bit for bit, with blocks of three replicates and a remainder that would be a
    single row: einsum sums a lone row of more than 8192 values another way."""
    rng = np.random.default_rng(5)
    captions = 10_000
    images = rng.permutation(np.repeat(np.arange(captions // 2), 2))  # two captions each
    columns = [rng.normal(size=captions) * 1e3, rng.integers(0, 2, size=captions) * 1.0]
    bootstrap = 21  # and 100 jackknife rows: 121 = 40 blocks of 3 and one row
    weights = image_weights(images, bootstrap, 0, jackknife=True)
    expected = [replicate_sums(weights, column) for column in columns]
    assert replicate_sums(weights[-1:], columns[0])[0] != expected[0][-1]  # why no lone row
    monkeypatch.setattr(correlation, "GATHERED_AT_ONCE", 8 * captions * 3)
    codes, counts = image_draws(images, bootstrap, 0, jackknife=True)
    assert len(counts) % 3 == 1
    for sums, want in zip(weighted_sums(codes, counts, columns), expected, strict=True):
        assert np.array_equal(sums, want)


def test_system_means_resample_as_the_whole_matrix(monkeypatch) -> None:
    """Table 2's bootstrap means, gathered in blocks of three replicates, are bit for bit
    those of each system's whole (replicates x captions) weight matrix."""
    rng = np.random.default_rng(2)
    images = 9_000  # more than 8192 captions per system: einsum's long-row path
    data = pd.DataFrame({"system": np.repeat(["A", "B"], images),
                         "image_id": np.tile(np.arange(images), 2),
                         "total": rng.choice([3.9, 4.0, 2.9, 1.8], size=2 * images)})
    monkeypatch.setattr(correlation, "GATHERED_AT_ONCE", 8 * images * 3)
    table = system_table(data, [], scores=[], bootstrap=20, ci=0.9, seed=4)
    for system, part in data.groupby("system"):
        weights = image_weights(part["image_id"], 20, 4, jackknife=True)
        values = part["total"].to_numpy()
        low, high, _ = bca(replicate_sums(weights, values) / weights.sum(axis=1),
                           values.mean(), 20, 0.9)
        row = table[table["system"] == system].iloc[0]
        assert (row["total_ci_low"], row["total_ci_high"]) == (low, high)


def test_system_differences_of_a_hand_sized_sample() -> None:
    """Two systems on three images: the difference of means, and a CI around it that
    contains it (the paired bootstrap draws images, both captions together)."""
    data = pd.DataFrame({"system": ["A", "B"] * 3, "image_id": [1, 1, 2, 2, 3, 3],
                         "total": [4.0, 3.0, 5.0, 3.5, 3.0, 2.0]})
    table = system_differences(data, bootstrap=200, ci=0.9, seed=0)
    row = table.iloc[0]
    assert (row["system"], row["versus"]) == ("A", "B")
    assert row["difference"] == pytest.approx(4.0 - 8.5 / 3)
    assert row["ci_low"] <= row["difference"] <= row["ci_high"]
