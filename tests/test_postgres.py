"""The same storage against PostgreSQL, when a server is given: THUMB_TEST_POSTGRES holds a
SQLAlchemy URL of an empty, disposable database (.ci/run sets one up where it can)."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import MetaData, create_engine, text
from sqlalchemy.exc import DBAPIError, IntegrityError

from storage import InputError, final_scores, import_captions, open_database
from storage.annotation import AnnotationSession
from storage.models import Stage
from storage.workflow import ProtocolError, disagreements
from tests.conftest import SAMPLE_CSV

URL = os.environ.get("THUMB_TEST_POSTGRES")
pytestmark = pytest.mark.skipif(not URL, reason="THUMB_TEST_POSTGRES is not set")


def drop_everything() -> None:
    engine = create_engine(URL)
    metadata = MetaData()
    metadata.reflect(engine)
    with engine.begin() as connection:
        if "event_log" in metadata.tables:
            connection.execute(text("DROP TRIGGER IF EXISTS event_log_append_only "
                                    "ON event_log"))
        metadata.drop_all(connection)
    engine.dispose()


@pytest.fixture
def engine():
    drop_everything()
    engine = open_database(URL)
    yield engine
    engine.dispose()
    drop_everything()


def test_workflow_on_postgresql(engine, tmp_path):
    import_captions(engine, SAMPLE_CSV, actor="t")
    import_captions(engine, SAMPLE_CSV.parent / "example_ratings.csv", actor="t")
    bad = tmp_path / "bad.csv"
    bad.write_text("image_id,system,caption\nimg01,Human,Another text.\n", encoding="utf-8")
    with pytest.raises(InputError, match="duplicate caption"):
        import_captions(engine, bad, actor="t")
    assert len(final_scores(engine)) == 60
    assert AnnotationSession(engine, "ann-a", stage=Stage.SECOND).images == []
    carol = AnnotationSession(engine, "carol", stage=Stage.FINAL)
    item = disagreements(engine)[0]
    group = carol.set_values(carol.group_for_caption(item.caption_id),
                             {"precision": 4, "recall": 4},
                             image_index=carol.image_index_of_caption(item.caption_id), focus=0)
    assert group.complete and carol.undo() is not None
    intruder = AnnotationSession(engine, "ann-a", stage=Stage.SECOND)
    intruder.images = carol.images  # around the screens: ann-a rated these at stage 1
    with pytest.raises(ProtocolError, match="you rated this image at stage 1"):
        intruder.set_values(carol.group_for_caption(item.caption_id), {"precision": 1},
                            image_index=carol.image_index_of_caption(item.caption_id), focus=0)


def test_postgresql_enforces_values_and_append_only_log(engine):
    import_captions(engine, SAMPLE_CSV, actor="t")
    with pytest.raises(IntegrityError), engine.begin() as connection:
        connection.execute(text(
            "INSERT INTO annotator (name, created_at) VALUES ('x', now());"
            "INSERT INTO rating (caption_id, annotator_id, stage, precision, fluency, "
            "conciseness, inclusive, note, seconds, rubric, created_at, updated_at) "
            "VALUES (1, currval('annotator_id_seq'), 1, 7, 0, 0, 0, '', 0, 'thumb-1.0', "
            "now(), now())"))
    with pytest.raises(DBAPIError, match="append-only"), engine.begin() as connection:
        connection.execute(text("DELETE FROM event_log"))


def test_a_sqlite_project_moves_to_postgresql(engine, tmp_path):
    """Export from SQLite, import into PostgreSQL: the same final scores and workflow."""
    from storage import export_ratings
    from storage.workflow import record_resolution

    source = open_database(tmp_path / "source.db")
    import_captions(source, SAMPLE_CSV, actor="t")
    import_captions(source, SAMPLE_CSV.parent / "example_ratings.csv", actor="t")
    carol = AnnotationSession(source, "carol", stage=Stage.FINAL)
    item = disagreements(source)[0]
    carol.set_values(carol.group_for_caption(item.caption_id), {"precision": 4, "recall": 4},
                     image_index=carol.image_index_of_caption(item.caption_id), focus=0)
    record_resolution(source, item.caption_id, "carol", ["both-wrong"], "", ["both-wrong"])
    out = tmp_path / "project.jsonl"
    export_ratings(source, out, "jsonl")
    summary = import_captions(engine, out, actor="t", allow_outside_images=True)
    assert summary.resolutions == 1
    import pandas as pd

    def final(db) -> pd.DataFrame:
        frame = final_scores(db)[["image_id", "system", "annotator", "stage", "precision",
                                  "recall", "total", "final_source", "created_at"]]
        # SQLite gives naive UTC times, PostgreSQL zone-aware ones: compare them in UTC
        return frame.assign(created_at=pd.to_datetime(frame["created_at"], utc=True))

    pd.testing.assert_frame_equal(final(engine), final(source), check_dtype=False)
    assert len(disagreements(engine)) == len(disagreements(source))


def test_judgment_sets_on_postgresql(engine):
    """Both kinds of judgment set import, score and report on PostgreSQL, and its
    constraints refuse a score off the set's scale."""
    import sqlalchemy as sa

    from reports.judgments import build_judgment_report
    from reports.scoring import compute_judgment_metrics
    from storage.judgment_import import Scale, import_judgments
    from storage.models import JudgmentScore

    sample = SAMPLE_CSV.parent
    import_judgments(engine, sample / "judgments.csv", name="likert", kind="score",
                     scale=Scale.parse("1-4"), references=sample / "references.csv",
                     actor="t")
    import_judgments(engine, sample / "judgment_pairs.csv", name="pairs", kind="pairwise",
                     references=sample / "references.csv", actor="t")
    for name in ("likert", "pairs"):
        compute_judgment_metrics(engine, name, ["bleu"])
    assert len(build_judgment_report(engine, "likert", bootstrap=20).records) == 4
    assert len(build_judgment_report(engine, "pairs", bootstrap=20).records) == 3
    with engine.connect() as connection:
        row = connection.execute(sa.select(JudgmentScore.__table__)).first()
    values = {**row._asdict(), "judge": "extra"}
    values.pop("id")
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as connection:
        connection.execute(JudgmentScore.__table__.insert().values({**values, "score": 4.5}))
    with engine.begin() as connection:
        connection.execute(JudgmentScore.__table__.insert().values({**values, "score": 2.0}))
