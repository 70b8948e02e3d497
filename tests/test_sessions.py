"""The rating sessions' structure: building one writes nothing (the annotator is registered
by their first write), what a session caches is what the database says, and the resolution
session holds the shared rating desk rather than inheriting stage 1's claims."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from storage import Annotator, Event
from storage.models import Assignment, Stage
from storage.rating.project_queues import disagreements, fluency_queue, record_fluency_check
from storage.rating.protocol import ProtocolError
from storage.rating.rating_desk import RatingDesk
from storage.rating.rating_sessions import (
    AnnotationSession,
    FluencyRoundSession,
    ResolutionSession,
    register_annotator,
)
from tests.app_helpers import first_caption_id, sample_engine
from tests.conftest import database_dump
from tests.test_workflow import review_with_changes


@pytest.fixture
def engine(tmp_path):
    return sample_engine(tmp_path)


def annotators(engine) -> dict[str, bool | None]:
    table = Annotator.__table__
    with engine.connect() as connection:
        return dict(connection.execute(select(table.c.name, table.c.native_english)).all())


def test_building_any_session_writes_nothing(engine):
    review_with_changes(engine)  # alice rated, bob reviewed: disagreements to resolve
    register_annotator(engine, "dave", True)
    record_fluency_check(engine, fluency_queue(engine)[0].caption_ids, "dave", 0.1, "spelling")
    before = database_dump(engine)
    sessions = [
        AnnotationSession(engine, "alice"), AnnotationSession(engine, "newcomer"),
        AnnotationSession(engine, "newcomer", native_english=True),
        AnnotationSession(engine, "alice", native_english=True),  # a flag to record later
        AnnotationSession(engine, "bob", stage=Stage.SECOND),
        AnnotationSession(engine, "carol", stage=Stage.SECOND),
        AnnotationSession(engine, "erin", stage=Stage.FINAL),
        ResolutionSession(engine, "carol"), ResolutionSession(engine, "bob"),
    ]
    for session in sessions:  # what the screens and the CLI read before the first key
        session.resume_position()
        session.progress()
    carol = sessions[-2]
    assert carol.queue() and carol.resolved_count() == 0
    FluencyRoundSession(engine, "dave").queue()
    with pytest.raises(ProtocolError, match="gave fluency-round verdicts"):
        AnnotationSession(engine, "dave", native_english=False)  # refused at start, unwritten
    with pytest.raises(ProtocolError, match="not recorded as a native English speaker"):
        FluencyRoundSession(engine, "alice")
    after = database_dump(engine)
    assert after == before  # every row of every table, the event log's included
    assert len(after[Event.__table__.name]) == len(before[Event.__table__.name]) > 0


def test_the_first_write_registers_the_annotator_with_their_flag(engine):
    session = AnnotationSession(engine, "erin", native_english=True)
    assert "erin" not in annotators(engine) and session.annotator_id is None
    session.open_image(0)  # opening the app claims the first image: a write
    assert annotators(engine)["erin"] is True
    table = Annotator.__table__
    with engine.connect() as connection:
        erin = connection.execute(select(table.c.id).where(table.c.name == "erin")).scalar()
        claims = connection.execute(select(Assignment.__table__.c.annotator_id)).scalars()
        assert set(claims) == {erin} == {session.annotator_id}
    session.close()
    # a flag given later is recorded (and logged) by that session's first write only
    again = AnnotationSession(engine, "erin", native_english=False)
    assert annotators(engine)["erin"] is True
    again.open_image(0)
    assert annotators(engine)["erin"] is False
    with engine.connect() as connection:
        logged = connection.execute(select(Event.__table__.c.new_value).where(
            Event.__table__.c.table_name == "annotator")).scalars().all()
    assert logged == ["false"]


def test_a_refused_first_write_still_registers_and_writes_nothing_else(engine):
    AnnotationSession(engine, "alice")  # nothing rated yet: nothing to resolve
    carol = ResolutionSession(engine, "carol")
    before = database_dump(engine)
    first = first_caption_id(engine)
    group = carol.group_for_caption(first)
    with pytest.raises(ProtocolError, match="not been reviewed"):
        carol.set_values(group, {"precision": 3},
                         image_index=carol.image_index_of_caption(first), focus=0)
    after = database_dump(engine)
    assert "carol" in annotators(engine)
    assert {name: rows for name, rows in after.items() if name != "annotator"} == {
        name: rows for name, rows in before.items() if name != "annotator"}


def progress_of(session: AnnotationSession) -> tuple:
    return (session.progress(), [session.is_complete(image) for image in session.images])


def test_what_a_session_caches_is_what_a_fresh_one_reads(engine):
    alice = AnnotationSession(engine, "alice", seed_source=lambda: 1)
    for index in (0, 1, 2):
        for number, group in enumerate(alice.open_image(index)):
            half = index == 2 and number == 0  # one caption of image 2 left half-scored
            values = {"precision": 4} if half else {"precision": 4, "recall": 3}
            alice.set_values(group, values, image_index=index, focus=number)
            assert progress_of(alice) == progress_of(AnnotationSession(engine, "alice"))
    assert alice.progress().images_done == 2
    groups = alice.open_image(1)
    alice.set_values(groups[0], {"precision": None}, image_index=1, focus=0)
    assert progress_of(alice) == progress_of(AnnotationSession(engine, "alice"))
    assert alice.progress().images_done == 1
    for _ in range(4):  # image 1 whole again, then back through image 2's captions
        assert alice.undo() is not None
        assert progress_of(alice) == progress_of(AnnotationSession(engine, "alice"))
    done = alice.progress()
    assert done.images_done == 2 and 0 < done.captions_done < done.captions_total


def test_the_resolution_session_holds_the_desk_and_no_claims(engine):
    review_with_changes(engine)
    carol = ResolutionSession(engine, "carol")
    assert not isinstance(carol, AnnotationSession)
    assert isinstance(carol.desk, RatingDesk) and carol.stage == Stage.FINAL
    assert len(carol.images) == 15  # the final stage lists every image
    item = disagreements(engine, resolver="carol")[0]
    index = carol.image_index_of_caption(item.caption_id)
    carol.open_image(index)
    group = carol.set_values(carol.group_for_caption(item.caption_id),
                             {"precision": 2, "recall": 2}, image_index=index, focus=0)
    assert group.complete and carol.progress().captions_done == len(group.caption_ids)
    carol.record_reasons(group, ["both-wrong"])
    carol.close()
    table = Assignment.__table__
    with engine.connect() as connection:
        final = connection.execute(select(table).where(
            table.c.stage == int(Stage.FINAL))).all()
    assert [row.released_at for row in final] == [None]  # seen, never claimed or released
    assert len(carol.queue()) == len(disagreements(engine, resolver="carol")) == 2
