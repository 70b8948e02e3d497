"""The database itself rejects invalid values, even when written around the API."""

from __future__ import annotations

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError, IntegrityError

from storage import Annotator, Caption, Event, Image, Rating
from storage.db.engine import BulkInsert, database_url
from storage.models import utcnow


@pytest.fixture
def seeded(engine):
    now = utcnow()
    with engine.begin() as connection:
        connection.execute(Image.__table__.insert().values(id=1, key="img1", path=None))
        connection.execute(
            Caption.__table__.insert().values(id=1, image_id=1, system="S", text="A dog.")
        )
        connection.execute(
            Annotator.__table__.insert().values(id=1, name="ann", created_at=now)
        )
    return engine


def rating_values(**overrides):
    now = utcnow()
    values = dict(caption_id=1, annotator_id=1, stage=1, precision=5, recall=4, fluency=0.0,
                  conciseness=0.0, inclusive=0.0, note="", seconds=0.0, rubric="thumb-1.0",
                  created_at=now, updated_at=now)
    return {**values, **overrides}


def insert_rating(engine, **overrides) -> None:
    with engine.begin() as connection:
        connection.execute(Rating.__table__.insert().values(**rating_values(**overrides)))


def test_valid_rating_is_accepted(seeded):
    insert_rating(seeded)
    with seeded.connect() as connection:
        assert connection.execute(select(Rating.__table__.c.precision)).scalar() == 5


@pytest.mark.slow
@pytest.mark.parametrize(
    "overrides",
    [
        {"precision": 0}, {"precision": 6}, {"precision": 4.5}, {"recall": 7},
        {"stage": 4}, {"fluency": -0.1}, {"fluency": 5.5}, {"conciseness": 0.3},
        {"inclusive": 1.0}, {"seconds": -1}, {"rubric": ""}, {"caption_id": 99},
        {"annotator_id": 42},
    ],
    ids=repr,
)
def test_invalid_rating_is_rejected_by_the_database(seeded, overrides):
    with pytest.raises(IntegrityError):
        insert_rating(seeded, **overrides)
    with seeded.connect() as connection:
        assert connection.execute(select(Rating.__table__)).all() == []


def test_one_rating_per_caption_annotator_and_stage(seeded):
    insert_rating(seeded)
    with pytest.raises(IntegrityError):
        insert_rating(seeded, precision=3)
    insert_rating(seeded, stage=2)


def test_one_caption_per_system_and_image(seeded):
    with pytest.raises(IntegrityError), seeded.begin() as connection:
        connection.execute(
            Caption.__table__.insert().values(image_id=1, system="S", text="Another.")
        )


@pytest.mark.parametrize("statement", ["UPDATE event_log SET actor = 'x'", "DELETE FROM event_log"])
def test_event_log_is_append_only(seeded, statement):
    with seeded.begin() as connection:
        connection.execute(
            Event.__table__.insert().values(at=utcnow(), actor="ann", action="create",
                                            table_name="rating")
        )
    with pytest.raises(DBAPIError, match="append-only"), seeded.begin() as connection:
        connection.execute(text(statement))


def test_sqlite_pragmas(engine):
    with engine.connect() as connection:
        assert connection.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert connection.execute(text("PRAGMA busy_timeout")).scalar() > 0


def test_database_url_accepts_paths_and_urls(tmp_path):
    assert database_url(tmp_path / "x.db") == f"sqlite:///{tmp_path / 'x.db'}"
    assert database_url("postgresql://u@h/db") == "postgresql://u@h/db"


@pytest.mark.slow
def test_bulk_insert_converts_reorders_and_refuses_a_missing_column(engine):
    """BulkInsert hands the driver plain tuples: values arrive as SQLAlchemy would store
    them (a timestamp as SQLite's text), whatever the order of the caller's names, and a
    statement that would need a column the caller left out (one with a default) is
    refused rather than written without it."""
    image, annotator = Image.__table__, Annotator.__table__
    now = utcnow()
    with engine.begin() as connection:
        with pytest.raises(ValueError, match="takes parameters"):
            BulkInsert(connection, image.insert(), ("key", "path"))
        images = BulkInsert(connection, image.insert(), ("path", "key", "set_id",
                                                         "double_rating"))
        assert images([("a.png", "a", None, True), ("b.png", "b", 3, False)]) == 2
        names = BulkInsert(connection, annotator.insert(), ("created_at", "name"))
        assert names(iter([(now, "ann")])) == 1
    with engine.connect() as connection:
        assert connection.execute(select(image.c.key, image.c.path, image.c.set_id,
                                         image.c.double_rating).order_by(image.c.id)
                                  ).all() == [("a", "a.png", None, True),
                                              ("b", "b.png", 3, False)]
        stored = connection.execute(select(annotator.c.created_at)).scalar_one()
    assert stored.replace(tzinfo=None) == now.replace(tzinfo=None)
