"""Cohen's weighted kappa on a dimension whose values are not equally spaced (Total: 2.0,
2.4, 3.0, 3.5 …) weighs a disagreement by the distance between the two values, as Cohen
(1968) defines it for scale values: w = |x - y| / (max - min), or its square. The rank of a
value among those observed is not its value: the expected numbers here come from the
formula, in a plain loop over the confusion matrix."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from metrics.stats.agreement import agreement_table, kappa_from_pairs

# Totals of two annotators' blind ratings of six captions (the trial's project): observed
# values 2.0, 2.4, 3.0, 3.5, 4.0, 4.5, so ranks and values are spaced differently
FIRST = [3.0, 3.5, 3.5, 4.5, 2.0, 4.0]
SECOND = [3.5, 3.0, 4.5, 4.5, 2.4, 3.5]


def weighted_kappa(first: list[float], second: list[float], power: int | None) -> float:
    """Cohen 1968: kappa_w = 1 - sum(w * p_observed) / sum(w * p_expected) over the
    confusion matrix of the observed values, w = (|x - y| / (max - min)) ** power, or
    0/1 (unweighted) when `power` is None."""
    values = sorted(set(first) | set(second))
    span = values[-1] - values[0]
    n = len(first)
    counts = {(x, y): 0 for x in values for y in values}
    for x, y in zip(first, second, strict=True):
        counts[x, y] += 1
    row = {x: sum(counts[x, y] for y in values) / n for x in values}
    column = {y: sum(counts[x, y] for x in values) / n for y in values}
    observed = expected = 0.0
    for x in values:
        for y in values:
            weight = float(x != y) if power is None else (abs(x - y) / span) ** power
            observed += weight * counts[x, y] / n
            expected += weight * row[x] * column[y]
    return 1 - observed / expected


def rank_weighted_kappa(first: list[float], second: list[float], power: int) -> float:
    """The same with each value replaced by its rank among the observed values: what a
    label-index weighting (scikit-learn's) computes."""
    rank = {value: index for index, value in enumerate(sorted(set(first) | set(second)))}
    return weighted_kappa([rank[x] for x in first], [rank[y] for y in second], power)


@pytest.mark.parametrize(("weights", "power"), [("linear", 1), ("quadratic", 2)])
def test_weights_are_the_distance_between_values(weights, power):
    expected = weighted_kappa(FIRST, SECOND, power)
    assert expected != pytest.approx(rank_weighted_kappa(FIRST, SECOND, power), abs=1e-3)
    assert kappa_from_pairs(np.array(FIRST), np.array(SECOND), weights) == pytest.approx(
        expected, abs=1e-12)


def test_the_trial_totals_by_hand():
    """The trial's hand computation (value distances): linear 0.446, quadratic 0.738;
    ranks would give 0.419 and 0.718."""
    first, second = np.array(FIRST), np.array(SECOND)
    assert kappa_from_pairs(first, second, "linear") == pytest.approx(0.446, abs=5e-4)
    assert kappa_from_pairs(first, second, "quadratic") == pytest.approx(0.738, abs=5e-4)
    assert kappa_from_pairs(first, second) == pytest.approx(weighted_kappa(FIRST, SECOND, None))


def test_unused_levels_of_a_scale_change_no_distance():
    """Values 1, 2, 4, 5 of a 1-5 scale: with or without the unused level 3 among the
    categories, 2 and 4 are 2 apart."""
    first, second = [1, 2, 4, 5, 2, 4, 1, 5], [2, 4, 4, 5, 1, 5, 2, 4]
    for power, weights in ((1, "linear"), (2, "quadratic")):
        expected = weighted_kappa(first, second, power)
        assert expected != pytest.approx(rank_weighted_kappa(first, second, power), abs=1e-3)
        for categories in (None, [1, 2, 3, 4, 5]):
            assert kappa_from_pairs(np.array(first), np.array(second), weights,
                                    categories) == pytest.approx(expected, abs=1e-12)


def test_the_agreement_table_weighs_total_by_value():
    pairs = pd.DataFrame({"kind": "blind", "annotator_a": "alice", "annotator_b": "bob",
                          "image": [1, 1, 2, 2, 3, 3], "total_a": FIRST, "total_b": SECOND})
    table = agreement_table(pairs, bootstrap=0)
    overall = table[table["annotator_a"].isna()].set_index("statistic")["value"]
    assert overall["kappa_linear"] == pytest.approx(weighted_kappa(FIRST, SECOND, 1))
    assert overall["kappa_quadratic"] == pytest.approx(weighted_kappa(FIRST, SECOND, 2))
