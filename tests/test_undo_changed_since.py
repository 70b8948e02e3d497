"""Undo never overwrites a later change it did not make: when two sessions of one
annotator rate the same caption (two terminals, say), the first session's undo of a score
the second has changed since is refused, naming the field, and the database keeps the
second session's value; the refused change leaves the session's undo history, so the next
undo goes on to the change before it."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from storage.models import Event, Rating
from storage.rating.rating_desk import ChangedSince
from storage.rating.rating_sessions import AnnotationSession
from tests.app_helpers import sample_engine


def precision(engine, caption_id: int) -> object:
    rating = Rating.__table__
    with engine.connect() as connection:
        return connection.execute(select(rating.c.precision).where(
            rating.c.caption_id == caption_id)).scalar_one()


def test_undo_refuses_a_score_another_session_changed_since(tmp_path):
    engine = sample_engine(tmp_path)
    first, second = AnnotationSession(engine, "alice"), AnnotationSession(engine, "alice")
    group = first.open_image(0)[0]
    first.set_values(group, {"recall": 3}, image_index=0, focus=0)
    first.set_values(group, {"precision": 4}, image_index=0, focus=0)
    again = next(g for g in second.open_image(0) if g.caption_ids == group.caption_ids)
    second.set_values(again, {"precision": 2}, image_index=0, focus=0)

    with pytest.raises(ChangedSince, match=r"precision was changed since \(now 2\)"):
        first.undo()
    caption_id = group.caption_ids[0]
    assert precision(engine, caption_id) == 2  # the later change stands
    with engine.connect() as connection:
        undos = connection.execute(select(Event.__table__).where(
            Event.__table__.c.action == "undo")).all()
    assert undos == []

    undone = first.undo()  # the change before it: recall, which nobody changed since
    assert undone is not None and undone.fields == ["recall"]
    rating = Rating.__table__
    with engine.connect() as connection:
        row = connection.execute(select(rating.c.precision, rating.c.recall).where(
            rating.c.caption_id == caption_id)).one()
    assert tuple(row) == (2, None)


def test_undo_of_an_unchanged_score_still_takes_it_back(tmp_path):
    engine = sample_engine(tmp_path)
    session = AnnotationSession(engine, "alice")
    group = session.open_image(0)[0]
    session.set_values(group, {"precision": 4}, image_index=0, focus=0)
    session.set_values(group, {"precision": 5}, image_index=0, focus=0)
    assert session.undo() is not None and precision(engine, group.caption_ids[0]) == 4
    assert session.undo() is not None and precision(engine, group.caption_ids[0]) is None
