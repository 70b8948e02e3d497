from __future__ import annotations

from importlib import resources

import pytest

from rubrics import THUMB_1_0, clean_caption, load_rubric, parse_rubric


@pytest.mark.parametrize(
    ("example", "precision", "recall", "fluency", "expected"),
    [
        ("1-B", 5, 4, 0.1, 4.4),
        ("2-C", 5, 5, 0.1, 4.9),
        ("5-C", 5, 5, 0.3, 4.7),
        ("1-A", 3, 4, 0.0, 3.5),
    ],
)
def test_total_reproduces_paper_table_1(example, precision, recall, fluency, expected):
    assert THUMB_1_0.total(precision, recall, fluency=fluency) == pytest.approx(expected)
    shipped = next(e for e in THUMB_1_0.examples if e.id == example)
    assert (shipped.precision, shipped.recall) == (precision, recall)
    assert shipped.penalties.get("fluency", 0.0) == pytest.approx(fluency)


def test_total_subtracts_every_penalty():
    assert THUMB_1_0.total(4, 3, fluency=0.2, conciseness=0.5, inclusive=2.0) == pytest.approx(0.8)


def test_rubric_file_may_weight_precision_and_recall_differently(tmp_path):
    bundled = resources.files("rubrics").joinpath("thumb-1.0.toml").read_text(encoding="utf-8")
    weighted_text = bundled.replace("precision_weight = 0.5", "precision_weight = 0.7")
    weighted_text = weighted_text.replace("recall_weight = 0.5", "recall_weight = 0.3")
    weighted_text = weighted_text.replace('version = "1.0"', 'version = "1.0-p70"')
    path = tmp_path / "weighted.toml"
    path.write_text(weighted_text, encoding="utf-8")
    weighted = load_rubric(path)
    assert weighted.total(5, 1) == pytest.approx(3.8)
    assert weighted.signature == "thumb-1.0-p70"


def test_rubric_is_versioned_data():
    assert THUMB_1_0.signature == "thumb-1.0"
    assert [d.key for d in THUMB_1_0.dimensions] == ["precision", "recall"]
    assert all(d.min == 1 and d.max == 5 and set(d.levels) == {1, 2, 3, 4, 5}
               for d in THUMB_1_0.dimensions)
    rules = {rule.key for rule in THUMB_1_0.rules}
    assert {"no-double-penalty", "counts-are-attributes", "black-and-white",
            "recall-imagination"} <= rules


def test_penalty_catalogue_values():
    fluency = THUMB_1_0.penalty("fluency")
    assert fluency.type("spelling").min == 0.1 and fluency.type("spelling").fixed
    assert fluency.type("punctuation").min == 0.2
    assert fluency.type("duplication").min == 0.5
    awkward = fluency.type("awkward")
    assert (awkward.min, awkward.max) == (0.1, 0.5) and not awkward.fixed
    assert fluency.type("broken").min == 0.5
    assert THUMB_1_0.penalty("conciseness").type("redundant").min == 0.5
    inclusive = THUMB_1_0.penalty("inclusive")
    assert inclusive.type("appearance").min == 0.5
    assert inclusive.type("severe").min == 2.0
    with pytest.raises(ValueError, match="unknown fluency error type 'typo'"):
        fluency.type("typo")
    with pytest.raises(ValueError, match=r"between 0\.1 and 0\.5"):
        awkward.check(0.7)


def test_unknown_rubric_name_is_an_error():
    with pytest.raises(ValueError, match=r"no rubric named 'thumb-9' and no such file "
                                         r"\(rubrics by name: thumb-1.0; or give a path"):
        load_rubric("thumb-9")


def test_parse_rubric_requires_weights():
    with pytest.raises(ValueError, match="rubric: lacks total"):
        parse_rubric({"id": "x", "version": "1", "title": "x", "dimensions": [], "penalties": []})


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("  A dog on a beach.  ", "A dog on a beach."),  # strip
        ("a dog on a beach.", "A dog on a beach."),  # uppercase the first letter
        ("A dog on a beach", "A dog on a beach."),  # add a final period
        ("A dog on a beach .", "A dog on a beach."),  # no space before the period
        ("  a dog on a beach ", "A dog on a beach."),  # all together
        ("", ""),
    ],
)
def test_clean_caption_rules(raw, expected):
    assert clean_caption(raw) == expected


def test_clean_caption_is_idempotent():
    once = clean_caption(" two cats on a sofa ")
    assert clean_caption(once) == once
