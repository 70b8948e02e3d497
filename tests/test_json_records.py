"""The JSON reports write each number as computed: pandas' `to_json` wrote fixed decimals,
which turned a Williams test's p = 2.86e-11 into 0.0."""

from __future__ import annotations

import json
import math

import pandas as pd

from reports.numbers import json_records


def test_numbers_keep_their_digits_and_missing_values_are_null():
    frame = pd.DataFrame({"p": [2.8617e-11, 1.393e-16, 0.1 + 0.2, math.nan],
                          "n": [2000, 1, 0, 3], "t": [math.inf, 6.5869713267, -0.0, 1.0],
                          "at": pd.to_datetime(["2026-11-26T19:00:00Z", None, None, None])})
    records = json.loads(json.dumps(json_records(frame)))
    assert [r["p"] for r in records] == [2.8617e-11, 1.393e-16, 0.30000000000000004, None]
    assert [r["n"] for r in records] == [2000, 1, 0, 3]
    assert [r["t"] for r in records] == [None, 6.5869713267, -0.0, 1.0]
    assert [r["at"] for r in records] == ["2026-11-26T19:00:00+00:00", None, None, None]
