"""Rubrics are data: a second rubric (tests/rubrics/pr4-1.toml: precision and recall on
1-4 under other names, weights 0.7/0.3, a 0.25 conciseness penalty and no other) goes
through the database's checks, import, the rating screens, review, agreement, export and
the report, with nothing of THUMB 1.0 left in what it shows."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from rubrics import THUMB_1_0, load_rubric, parse_rubric
from storage import InputError, final_scores, import_captions
from storage.models import utcnow
from storage.rubric_registry import project_rubric, register_rubric, stored_rubrics

PR4 = load_rubric(Path(__file__).parent / "rubrics" / "pr4-1.toml")


def test_the_second_rubric_is_its_own_data():
    assert PR4.signature == "pr4-1"
    assert [(d.key, d.short, d.min, d.max, d.weight) for d in PR4.dimensions] == [
        ("precision", "A", 1, 4, 0.7), ("recall", "V", 1, 4, 0.3)]
    assert PR4.penalty_keys == ("conciseness",)
    assert PR4.total(4, 2, conciseness=0.25) == pytest.approx(0.7 * 4 + 0.3 * 2 - 0.25)
    assert PR4.formula() == "0.7·A + 0.3·V − wordiness"
    assert PR4.labels == {"precision": "A", "recall": "V", "conciseness": "W"}
    with pytest.raises(ValueError, match="rubric pr4-1 has no fluency"):
        PR4.total(4, 2, fluency=0.1)


def _rating(engine, rubric: str, **values) -> None:
    now = utcnow()
    row = dict(caption_id=1, annotator_id=1, stage=1, precision=4, recall=4, fluency=0.0,
               conciseness=0.0, inclusive=0.0, note="", seconds=0.0, rubric=rubric,
               created_at=now, updated_at=now) | values
    with engine.begin() as connection:
        connection.execute(text(
            f"INSERT INTO rating ({', '.join(row)}) VALUES ({', '.join(':' + k for k in row)})"
        ), row)


@pytest.fixture
def two_rubrics(engine):
    with engine.begin() as connection:
        register_rubric(connection, PR4)
        connection.execute(text("INSERT INTO image (id, key, double_rating) VALUES (1, 'i', 0)"))
        connection.execute(text("INSERT INTO caption (id, image_id, system, text) "
                                "VALUES (1, 1, 'S', 'A dog.')"))
        connection.execute(text("INSERT INTO annotator (id, name, created_at) "
                                "VALUES (1, 'a', '2024-01-01')"))
    return engine


@pytest.mark.parametrize(
    ("rubric", "values"),
    [("pr4-1", {"precision": 5}), ("pr4-1", {"recall": 0}), ("pr4-1", {"precision": 2.5}),
     ("pr4-1", {"conciseness": 0.5}), ("pr4-1", {"fluency": 0.1}), ("pr4-1", {"inclusive": 2}),
     ("thumb-1.0", {"conciseness": 0.25}), ("thumb-1.0", {"precision": 6}),
     ("no-such-rubric", {})],
    ids=repr,
)
def test_the_database_enforces_each_ratings_own_rubric(two_rubrics, rubric, values):
    with pytest.raises(IntegrityError):
        _rating(two_rubrics, rubric, **values)


def test_values_valid_under_one_rubric_only_are_accepted_under_it(two_rubrics):
    _rating(two_rubrics, "pr4-1", conciseness=0.25, precision=1, recall=4)
    _rating(two_rubrics, "thumb-1.0", stage=2, precision=5, fluency=0.3, inclusive=2.0)
    with pytest.raises(IntegrityError), two_rubrics.begin() as connection:  # on update too
        connection.execute(text("UPDATE rating SET precision = 5 WHERE rubric = 'pr4-1'"))


def test_a_changed_rubric_file_needs_a_new_version(engine):
    with engine.begin() as connection:
        register_rubric(connection, THUMB_1_0)  # the same: nothing to do
    with engine.begin() as connection:
        register_rubric(connection, PR4, choose=True)
    assert project_rubric(engine) == PR4
    weights = dict(PR4.definition) | {"total": {"precision_weight": 0.5,
                                                "recall_weight": 0.5}}
    with pytest.raises(ValueError, match="different rubric pr4-1; a changed rubric file "
                                         "needs a new version"), engine.begin() as connection:
        register_rubric(connection, parse_rubric(weights))
    assert set(stored_rubrics(engine)) == {"thumb-1.0", "pr4-1"}


def test_import_under_the_second_rubric(engine, tmp_path):
    image = tmp_path / "a.png"
    Image.new("RGB", (8, 8)).save(image)
    good = tmp_path / "good.csv"
    good.write_text(
        "image,system,caption,annotator,stage,precision,recall,conciseness\n"
        "a.png,S1,A dog.,ann,1,4,2,0.25\n"
        "a.png,S2,A cat.,ann,1,1,4,0\n", encoding="utf-8")
    import_captions(engine, good, actor="t", rubric=PR4)
    assert project_rubric(engine).signature == "pr4-1"
    finals = final_scores(engine).set_index("system")
    assert finals.loc["S1", "total"] == pytest.approx(0.7 * 4 + 0.3 * 2 - 0.25)
    assert (finals["rubric"] == "pr4-1").all()
    bad = tmp_path / "bad.csv"
    bad.write_text(
        "image,system,caption,annotator,stage,precision,recall,conciseness,fluency\n"
        "a.png,S3,A cow.,ann,1,5,2,0.5,0.1\n", encoding="utf-8")
    with pytest.raises(InputError) as refused:
        import_captions(engine, bad, actor="t")  # the project's rubric is now pr4-1
    message = str(refused.value)
    assert "precision must be a whole number from 1 to 4" in message
    assert "rubric pr4-1 has no fluency penalty" in message
    assert "conciseness penalty must be one of 0, 0.25" in message
