"""The report's statistics stay the same numbers for the same seed: every table of a
synthetic project (ties in the human scores and in the metrics, two subsets) against values
recorded from the straightforward implementation (`tests/pinned/report_statistics.json`,
written by `python -m tests.test_report_pinned` from that implementation)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from metrics.stats.correlation import (
    correlation_records,
    pairwise_records,
    strict_best_worst,
    system_differences,
    system_table,
    williams_records,
)

PINNED = Path(__file__).parent / "pinned" / "report_statistics.json"
METRICS = ["m-smooth", "m-tied", "m-coarse"]
THUMB_SCORES = ["precision", "recall", "fluency", "conciseness", "inclusive"]


def synthetic_scores(images: int = 120, systems: int = 5, seed: int = 11) -> pd.DataFrame:
    """Final scores of `systems` captions per image with many ties, and three metrics:
    continuous, rounded to two decimals and five-valued."""
    rng = np.random.default_rng(seed)
    rows = []
    for image in range(images):
        for system in range(systems):
            precision = int(rng.integers(1, 6))
            recall = int(rng.integers(1, 6))
            penalty = float(rng.choice([0.0, 0.0, 0.0, 0.5, 1.0]))
            rows.append({"caption_id": len(rows), "image_id": image,
                         "system": "Human" if system == 0 else f"sys{system}",
                         "precision": precision, "recall": recall, "fluency": penalty,
                         "conciseness": 0.0, "inclusive": 0.0,
                         "total": (precision + recall) / 2 - penalty})
    data = pd.DataFrame(rows)
    signal = data["total"].to_numpy() + rng.normal(scale=1.5, size=len(data))
    data["m-smooth"] = signal
    data["m-tied"] = np.round(signal / 3, 1)
    data["m-coarse"] = np.clip(np.round(signal), 0, 4)
    return data


def report_tables(bootstrap: int = 200, seed: int = 3) -> dict[str, list[dict]]:
    data = synthetic_scores()
    subsets = {"all": data["system"].notna(), "without:Human": data["system"] != "Human"}
    tables = {
        "systems": system_table(data, METRICS, scores=THUMB_SCORES, bootstrap=bootstrap,
                                ci=0.9, seed=seed),
        "differences": system_differences(data, bootstrap=bootstrap, ci=0.9, seed=seed),
        "strict": strict_best_worst(data),
        "correlations": correlation_records(data, METRICS, subsets, bootstrap=bootstrap,
                                            ci=0.9, seed=seed),
        "williams": williams_records(data, METRICS, subsets),
        "pairwise": pairwise_records(data, METRICS, bootstrap=bootstrap, ci=0.9, seed=seed),
    }
    return {name: json.loads(table.to_json(orient="records", double_precision=15))
            for name, table in tables.items()}


def test_report_numbers_are_unchanged_for_the_same_seed():
    pinned = json.loads(PINNED.read_text(encoding="utf-8"))
    current = report_tables()
    assert current.keys() == pinned.keys()
    for name, rows in pinned.items():
        assert len(current[name]) == len(rows), name
        for now, before in zip(current[name], rows, strict=True):
            assert now.keys() == before.keys(), name
            for key, value in before.items():  # JSON writes NaN as null
                if isinstance(value, float):
                    np.testing.assert_allclose(now[key], value, rtol=1e-12, atol=1e-14,
                                               err_msg=f"{name}: {before} {key}")
                else:
                    assert now[key] == value, (name, before, key)


if __name__ == "__main__":
    PINNED.write_text(json.dumps(report_tables(), indent=0) + "\n", encoding="utf-8")
