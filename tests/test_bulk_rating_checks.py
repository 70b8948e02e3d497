"""A large import into SQLite judges its ratings' values once, on their distinct values,
instead of in five triggers a row (`rating_value_triggers_suspended`): the same values are
refused, the triggers come back exactly as they were, and a refusal or a rollback leaves
them in place. The third rubric (tests/rubrics/ts7-1.toml) allows an inclusive penalty of 0
or 0.5 to 1.5: a hole that a min/max check would miss."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image
from sqlalchemy import Engine, text
from sqlalchemy.exc import IntegrityError

import storage.imports.importer
from rubrics import load_rubric
from storage import import_captions, open_database, ratings_frame
from storage.db.engine import write_transaction
from storage.rubric_registry import rating_value_triggers_suspended
from tests.conftest import database_dump

TS7 = load_rubric(Path(__file__).parent / "rubrics" / "ts7-1.toml")
HEADER = "image,system,caption,annotator,stage,precision,recall,inclusive\n"
COPY_AT_STAGE_2 = (  # every rating again at stage 2, with the inclusive penalty given
    "INSERT INTO rating (caption_id, annotator_id, stage, precision, recall, fluency, "
    "conciseness, inclusive, note, seconds, rubric, created_at, updated_at) SELECT "
    "caption_id, annotator_id, 2, precision, recall, fluency, conciseness, :inclusive, note, "
    "seconds, rubric, created_at, updated_at FROM rating WHERE stage = 1")


def rating_triggers(engine: Engine) -> list[tuple[str, str]]:
    with engine.connect() as connection:
        return connection.execute(text(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' "
            "AND tbl_name = 'rating' ORDER BY name")).all()


@pytest.fixture
def rated(engine: Engine, tmp_path: Path) -> Engine:
    """A project with three stage-1 ratings under ts7-1."""
    Image.new("RGB", (8, 8)).save(tmp_path / "a.png")
    source = tmp_path / "rated.csv"
    source.write_text(HEADER + "".join(f"a.png,S{k},Caption {k}.,ann,1,7,3,0\n"
                                       for k in range(3)), encoding="utf-8")
    import_captions(engine, source, actor="t", rubric=TS7)
    return engine


def test_the_insert_triggers_are_gone_inside_and_back_unchanged_after(rated):
    before = rating_triggers(rated)
    assert sum(name.endswith("_on_rubric_insert") for name, _ in before) == 5
    with write_transaction(rated) as connection, rating_value_triggers_suspended(connection):
        inside = connection.execute(text(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'rating'"
        )).scalars().all()
        connection.execute(text(COPY_AT_STAGE_2), {"inclusive": 0.7})
    assert inside and not any(name.endswith("_on_rubric_insert") for name in inside)
    assert any(name.endswith("_on_rubric_update") for name in inside)  # updates stay checked
    assert rating_triggers(rated) == before
    assert sorted(ratings_frame(rated).inclusive) == [0, 0, 0, 0.7, 0.7, 0.7]
    open_database(rated.url.database).dispose()  # the schema check on opening passes


@pytest.mark.parametrize("amount", [0.3, 1.6, -0.2])
def test_a_value_the_rubric_refuses_is_refused_once_and_the_triggers_survive(rated, amount):
    before, rows = rating_triggers(rated), database_dump(rated)
    refused = r"\(bulk insert\) rating\.inclusive: a value its rubric does not allow"
    with pytest.raises(IntegrityError, match=refused), write_transaction(rated) as connection, \
            rating_value_triggers_suspended(connection):
        connection.execute(text(COPY_AT_STAGE_2), {"inclusive": amount})
    assert rating_triggers(rated) == before
    assert database_dump(rated) == rows
    with pytest.raises(IntegrityError, match="a value its rubric does not allow"), \
            rated.begin() as connection:  # the row-by-row trigger is back at work
        connection.execute(text(COPY_AT_STAGE_2), {"inclusive": amount})


def test_an_error_inside_rolls_the_dropped_triggers_back(rated):
    before = rating_triggers(rated)
    with pytest.raises(RuntimeError, match="interrupted"), \
            write_transaction(rated) as connection, rating_value_triggers_suspended(connection):
        connection.execute(text(COPY_AT_STAGE_2), {"inclusive": 0.3})
        raise RuntimeError("interrupted")
    assert rating_triggers(rated) == before


def test_an_import_over_the_bulk_size_stores_its_ratings_and_keeps_the_triggers(
        rated, tmp_path, monkeypatch):
    monkeypatch.setattr(storage.imports.importer, "BULK_RATINGS", 2)
    before = rating_triggers(rated)
    source = tmp_path / "more.csv"
    source.write_text(HEADER + "".join(f"a.png,T{k},More {k}.,ann,1,6,2,{amount}\n"
                                       for k, amount in enumerate(("0.5", "1.5", "0"))),
                      encoding="utf-8")
    summary = import_captions(rated, source, actor="t")
    assert summary.ratings == 3
    assert rating_triggers(rated) == before
    frame = ratings_frame(rated)
    assert sorted(frame.inclusive[frame.system.str.startswith("T")]) == [0, 0.5, 1.5]
