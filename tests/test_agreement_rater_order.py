"""The overall Cohen's kappa over blind pairs of different annotators does not depend on
their names: each pair of raters is taken in one order, that of their first shared
caption's two ratings (blind raters have no first and second roles, and ordering them by
name moved the pooled kappa when an annotator was renamed: 0.308 -> 0.314 in a trial)."""

from __future__ import annotations

import csv

from sqlalchemy import update

from reports.agreement import agreement_report
from storage import import_captions
from storage.models import Annotator
from tests.app_helpers import sample_engine
from tests.conftest import SAMPLE_CSV

# image -> (first rater, second rater): the first rates high and the second low, so that
# the pooled marginals depend on which of each pair counts as "first"
PAIRS = {"img01": ("alice", "bob"), "img02": ("alice", "bob"),
         "img03": ("carol", "dave"), "img04": ("carol", "dave")}


def overall_and_pairs(engine) -> tuple[dict, dict]:
    table = agreement_report(engine, bootstrap=0)
    blind = table[(table["kind"] == "blind") & (table["dimension"] == "precision")
                  & table["statistic"].str.startswith("kappa")]
    pooled = blind["annotator_a"].isna() | (blind["annotator_a"] == "")  # over every pair
    overall = {row.statistic: row.value for row in blind[pooled].itertuples()}
    pairs = {(frozenset((row.annotator_a, row.annotator_b)), row.statistic): row.value
             for row in blind[~pooled].itertuples()}
    return overall, pairs


def test_renaming_an_annotator_leaves_the_overall_kappa(tmp_path):
    engine = sample_engine(tmp_path)
    with SAMPLE_CSV.open(encoding="utf-8", newline="") as handle:
        captions = [row for row in csv.DictReader(handle) if row["image_id"] in PAIRS]
    rows = []
    for number, caption in enumerate(captions):
        first, second = PAIRS[caption["image_id"]]
        for minute, (name, precision) in enumerate(((first, 5 - number % 2),
                                                    (second, 2 + number % 3))):
            rows.append({"image_id": caption["image_id"], "system": caption["system"],
                         "caption": caption["caption"], "annotator": name, "stage": "1",
                         "precision": precision, "recall": 3, "double_rating": "true",
                         "created_at": f"2026-11-01T10:{2 * number + minute:02d}:00"})
    ratings = tmp_path / "blind.csv"
    with ratings.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    import_captions(engine, ratings, actor="t")
    before, pairs_before = overall_and_pairs(engine)
    with engine.begin() as connection:  # "dave" now sorts before "carol"
        connection.execute(update(Annotator.__table__)
                           .where(Annotator.__table__.c.name == "dave").values(name="aaron"))
    after, pairs_after = overall_and_pairs(engine)
    assert set(before) == {"kappa", "kappa_linear", "kappa_quadratic"}
    assert after == before
    renamed = {(frozenset("aaron" if n == "dave" else n for n in names), statistic): value
               for (names, statistic), value in pairs_before.items()}
    assert pairs_after == renamed and len(renamed) == 6
