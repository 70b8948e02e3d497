"""The paired difference between two systems' mean Totals (`system_differences`), checked
against a loop written from the definition: resample images with replacement, take both
systems' captions of every drawn image, difference of the two means; a BCa interval of
those replicates; significant when the interval leaves out 0 (and `metrics.stats.significance`
finds no reason to withhold the call)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from metrics.stats.confidence import bca_ci
from metrics.stats.correlation import image_draws, system_differences, system_table

BOOTSTRAP, CI, SEED = 300, 0.9, 4


def scores(images: int = 40, seed: int = 2) -> pd.DataFrame:
    """Three systems over `images` images (one caption each), and one more image that only
    system A captioned, which no difference involving another system may use."""
    rng = np.random.default_rng(seed)
    rows = [{"image_id": f"img{i}", "system": system, "total": float(value)}
            for i in range(images)
            for system, value in (("A", 4 + rng.normal(0, 0.5)), ("B", 3.9 + rng.normal(0, 0.5)),
                                  ("C", 2.5 + rng.normal(0, 0.5)))]
    rows.append({"image_id": "only-a", "system": "A", "total": 5.0})
    return pd.DataFrame(rows)


def paired_by_loop(data: pd.DataFrame, system: str, versus: str) -> tuple[float, float, float]:
    """The difference over the shared images and its BCa interval, one replicate at a
    time."""
    by_image = data.pivot(index="image_id", columns="system", values="total")
    shared = by_image[[system, versus]].dropna()
    pair = data[data["image_id"].isin(shared.index) & data["system"].isin([system, versus])]
    _, counts = image_draws(pair["image_id"], BOOTSTRAP, SEED, jackknife=True)
    order = pd.unique(pair["image_id"])  # the images in the order the draws count them
    values = []
    for drawn in counts:
        first = second = weight = 0.0
        for image, times in zip(order, drawn, strict=True):
            first += times * shared.loc[image, system]
            second += times * shared.loc[image, versus]
            weight += times
        values.append((first - second) / weight if weight else np.nan)
    values = np.array(values)
    estimate = float((shared[system] - shared[versus]).mean())
    interval = bca_ci(values[:BOOTSTRAP], estimate, values[BOOTSTRAP:], CI)
    return estimate, interval.low, interval.high


@pytest.mark.slow
def test_every_pair_matches_the_loop_and_leaves_out_unshared_images():
    data = scores()
    table = system_differences(data, bootstrap=BOOTSTRAP, ci=CI, seed=SEED)
    assert [tuple(pair) for pair in table[["system", "versus"]].to_numpy()] == [
        ("A", "B"), ("A", "C"), ("B", "C")]
    assert set(table["images"]) == {40}
    for row in table.itertuples():
        estimate, low, high = paired_by_loop(data, row.system, row.versus)
        assert row.difference == pytest.approx(estimate, abs=1e-12)
        assert (row.ci_low, row.ci_high) == pytest.approx((low, high), abs=1e-12)
        # significant: the CI leaves out 0, with no limit within resampling noise of it
        assert row.significant == (not low <= 0 <= high and row.verdict != "borderline")
    # C is 1.4 below the others on average, with a spread of 0.5 per caption
    assert table.set_index(["system", "versus"]).loc[("B", "C"), "significant"]


def test_a_constant_shift_is_significant_with_a_point_interval():
    data = scores()
    shifted = data[data["system"] == "A"].assign(system="A-0.25",
                                                 total=lambda f: f["total"] - 0.25)
    data = pd.concat([data[data["system"] == "A"], shifted], ignore_index=True)
    row = system_differences(data, bootstrap=BOOTSTRAP, ci=CI, seed=SEED).iloc[0]
    assert (row["system"], row["versus"]) == ("A", "A-0.25")
    assert row["difference"] == pytest.approx(0.25)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((0.25, 0.25))
    assert row["significant"]


def test_without_a_bootstrap_there_is_no_interval_and_no_verdict():
    table = system_differences(scores(), bootstrap=0, ci=CI, seed=SEED)
    assert table["ci_low"].isna().all() and not table["significant"].any()
    assert table["verdict"].isna().all()


def test_every_mean_of_the_systems_table_has_its_interval():
    """A system's mean P (or any column) and its BCa interval over images, from a loop."""
    data = scores().assign(precision=lambda f: f["total"].round())
    table = system_table(data, [], scores=["precision"], bootstrap=BOOTSTRAP, ci=CI,
                         seed=SEED).set_index("system")
    part = data[data["system"] == "B"]
    _, counts = image_draws(part["image_id"], BOOTSTRAP, SEED, jackknife=True)
    values = counts @ part["precision"].to_numpy() / counts.sum(axis=1)
    interval = bca_ci(values[:BOOTSTRAP], part["precision"].mean(), values[BOOTSTRAP:], CI)
    assert (table.loc["B", "precision_ci_low"], table.loc["B", "precision_ci_high"]) == (
        pytest.approx((interval.low, interval.high), abs=1e-12))
