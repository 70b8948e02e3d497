"""One penalty rule (#25 item 2): `PenaltyCategory.allows` (rubrics.amounts) decides which
amounts a penalty allows, for import, the sessions and the database's triggers alike. The
third rubric's (tests/rubrics/ts7-1.toml) single-choice penalty "Bias" is a range, 0.5 to
1.5, on the inclusive column."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from rubrics import THUMB_1_0, load_rubric
from rubrics.amounts import describe, penalty_ranges, within
from storage import InputError, import_captions, ratings_frame
from storage.rubric_registry import register_rubric
from tests.conftest import database_dump

TS7 = load_rubric(Path(__file__).parent / "rubrics" / "ts7-1.toml")
BIAS = TS7.penalty("inclusive")
HEADER = "image,system,caption,annotator,stage,precision,recall,inclusive\n"


def test_allows_and_the_database_ranges_are_one_rule():
    assert BIAS.allowed_ranges() == ((0.0, 0.0), (0.5, 1.5))
    assert TS7.allowed_ranges()["inclusive"] == BIAS.allowed_ranges()
    assert TS7.allowed_ranges()["conciseness"] == ((0.0, 0.0),)  # a penalty it lacks
    for amount in (0.0, 0.5, 0.7, 1.5, 1.5 + 1e-12):
        assert BIAS.allows(amount) and within(BIAS.allowed_ranges(), amount)
    for amount in (0.3, 1.6, 2.0, -0.1):
        assert not BIAS.allows(amount)
    assert BIAS.allowed_text() == "0 or between 0.5 and 1.5"
    assert THUMB_1_0.penalty("conciseness").allowed_text() == "one of 0, 0.5"
    assert TS7.penalty("fluency").allowed_text() == "between 0 and 0.6"
    assert describe(penalty_ranges(False, 2, [(0.25, 0.25), (0.5, 1.5)])) == (
        "0, 0.25 or between 0.5 and 1.5")


def test_problem_checks_the_amount_and_its_type():
    assert BIAS.problem(0.7) is None and BIAS.problem(0.7, ["stereotype"]) is None
    assert BIAS.problem(2.0) == "inclusive penalty must be 0 or between 0.5 and 1.5, not 2"
    assert BIAS.problem(0.7, ["slur"]).startswith("unknown inclusive error type 'slur'")
    assert "one error type at most" in BIAS.problem(1.0, ["stereotype", "stereotype"])
    assert BIAS.named_type(0.7) == "stereotype" and BIAS.named_type(0.0) is None
    fluency = THUMB_1_0.penalty("fluency")
    assert fluency.problem(0.3, ["spelling", "punctuation"]) is None  # errors add up
    assert "does not match error type" in fluency.problem(0.4, ["spelling"])
    assert fluency.implied_amount(["spelling", "punctuation"]) == pytest.approx(0.3)
    assert fluency.implied_amount(["awkward"]) is None  # a range: the rater picks


@pytest.fixture
def image(tmp_path: Path) -> Path:
    path = tmp_path / "a.png"
    Image.new("RGB", (8, 8)).save(path)
    return path


@pytest.mark.parametrize("amount", ["0.7", "1.5", "-0.7"])
def test_a_ranged_single_choice_penalty_imports(engine, tmp_path, image, amount):
    source = tmp_path / "ok.csv"
    source.write_text(HEADER + f"a.png,S1,A dog.,ann,1,7,3,{amount}\n", encoding="utf-8")
    import_captions(engine, source, actor="t", rubric=TS7)
    (row,) = ratings_frame(engine).itertuples()
    assert row.inclusive == pytest.approx(abs(float(amount)))
    assert row.inclusive_type == "stereotype"  # the one type whose range holds it
    assert row.rubric == "ts7-1"


@pytest.mark.parametrize("amount", ["0.3", "1.6"])
def test_an_amount_outside_the_rubric_is_refused_at_its_line(engine, tmp_path, image, amount):
    good = tmp_path / "good.csv"
    good.write_text(HEADER + "a.png,S1,A dog.,ann,1,7,3,0.7\n", encoding="utf-8")
    import_captions(engine, good, actor="t", rubric=TS7)
    before = database_dump(engine)
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + "a.png,S2,A cat.,ann,1,7,3,0\n"
                   f"a.png,S3,A cow.,ann,1,7,3,{amount}\n", encoding="utf-8")
    with pytest.raises(InputError) as refused:
        import_captions(engine, bad, actor="t", rubric=TS7)
    assert (f"{bad}:3: inclusive penalty must be 0 or between 0.5 and 1.5, not {amount}"
            in str(refused.value))
    assert database_dump(engine) == before


def test_the_database_triggers_read_the_same_ranges(engine, tmp_path, image):
    source = tmp_path / "ok.csv"
    source.write_text(HEADER + "a.png,S1,A dog.,ann,1,7,3,0.7\n", encoding="utf-8")
    import_captions(engine, source, actor="t", rubric=TS7)
    with engine.begin() as connection:
        register_rubric(connection, TS7)  # stored once: nothing changes
        connection.execute(text("UPDATE rating SET inclusive = 1.2"))
    with pytest.raises(IntegrityError, match="a value its rubric does not allow"), \
            engine.begin() as connection:
        connection.execute(text("UPDATE rating SET inclusive = 1.6"))


def test_the_triggers_tolerance_is_the_rules():
    """The triggers (migration 0006, a frozen revision with its own copy of the number)
    compare with the tolerance `allows` uses."""
    import importlib.util

    from rubrics import amounts

    path = (Path(__file__).parent.parent / "storage" / "db" / "migrations" / "versions"
            / "0006_rubrics_as_data.py")
    spec = importlib.util.spec_from_file_location("revision_0006", path)
    revision = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(revision)
    assert revision.EPSILON == amounts.EPSILON
    assert f"BETWEEN r.low - {amounts.EPSILON} AND r.high + {amounts.EPSILON}" in (
        revision._outside("rating", "inclusive", "NEW"))


def test_the_session_applies_the_same_rule(tmp_path: Path):
    """The rating session refuses what import refuses (the rubric's `penalty_problem` over
    the rating as it would be after the change), and writes nothing then."""
    from storage.rating.rating_sessions import AnnotationSession
    from tests.app_helpers import sample_engine

    engine = sample_engine(tmp_path, rubric=TS7)
    session = AnnotationSession(engine, "alice", rubric=TS7)
    group = session.open_image(0)[0]
    before = database_dump(engine)
    refused = {
        (("inclusive", 2.0), ("inclusive_type", "stereotype")): "must be 0 or between 0.5",
        (("inclusive", 0.7), ("inclusive_type", "slur")): "unknown inclusive error type",
        (("fluency", 0.9),): "between 0 and 0.6",
        (("conciseness", 0.5),): "has no conciseness penalty",
        (("precision", 8),): "precision must be 1-7",
    }
    for change, words in refused.items():
        with pytest.raises(ValueError, match=words):
            session.set_values(group, dict(change), image_index=0, focus=0)
    assert database_dump(engine) == before
    saved = session.set_values(group, {"inclusive": 1.2, "inclusive_type": "stereotype"},
                               image_index=0, focus=0)
    assert saved.values["inclusive"] == pytest.approx(1.2)
    with pytest.raises(ValueError, match="one error type at most"):
        session.set_values(saved, {"inclusive_type": "stereotype,stereotype"},
                           image_index=0, focus=0)
