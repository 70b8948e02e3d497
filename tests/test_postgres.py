"""The same storage against PostgreSQL, when a server is given: THUMB_TEST_POSTGRES holds a
SQLAlchemy URL of an empty, disposable database (.ci/run sets one up where it can)."""

from __future__ import annotations

import os
import re
import secrets
import shlex
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, IntegrityError

from benchmarks.races import drop_everything
from storage import InputError, final_scores, import_captions, open_database
from storage.models import Stage
from storage.rating.project_queues import ProtocolError, disagreements
from storage.rating.rating_sessions import AnnotationSession
from tests.conftest import SAMPLE_CSV
from thumb_tui.cli import app

URL = os.environ.get("THUMB_TEST_POSTGRES")
pytestmark = [pytest.mark.skipif(not URL, reason="THUMB_TEST_POSTGRES is not set"),
              pytest.mark.postgres]


@pytest.fixture
def engine():
    drop_everything(URL)
    engine = open_database(URL)
    yield engine
    engine.dispose()
    drop_everything(URL)


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


@pytest.mark.slow
def test_a_sqlite_project_moves_to_postgresql(engine, tmp_path):
    """Export from SQLite, import into PostgreSQL: the same final scores and workflow."""
    from storage import export_ratings
    from storage.rating.project_queues import record_resolution

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


@pytest.mark.slow
def test_judgment_sets_on_postgresql(engine):
    """Both kinds of judgment set import, score and report on PostgreSQL, and its
    constraints refuse a score off the set's scale."""
    import sqlalchemy as sa

    from reports.judgments import build_judgment_report
    from reports.scoring import compute_judgment_metrics
    from storage.imports.judgment_import import Scale, import_judgments
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


def test_postgresql_records_the_database_role_whatever_the_client_sends(engine):
    import getpass

    from storage import Event
    from storage.events import log_change

    import_captions(engine, SAMPLE_CSV, actor="t")
    with engine.begin() as connection:
        log_change(connection, actor="alice", action="update", table="rating",
                   new={"note": "x"})
        connection.execute(Event.__table__.insert().values(
            at=__import__("datetime").datetime.now(), actor="mallory", action="update",
            table_name="rating", db_role="postgres"))  # a forged role
        role = connection.execute(text("SELECT session_user")).scalar()
        logged = connection.execute(Event.__table__.select()).all()
    assert {row.db_role for row in logged} == {role}
    assert {row.os_login for row in logged if row.actor != "mallory"} == {getpass.getuser()}


README = Path(__file__).resolve().parent.parent / "README.md"
README_TEAM = "**A team on PostgreSQL, one role per person.**"


def readme_team_commands(readme: str) -> list[list[str]]:
    """The `thumb team …` commands of the README's team set-up, as argument lists."""
    block = re.search(re.escape(README_TEAM) + r".*?```sh\n(.*?)```", readme, re.S)
    assert block, "the README's team set-up block is missing"
    return [shlex.split(line)[1:] for line in block.group(1).splitlines()
            if line.startswith("thumb team ")]


def test_a_team_as_the_readme_sets_it_up():
    """The README's `thumb team` commands (with a prefix and names of this run: role
    names are global to the server) make a team on which an annotator's own role rates,
    the event log names that role, and the role cannot rewrite history."""
    from typer.testing import CliRunner

    from storage.team import TeamRoles, registrar_role
    from tests.team_helpers import PASSWORD, dissolve

    commands = readme_team_commands(README.read_text(encoding="utf-8"))
    assert [command[:2] for command in commands][:3] == [
        ["team", "setup-sql"], ["team", "init"], ["team", "add"]]
    suffix = secrets.token_hex(4)
    people = {command[2] for command in commands if command[1] == "add"}
    name = {person: f"{person}_{suffix}" for person in people}
    prefix, administrator = f"t{suffix}", make_url(URL).username
    roles = TeamRoles.named(prefix)
    drop_everything(URL)
    runner = CliRunner()
    superuser = create_engine(URL)  # thumb_ci stands in for the server's superuser
    try:
        assert runner.invoke(app, ["--db", URL, "import", str(SAMPLE_CSV)]).exit_code == 0
        for command in commands:
            command = [name.get(word, word) for word in command]
            if command[1] == "setup-sql":  # `| sudo -u postgres psql`: run by the superuser
                command = command[:command.index("|")]
                command[command.index("--admin") + 1] = administrator
            if command[1] in ("init", "setup-sql"):
                command += ["--prefix", prefix]
            result = runner.invoke(app, ["--db", URL, *command],
                                   input=f"{PASSWORD}\n{PASSWORD}\n")
            assert result.exit_code == 0, (command, result.output)
            if command[1] == "setup-sql":
                with superuser.begin() as connection:  # a superuser may SET ROLE to any role
                    connection.exec_driver_sql(
                        f"CREATE ROLE {registrar_role(prefix)} NOLOGIN CREATEROLE")
                    connection.exec_driver_sql(f"GRANT {registrar_role(prefix)} TO CURRENT_USER")
                    for statement in result.output.split(";\n")[:-1]:
                        connection.exec_driver_sql(statement)
        alice_name = name["alice"]
        own = create_engine(make_url(URL).set(username=alice_name, password=PASSWORD))
        alice = AnnotationSession(own, alice_name)
        alice.set_values(alice.open_image(0)[0], {"precision": 4}, image_index=0, focus=0)
        alice.flag_broken(1, "cannot be seen")  # a slip the role may take back
        assert alice.undo() is not None
        with own.connect() as connection:
            roles_logged = set(connection.execute(text(
                "SELECT db_role FROM event_log WHERE actor = :name"), {"name": alice_name}
            ).scalars())
        assert roles_logged == {alice_name}
        with pytest.raises(DBAPIError), own.begin() as connection:
            connection.execute(text("DELETE FROM rating"))
        own.dispose()
    finally:
        superuser.dispose()
        dissolve(URL, roles, [*name.values(), registrar_role(prefix)])
