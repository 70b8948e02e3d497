"""Upgrades keep every rating: a database with the schema of the last release (0.1.0, its
DDL stored in tests/schemas/), filled through that schema, is upgraded by Alembic and still
holds every row; the migrations build exactly the schema the models describe."""

from __future__ import annotations

import os
import re
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import (
    Connection,
    Engine,
    MetaData,
    UniqueConstraint,
    create_engine,
    inspect,
    select,
    text,
)
from sqlalchemy.exc import IntegrityError

from rubrics import THUMB_1_0
from storage import final_scores, open_database
from storage.db.migrations import (
    RELEASE_0_1_0,
    SCRIPTS,
    SchemaDamaged,
    SchemaError,
    current_revision,
    head_revision,
    upgrade_database,
)
from storage.db.schema_check import TRIGGERS, quick_damage, schema_damage
from storage.rubric_registry import project_rubric

SCHEMAS = Path(__file__).parent / "schemas"
POSTGRES_URL = os.environ.get("THUMB_TEST_POSTGRES")
T0 = datetime(2022, 5, 1, 12, 0, 0, tzinfo=UTC)


def release_rows() -> dict[str, list[dict]]:
    """A small project as thumb-tui 0.1.0 stored it: two stages, a resolution, a fluency
    check, screen state, metric scores, BISON, and the event log of it all."""
    ratings = []
    for caption_id in range(1, 7):
        for annotator_id, stage in ((1, 1), (2, 2)):
            ratings.append(dict(
                caption_id=caption_id, annotator_id=annotator_id, stage=stage,
                precision=1 + (caption_id + stage) % 5, recall=1 + caption_id % 5,
                fluency=[0.0, 0.1, 0.3, 0.5, 5.0, 0.2][caption_id - 1],
                fluency_type=[None, "spelling", "spelling,casing", "duplication", "broken",
                              "punctuation"][caption_id - 1],
                conciseness=0.5 if caption_id == 2 else 0.0,
                conciseness_type="redundant" if caption_id == 2 else None,
                inclusive=[0.0, 0.0, 0.5, 2.0, 0.0, 0.0][caption_id - 1],
                inclusive_type=[None, None, "appearance", "severe", None, None][caption_id - 1],
                note=f"note {caption_id}/{stage}", seconds=3.5 * caption_id, rubric="thumb-1.0",
                created_at=T0, updated_at=T0,
            ))
    ratings.append(dict(caption_id=1, annotator_id=3, stage=3, precision=4, recall=4,
                        fluency=0.0, conciseness=0.0, inclusive=0.0, note="resolved",
                        seconds=1.0, rubric="thumb-1.0", created_at=T0, updated_at=T0))
    ratings.append(dict(caption_id=6, annotator_id=3, stage=2, precision=None, recall=None,
                        fluency=0.0, conciseness=0.0, inclusive=0.0, note="", seconds=0.0,
                        rubric="thumb-1.0", created_at=T0, updated_at=T0))  # in progress
    return {
        "schema_version": [dict(version=1, applied_at=T0)],
        "image": [dict(key=f"img{i}", path=f"images/{i}.png", set_id=i, double_rating=i == 1)
                  for i in range(1, 4)],
        "caption": [dict(image_id=1 + (c - 1) // 2, system=f"sys{c % 2}", text=f"Caption {c}.",
                         external_id=f"c{c}") for c in range(1, 7)],
        "image_reference": [dict(image_id=i, position=p, text=f"Reference {i}.{p}.")
                            for i in range(1, 4) for p in range(2)],
        "annotator": [dict(name=name, native_english=native, created_at=T0)
                      for name, native in (("ann-a", False), ("ann-b", None), ("carol", True))],
        "rating": ratings,
        "resolution": [dict(caption_id=1, resolver_id=3, reasons="both-wrong,rubric-rule",
                            note="see rule", created_at=T0)],
        "fluency_check": [dict(caption_id=2, checker_id=3, fluency=0.1,
                               fluency_type="spelling", created_at=T0)],
        "assignment": [dict(image_id=i, annotator_id=a, stage=s, shuffle_seed=1000 * i + a,
                            seconds=12.5, focus=1, last_viewed_at=T0)
                       for i in range(1, 4) for a, s in ((1, 1), (2, 2))],
        "metric_score": [dict(caption_id=c, metric=m, signature=f"{m}|v1", value=c / 10,
                              computed_at=T0) for c in range(1, 7) for m in ("bleu", "cider-d")],
        "event_log": [dict(at=T0, actor="ann-a", action="update", table_name="rating",
                           row_id=r, field_name="precision", old_value=None, new_value="4",
                           change_id=f"ch{r}", reverts=None) for r in range(1, 13)]
        + [dict(at=T0, actor="ann-a", action="undo", table_name="rating", row_id=1,
                field_name="precision", old_value="4", new_value=None, change_id="u1",
                reverts="ch1")],
        "bison_item": [dict(key="b1", query="A red ball.", caption_key="c1", image_a_id=1,
                            image_b_id=2, true_image_id=1)],
        "bison_answer": [dict(item_id=1, annotator_id=1, left_image_id=2, answer="right",
                              seconds=2.0, created_at=T0, updated_at=T0)],
        "bison_prediction": [dict(item_id=1, scorer="clip", signature="clip|tiny",
                                  score_a=0.3, score_b=0.2, chosen_image_id=1,
                                  computed_at=T0)],
    }


def insert_rows(engine: Engine, rows: dict[str, list[dict]]) -> None:
    """Insert each table's rows (a column missing from a row is NULL) in one transaction."""
    with engine.begin() as connection:
        for table, table_rows in rows.items():
            columns = list(dict.fromkeys(c for row in table_rows for c in row))
            statement = text(f"INSERT INTO {table} ({', '.join(columns)}) "
                             f"VALUES ({', '.join(':' + c for c in columns)})")
            connection.execute(statement, [{c: row.get(c) for c in columns} for row in table_rows])


def fill(engine: Engine) -> None:
    insert_rows(engine, release_rows())


def migrate(engine: Engine, revision: str, *, down: bool = False) -> None:
    """Run the revisions on `engine` up (or `down`) to `revision`, as `alembic upgrade`
    does, with SQLite's foreign keys on as thumb-tui's engines have them."""
    from alembic import command

    from storage.db.migrations import _config

    config = _config()
    with engine.connect() as connection:
        if engine.dialect.name == "sqlite":
            connection.exec_driver_sql("PRAGMA foreign_keys=ON")
        config.attributes["connection"] = connection
        try:
            (command.downgrade if down else command.upgrade)(config, revision)
        finally:
            del config.attributes["connection"]
        connection.commit()


def snapshot(engine: Engine, tables: dict[str, list[str]]) -> dict[str, list[tuple]]:
    """The rows of the release's tables, in the release's columns, ordered by id."""
    metadata = MetaData()
    metadata.reflect(engine, only=list(tables))
    with engine.connect() as connection:
        return {
            name: connection.execute(
                select(*(metadata.tables[name].c[c] for c in columns))
                .order_by(metadata.tables[name].c.id)
            ).all()
            for name, columns in tables.items()
        }


def release_columns(engine: Engine) -> dict[str, list[str]]:
    """Every table's columns, but `schema_version`, which gains a row that makes 0.1.0
    refuse the upgraded database."""
    inspector = inspect(engine)
    return {name: [c["name"] for c in inspector.get_columns(name)]
            for name in inspector.get_table_names() if name != "schema_version"}


def schema_differences(engine: Engine) -> list[str]:
    """How the database's schema differs from the models (`storage.db.schema_check`, what
    `thumb db upgrade` checks: tables, columns, types, indexes, unique constraints,
    foreign keys, named CHECK constraints, triggers); [] when it is theirs."""
    with engine.connect() as connection:
        return schema_damage(connection)


def build_sqlite_release(path: Path) -> None:
    connection = sqlite3.connect(path)
    connection.executescript((SCHEMAS / "release-0.1.0.sqlite.sql").read_text())
    connection.close()


@pytest.mark.slow
def test_a_new_database_has_exactly_the_models_schema(tmp_path):
    engine = open_database(tmp_path / "new.db")
    with engine.connect() as connection:
        assert current_revision(connection) == head_revision()
        assert quick_damage(connection) == []
        triggers = connection.execute(text(
            "SELECT tbl_name, name FROM sqlite_master WHERE type = 'trigger'")).all()
    assert schema_differences(engine) == []
    assert set(map(tuple, triggers)) == TRIGGERS["sqlite"]  # the list the check expects


def test_release_0_1_0_sqlite_database_upgrades_keeping_every_row(tmp_path):
    path = tmp_path / "thumb.db"
    build_sqlite_release(path)
    old = create_engine(f"sqlite:///{path}")
    fill(old)
    columns = release_columns(old)
    before = snapshot(old, columns)
    old.dispose()
    assert {t: len(rows) for t, rows in before.items()} == {
        t: len(rows) for t, rows in release_rows().items() if t != "schema_version"}

    engine = open_database(path)
    assert snapshot(engine, columns) == before
    assert schema_differences(engine) == []
    with engine.connect() as connection:
        assert current_revision(connection) == head_revision()
        assert connection.execute(text("SELECT max(version) FROM schema_version")).scalar() == 2
    finals = final_scores(engine).set_index("caption_id")
    assert finals.loc[1, ["precision", "recall", "final_source"]].tolist() == [4, 4, "resolution"]
    assert len(finals) == 6
    # THUMB 1.0 is stored with the values it allows, and the database holds ratings to it
    assert project_rubric(engine) == THUMB_1_0
    with engine.connect() as connection:
        assert connection.execute(text("SELECT DISTINCT rubric FROM fluency_check")).scalars(
            ).all() == ["thumb-1.0"]
    with pytest.raises(IntegrityError), engine.begin() as connection:
        connection.execute(text("UPDATE rating SET conciseness = 0.3 WHERE id = 1"))

    (backup,) = tmp_path.glob("thumb.db.backup-*")
    assert backup.name.startswith(f"thumb.db.backup-{RELEASE_0_1_0}-")
    copy = create_engine(f"sqlite:///{backup}")
    assert snapshot(copy, columns) == before
    copy.dispose()

    engine.dispose()
    again = open_database(path)  # at head: nothing to do, no second backup
    assert len(list(tmp_path.glob("thumb.db.backup-*"))) == 1
    with pytest.raises(Exception, match="append-only"), again.begin() as connection:
        connection.execute(text("DELETE FROM event_log"))


def test_a_project_at_head_goes_down_to_0013_and_back_up_keeping_every_row(tmp_path):
    """0015's downgrade rebuilt `annotator` through a batch, and on SQLite the foreign keys
    of the ratings and claims refused its DROP TABLE: a database with rows could not go
    back. Now every row stays down and up; and 0016 refuses to go down while it holds a
    rating that `thumb release --force` set aside, rather than lose it."""
    from storage.rating.project_queues import release_claims

    path = tmp_path / "thumb.db"
    build_sqlite_release(path)
    old = create_engine(f"sqlite:///{path}")
    fill(old)
    columns = release_columns(old)
    old.dispose()
    engine = open_database(path)
    before = snapshot(engine, columns)

    migrate(engine, "0013", down=True)
    with engine.connect() as connection:
        assert current_revision(connection) == "0013"
    assert snapshot(engine, columns) == before
    migrate(engine, "head")
    assert snapshot(engine, columns) == before
    assert schema_differences(engine) == []

    freed = release_claims(engine, "ann-a", actor="lead", image_key="img1", force=True)
    assert (freed.released, freed.set_aside) == (["img1"], 2)  # img1's two captions
    with pytest.raises(RuntimeError, match=r"released_rating holds 2 rating\(s\)"):
        migrate(engine, "0015", down=True)
    with engine.connect() as connection:
        assert current_revision(connection) == head_revision()
        assert connection.execute(text("SELECT count(*) FROM released_rating")).scalar() == 2
    engine.dispose()


@pytest.mark.slow
def test_thumb_db_upgrade_and_the_note_of_an_automatic_upgrade(tmp_path):
    from typer.testing import CliRunner

    from thumb_tui.cli import app

    runner = CliRunner()
    for name in ("auto.db", "admin.db"):
        build_sqlite_release(tmp_path / name)
        fill(create_engine(f"sqlite:///{tmp_path / name}"))
    status = runner.invoke(app, ["--db", str(tmp_path / "auto.db"), "status"])
    assert status.exit_code == 0, status.output
    note = (f"note: upgraded the database schema from revision {RELEASE_0_1_0} to "
            f"{head_revision()}; the old file is kept as {tmp_path}/auto.db.backup-")
    assert note in status.output
    upgrade = runner.invoke(app, ["--db", str(tmp_path / "admin.db"), "db", "upgrade"])
    assert upgrade.exit_code == 0, upgrade.output
    assert f"from revision {RELEASE_0_1_0} to {head_revision()}" in upgrade.output
    again = runner.invoke(app, ["--db", str(tmp_path / "admin.db"), "db", "upgrade"])
    assert f"schema is current (revision {head_revision()})" in again.output
    assert "checked: every table, column, index, constraint and trigger" in again.output
    missing = runner.invoke(app, ["--db", str(tmp_path / "none.db"), "db", "upgrade"])
    assert missing.exit_code == 2 and "no database at" in missing.output


def test_a_database_from_a_newer_thumb_tui_is_refused(tmp_path):
    path = tmp_path / "newer.db"
    open_database(path).dispose()
    connection = sqlite3.connect(path)
    connection.execute("UPDATE alembic_version SET version_num = '9999'")
    connection.commit()
    connection.close()
    with pytest.raises(SchemaError, match="revision 9999 is newer than this thumb-tui"):
        open_database(path)


def test_a_foreign_database_is_refused_and_left_byte_for_byte_as_it_was(tmp_path):
    """Another program's SQLite file: refused, and not switched to WAL on the way (which
    rewrites its header and asks for -shm files beside it)."""
    path = tmp_path / "other.db"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE notes (id INTEGER)")
    connection.commit()
    connection.close()
    before = path.read_bytes()
    with pytest.raises(SchemaError, match="not a thumb-tui database"):
        open_database(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.skipif(not POSTGRES_URL, reason="THUMB_TEST_POSTGRES is not set")
def test_release_0_1_0_postgresql_database_is_upgraded_by_the_admin_only():
    from benchmarks.races import drop_everything

    drop_everything(POSTGRES_URL)
    old = create_engine(POSTGRES_URL)
    with old.begin() as connection:
        connection.exec_driver_sql("DROP FUNCTION IF EXISTS event_log_append_only CASCADE")
        connection.exec_driver_sql((SCHEMAS / "release-0.1.0.postgresql.sql").read_text())
    fill(old)
    columns = release_columns(old)
    before = snapshot(old, columns)
    old.dispose()
    try:
        with pytest.raises(SchemaError, match=r"an administrator .* `thumb --db URL db upgrade`"):
            open_database(POSTGRES_URL)
        admin = create_engine(POSTGRES_URL)
        result = upgrade_database(admin)
        assert (result.from_revision, result.to_revision) == (RELEASE_0_1_0, head_revision())
        assert result.backup is None
        admin.dispose()
        engine = open_database(POSTGRES_URL)
        assert snapshot(engine, columns) == before
        assert schema_differences(engine) == []
        assert len(final_scores(engine)) == 6
        engine.dispose()
    finally:
        drop_everything(POSTGRES_URL)


def test_the_revisions_form_one_line_from_the_release():
    """Two branches that each add a revision after the same parent must not both land."""
    scripts = ScriptDirectory(str(SCRIPTS))
    assert scripts.get_heads() == [head_revision()]
    chain = [script.revision for script in scripts.walk_revisions()]
    assert chain[-1] == RELEASE_0_1_0
    assert len(chain) == len(list((SCRIPTS / "versions").glob("[0-9]*.py")))


def test_judgment_sets_of_revision_0009_upgrade_keeping_every_row(tmp_path):
    """0010 rebuilds the judgment tables on SQLite (their constraints change): every row
    stays, with its id; the upgraded database has the new constraints and no other."""
    path = tmp_path / "0009.db"
    old = create_engine(f"sqlite:///{path}")
    migrate(old, "0009")
    rows = {
        "judgment_set": [dict(id=1, name="likert", kind="score", scale_min=1.0, scale_max=5.0,
                              scale_step=1.0, source="j.csv", created_at=T0),
                         dict(id=2, name="pairs", kind="pairwise", source="p.csv",
                              created_at=T0)],
        "judgment_image": [dict(id=i, set_id=1 + (i > 2), key=f"img{i}") for i in (1, 2, 3)],
        "judgment_reference": [dict(id=r, image_id=1 + r % 2, position=r // 2,
                                    text=f"Reference {r}.") for r in range(4)],
        "judgment_caption": [dict(id=1, set_id=1, image_id=1, text="A dog.", external_id="c1"),
                             dict(id=2, set_id=1, image_id=2, text="A cat.", external_id="c2"),
                             dict(id=3, set_id=2, image_id=3, text="A."),
                             dict(id=4, set_id=2, image_id=3, text="B.")],
        "judgment_score": [dict(id=s, set_id=1, caption_id=1 + s % 2, judge=f"j{s}",
                                score=1.0 + s, scale_min=1.0, scale_max=5.0, scale_step=1.0,
                                note="") for s in range(4)],
        "judgment_pair": [dict(id=1, set_id=2, kind="pairwise", image_id=3, caption_a_id=3,
                               caption_b_id=4, judge="j", choice="a", category="hm")],
        "judgment_metric_score": [dict(id=1, caption_id=1, metric="bleu", signature="bleu|x",
                                       value=0.5, computed_at=T0),
                                  dict(id=2, caption_id=2, metric="bleu", signature="bleu|x",
                                       value=None, undefined="no references",
                                       computed_at=T0)],
    }
    insert_rows(old, rows)
    columns = {table: [c["name"] for c in inspect(old).get_columns(table)] for table in rows}
    before = snapshot(old, columns)
    old.dispose()

    engine = open_database(path)
    assert snapshot(engine, columns) == before
    assert schema_differences(engine) == []
    new = open_database(tmp_path / "new.db")
    upgraded, fresh = inspect(engine), inspect(new)
    for table in rows:  # CHECK constraints word for word (schema_differences: by name)
        assert sorted((c["name"], " ".join(c["sqltext"].split()))
                      for c in upgraded.get_check_constraints(table)) == sorted(
            (c["name"], " ".join(c["sqltext"].split()))
            for c in fresh.get_check_constraints(table)), table
    new.dispose()
    with engine.begin() as connection:
        connection.execute(text(
            "INSERT INTO judgment_set (id, name, kind, scale_min, scale_max, scale_step, "
            "source, created_at) VALUES (3, 'crowd', 'score', 0, 1, 0, 'c.csv', :t)"), {"t": T0})
        connection.execute(text("INSERT INTO judgment_image (id, set_id, key) VALUES "
                                "(4, 3, 'a'), (5, 3, 'b')"))
        connection.execute(text(  # one caption id under two images
            "INSERT INTO judgment_caption (id, set_id, image_id, text, external_id) VALUES "
            "(5, 3, 4, 'A dog.', 'c1'), (6, 3, 5, 'A dog.', 'c1')"))
        connection.execute(text(
            "INSERT INTO judgment_score (set_id, caption_id, judge, score, scale_min, "
            "scale_max, scale_step, note) VALUES (3, 5, 'crowd', 0.3333, 0, 1, 0, '')"))
    for score in (1.25, -0.5):
        with pytest.raises(IntegrityError), engine.begin() as connection:
            connection.execute(text(
                "INSERT INTO judgment_score (set_id, caption_id, judge, score, scale_min, "
                "scale_max, scale_step, note) VALUES (3, 6, 'crowd', :s, 0, 1, 0, '')"),
                {"s": score})
    with pytest.raises(IntegrityError), engine.begin() as connection:
        connection.execute(text(
            "INSERT INTO judgment_score (set_id, caption_id, judge, score, scale_min, "
            "scale_max, scale_step, note) VALUES (1, 1, 'jx', 2.5, 1, 5, 1, '')"))
    engine.dispose()


# The indexes 0013 drops, each with a UNIQUE constraint of its table that begins with its
# column (written from the models' constraints; the revision's docstring names the same).
COVERED_IN_0013 = {
    "ix_caption_image_id": ("caption", "image_id", "caption_one_per_system"),
    "ix_image_reference_image_id": ("image_reference", "image_id",
                                    "reference_position_unique"),
    "ix_rating_caption_id": ("rating", "caption_id", "rating_unique"),
    "ix_image_flag_image_id": ("image_flag", "image_id", "image_flag_once"),
    "ix_assignment_image_id": ("assignment", "image_id", "assignment_unique"),
    "ix_metric_score_caption_id": ("metric_score", "caption_id", "metric_score_unique"),
    "ix_bison_answer_item_id": ("bison_answer", "item_id", "bison_answer_unique"),
    "ix_bison_prediction_item_id": ("bison_prediction", "item_id", "bison_prediction_unique"),
    "ix_judgment_image_set_id": ("judgment_image", "set_id", "judgment_image_key_unique"),
    "ix_judgment_reference_image_id": ("judgment_reference", "image_id",
                                       "judgment_reference_position_unique"),
    "ix_judgment_caption_set_id": ("judgment_caption", "set_id",
                                   "judgment_caption_id_per_image"),
    "ix_judgment_score_caption_id": ("judgment_score", "caption_id",
                                     "judgment_score_one_per_judge"),
    "ix_judgment_metric_score_caption_id": ("judgment_metric_score", "caption_id",
                                            "judgment_metric_score_unique"),
    "ix_match_pair_image_id": ("match_pair", "image_id", "match_pair_unique"),
    "ix_match_proposal_pair_id": ("match_proposal", "pair_id", "match_proposal_unique"),
    "ix_match_batch_item_batch_id": ("match_batch_item", "batch_id",
                                     "match_batch_item_position"),
    "ix_match_claim_batch_id": ("match_claim", "batch_id", "match_claim_unique"),
    "ix_match_verification_claim_id": ("match_verification", "claim_id",
                                       "match_verification_unique"),
    "ix_positive_pair_set_id": ("positive_pair", "set_id", "positive_pair_unique"),
    "ix_gold_caption_gold_image_id": ("gold_caption", "gold_image_id", "gold_caption_unique"),
    "ix_gold_answer_gold_caption_id": ("gold_answer", "gold_caption_id",
                                       "gold_answer_unique"),
}


def unique_indexes_led_by(connection: Connection, table: str, column: str) -> set[str]:
    """The indexes of `table`'s UNIQUE constraints whose first column is `column`, named as
    the database names them (SQLite: sqlite_autoindex_<table>_<n>; PostgreSQL: as the
    constraint)."""
    if connection.dialect.name == "postgresql":
        return {c["name"] for c in inspect(connection).get_unique_constraints(table)
                if c["column_names"][0] == column}
    return {name for _, name, _, origin, _ in connection.exec_driver_sql(
                f"PRAGMA index_list({table})")
            if origin == "u" and min(connection.exec_driver_sql(
                f"PRAGMA index_info({name})"))[2] == column}


def lookup_index(connection: Connection, table: str, column: str) -> str | None:
    """The index the database reads to find `table`'s rows by `column` alone; None when it
    reads the whole table. PostgreSQL plans with sequential scans off, as for a table too
    large to read whole (a test's tables are tiny); call it inside a transaction."""
    query = f"SELECT id FROM {table} WHERE {column} = 1"
    if connection.dialect.name == "postgresql":
        connection.exec_driver_sql("SET LOCAL enable_seqscan = off")
        plan = " ".join(connection.exec_driver_sql(f"EXPLAIN {query}").scalars())
        pattern = r"Index (?:Only )?Scan (?:using|on) (\w+)"
    else:
        plan = " ".join(row[3] for row in connection.exec_driver_sql(
            f"EXPLAIN QUERY PLAN {query}"))
        pattern = rf"SEARCH {table} USING (?:COVERING )?INDEX (\w+) \({column}=\?\)"
    found = re.search(pattern, plan)
    return found.group(1) if found else None


def assert_covered_indexes_dropped(connection: Connection) -> None:
    """0013's indexes are gone, each one's covering constraint is there and begins with
    its column, and a look-up by that column alone reads such a constraint's index."""
    inspector = inspect(connection)
    for index, (table, column, constraint) in COVERED_IN_0013.items():
        assert index not in {i["name"] for i in inspector.get_indexes(table)}
        leading = {c["name"]: c["column_names"][0]
                   for c in inspector.get_unique_constraints(table)}
        assert leading.get(constraint) == column, index
        assert lookup_index(connection, table, column) in unique_indexes_led_by(
            connection, table, column), index


def test_no_index_repeats_the_first_columns_of_another():
    """An index on the columns another index or UNIQUE constraint of its table begins with
    only costs writes: the longer one serves the same look-ups (0013 dropped such)."""
    from sqlmodel import SQLModel

    redundant = []
    for table in SQLModel.metadata.tables.values():
        keys = [tuple(c.name for c in index.columns) for index in table.indexes] + [
            tuple(c.name for c in constraint.columns) for constraint in table.constraints
            if isinstance(constraint, UniqueConstraint)]
        for index in table.indexes:
            columns = tuple(c.name for c in index.columns)
            if not index.unique and any(len(key) > len(columns) and key[:len(columns)] == columns
                                        for key in keys):
                redundant.append(index.name)
    assert redundant == []


def test_revision_0013_drops_the_indexes_unique_constraints_cover(tmp_path):
    """A 0012 database keeps every row; the look-ups by the dropped indexes' columns read
    the UNIQUE constraints' indexes (e.g. rating by caption_id: rating_unique's)."""
    path = tmp_path / "0012.db"
    old = create_engine(f"sqlite:///{path}")
    migrate(old, "0012")
    rows = {table: rows for table, rows in release_rows().items() if table != "schema_version"}
    rows["fluency_check"] = [{**row, "rubric": "thumb-1.0"}  # a column since 0006
                             for row in rows["fluency_check"]]
    insert_rows(old, rows)
    columns = {table: names for table, names in release_columns(old).items() if table in rows}
    before = snapshot(old, columns)
    with old.connect() as connection:
        found = {name for (name,) in connection.exec_driver_sql(
            "SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert set(COVERED_IN_0013) <= found
    old.dispose()

    engine = open_database(path)
    assert snapshot(engine, columns) == before
    assert schema_differences(engine) == []
    with engine.connect() as connection:
        assert current_revision(connection) == head_revision()
        assert_covered_indexes_dropped(connection)
        assert lookup_index(connection, "rating", "caption_id") == "sqlite_autoindex_rating_1"
    engine.dispose()


def test_revision_0013_downgrade_recreates_the_indexes_of_0012(tmp_path):
    def indexes(engine: Engine) -> set[tuple]:
        with engine.connect() as connection:
            return set(connection.exec_driver_sql(
                "SELECT tbl_name, name, sql FROM sqlite_master WHERE type = 'index'"))

    at_0012 = create_engine(f"sqlite:///{tmp_path / '0012.db'}")
    migrate(at_0012, "0012")
    back = open_database(tmp_path / "back.db")
    migrate(back, "0012", down=True)
    assert indexes(back) == indexes(at_0012)
    assert {name for _, name, _ in indexes(back)} >= set(COVERED_IN_0013)
    at_0012.dispose()
    back.dispose()


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.skipif(not POSTGRES_URL, reason="THUMB_TEST_POSTGRES is not set")
def test_revision_0013_on_postgresql_drops_and_downgrade_recreates_the_indexes():
    from benchmarks.races import drop_everything

    def indexes() -> set[tuple]:
        with engine.connect() as connection:
            return set(connection.exec_driver_sql(
                "SELECT tablename, indexname, indexdef FROM pg_indexes "
                "WHERE schemaname = current_schema()"))

    drop_everything(POSTGRES_URL)
    engine = create_engine(POSTGRES_URL)
    try:
        migrate(engine, "0012")
        at_0012 = indexes()
        assert {name for _, name, _ in at_0012} >= set(COVERED_IN_0013)
        assert upgrade_database(engine).from_revision == "0012"
        with engine.begin() as connection:
            assert_covered_indexes_dropped(connection)
            assert lookup_index(connection, "rating", "caption_id") == "rating_unique"
        migrate(engine, "0012", down=True)
        assert indexes() == at_0012
    finally:
        engine.dispose()
        drop_everything(POSTGRES_URL)


DAMAGES = {
    "table": ("DROP TABLE judgment_score", "table judgment_score is missing"),
    "column": ("ALTER TABLE event_log DROP COLUMN os_login",
               "column event_log.os_login is missing"),
    "trigger": ("DROP TRIGGER event_log_no_update",
                "trigger event_log_no_update on event_log is missing"),
    "index": ("DROP INDEX ix_match_claim_annotator_id",
              "index ix_match_claim_annotator_id on match_claim (annotator_id) is missing"),
    # added, not lost: an attack, refused with the SQL that drops it
    "added trigger": ("CREATE TRIGGER rating_wipe AFTER INSERT ON rating "
                      "BEGIN DELETE FROM rating; END",
                      "trigger rating_wipe on rating is not in this thumb-tui's schema (it "
                      "runs on writes to rating): drop it with DROP TRIGGER rating_wipe;"),
    "added view": ("CREATE VIEW blind_scores AS SELECT * FROM rating",
                   "view blind_scores is not in this thumb-tui's schema"),
}


def damaged_copy(tmp_path: Path, damage: str) -> Path:
    """A copy of a fresh database with one statement of damage applied."""
    fresh = tmp_path / "fresh.db"
    if not fresh.exists():
        open_database(fresh).dispose()
    path = tmp_path / "damaged.db"
    path.write_bytes(fresh.read_bytes())
    connection = sqlite3.connect(path)
    connection.execute(damage)
    connection.commit()
    connection.close()
    return path


@pytest.mark.slow
@pytest.mark.parametrize("what", DAMAGES)
def test_db_upgrade_names_the_damage_exits_2_and_changes_nothing(tmp_path, what):
    from typer.testing import CliRunner

    from thumb_tui.cli import app

    damage, named = DAMAGES[what]
    path = damaged_copy(tmp_path, damage)
    before = path.read_bytes()
    result = CliRunner().invoke(app, ["--db", str(path), "db", "upgrade"])
    assert result.exit_code == 2, result.output
    assert named in result.output
    assert "is current" not in result.output
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged.db", "fresh.db"]
    # any other command refuses it too, at open, naming the damage
    status = CliRunner().invoke(app, ["--db", str(path), "status"])
    assert status.exit_code == 2 and named in status.output, status.output
    assert path.read_bytes() == before


@pytest.mark.slow
def test_a_trigger_that_deletes_ratings_is_refused_until_dropped(tmp_path):
    """The attack: someone with the file plants a trigger that deletes every rating on
    the next write. `thumb db upgrade` refuses the database naming the trigger and the
    SQL that drops it; once that SQL has run, the upgrade passes and ratings stay."""
    from typer.testing import CliRunner

    from thumb_tui.cli import app

    path = damaged_copy(tmp_path, DAMAGES["added trigger"][0])
    refused = CliRunner().invoke(app, ["--db", str(path), "db", "upgrade"])
    assert refused.exit_code == 2, refused.output
    assert "trigger rating_wipe on rating is not in this thumb-tui's schema" in refused.output
    drop = re.search(r"drop it with (DROP TRIGGER \S+;)", refused.output)
    assert drop is not None, refused.output
    connection = sqlite3.connect(path)
    connection.execute(drop.group(1))
    connection.commit()
    connection.close()
    upgraded = CliRunner().invoke(app, ["--db", str(path), "db", "upgrade"])
    assert upgraded.exit_code == 0, upgraded.output
    assert "no trigger, view, rule, function or policy was added" in upgraded.output


def test_an_upgrade_whose_result_would_be_damaged_is_rolled_back(tmp_path):
    """A 0.1.0 database missing its event log's triggers: the revisions run, the result is
    checked in their transaction, and the refusal leaves the schema and rows as they were
    (opening the file turns on WAL mode, a header byte) and no backup behind."""

    def dump() -> list[str]:
        connection = sqlite3.connect(path)
        try:
            return list(connection.iterdump())
        finally:
            connection.close()

    path = tmp_path / "old.db"
    build_sqlite_release(path)
    old = create_engine(f"sqlite:///{path}")
    fill(old)
    old.dispose()
    connection = sqlite3.connect(path)
    connection.execute("DROP TRIGGER event_log_no_delete")
    connection.commit()
    connection.close()
    before = dump()
    with pytest.raises(SchemaDamaged, match="trigger event_log_no_delete on event_log is "
                                            "missing") as refused:
        open_database(path)
    assert refused.value.problems == ["trigger event_log_no_delete on event_log is missing"]
    assert dump() == before
    assert [p.name for p in tmp_path.iterdir()] == ["old.db"]


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.skipif(not POSTGRES_URL, reason="THUMB_TEST_POSTGRES is not set")
def test_a_damaged_postgresql_database_is_named_and_left_as_it_is():
    from benchmarks.races import drop_everything

    drop_everything(POSTGRES_URL)
    try:
        engine = open_database(POSTGRES_URL)
        with engine.connect() as connection:
            assert quick_damage(connection) == []
            triggers = connection.execute(text(
                "SELECT c.relname, t.tgname FROM pg_trigger AS t JOIN pg_class AS c "
                "ON c.oid = t.tgrelid WHERE NOT t.tgisinternal")).all()
        assert set(map(tuple, triggers)) == TRIGGERS["postgresql"]
        assert schema_differences(engine) == []
        with engine.begin() as connection:
            for damage in ("DROP TABLE judgment_pair",
                           "ALTER TABLE event_log DROP COLUMN os_login",
                           "DROP TRIGGER event_log_append_only ON event_log",
                           "ALTER TABLE match_claim DROP CONSTRAINT match_claim_status",
                           "DROP INDEX ix_match_claim_annotator_id"):
                connection.exec_driver_sql(damage)

        def catalog() -> list:
            with engine.connect() as connection:
                return connection.execute(text(
                    "SELECT conname, conrelid::regclass::text FROM pg_constraint "
                    "UNION ALL SELECT indexname, tablename FROM pg_indexes "
                    "UNION ALL SELECT column_name, table_name FROM information_schema.columns "
                    "WHERE table_schema = current_schema() ORDER BY 1, 2")).all()

        before = catalog()
        named = ["table judgment_pair is missing", "column event_log.os_login is missing",
                 "trigger event_log_append_only on event_log is missing",
                 "CHECK constraint match_claim_status on match_claim is missing",
                 "index ix_match_claim_annotator_id on match_claim (annotator_id) is missing"]
        with pytest.raises(SchemaDamaged) as refused:
            upgrade_database(engine)
        assert sorted(refused.value.problems) == sorted(named)
        with pytest.raises(SchemaDamaged):  # every command's open refuses it too
            open_database(POSTGRES_URL)
        assert catalog() == before
        engine.dispose()
    finally:
        drop_everything(POSTGRES_URL)


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.skipif(not POSTGRES_URL, reason="THUMB_TEST_POSTGRES is not set")
def test_what_someone_added_to_a_postgresql_team_database_is_refused_by_name():
    """A team database (its policies and functions are ours) is sound; then a trigger and
    its function that delete every rating, a policy that opens every rating, a view and
    a rule are planted: `thumb db upgrade` names each with the SQL that drops it, every
    command's open refuses the database, and nothing is changed."""
    from tests.team_helpers import team_on

    with team_on(POSTGRES_URL, {"alice": False}) as team:
        assert schema_differences(team.admin) == []
        with team.admin.begin() as connection:
            connection.exec_driver_sql(
                "CREATE FUNCTION wipe() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN DELETE FROM rating; RETURN NULL; END $$")
            connection.exec_driver_sql("CREATE TRIGGER rating_wipe AFTER INSERT ON rating "
                                       "FOR EACH STATEMENT EXECUTE FUNCTION wipe()")
            connection.exec_driver_sql(f"CREATE POLICY everyone_reads ON rating FOR SELECT "
                                       f"TO {team.roles.annotator} USING (true)")
            connection.exec_driver_sql("CREATE VIEW blind_scores AS SELECT * FROM rating")
            connection.exec_driver_sql("CREATE RULE no_flags AS ON INSERT TO image_flag "
                                       "DO INSTEAD NOTHING")
        try:
            with pytest.raises(SchemaDamaged) as refused:
                upgrade_database(team.admin)
            assert sorted(refused.value.problems) == sorted([
                "function wipe is not in this thumb-tui's schema (a trigger or policy could "
                "call it): drop it with DROP FUNCTION wipe();",
                "trigger rating_wipe on rating is not in this thumb-tui's schema (it runs on "
                "writes to rating): drop it with DROP TRIGGER rating_wipe ON rating;",
                "policy everyone_reads on rating is not in this thumb-tui's schema (it opens "
                "rows of rating to a role): drop it with DROP POLICY everyone_reads ON "
                "rating;",
                "view blind_scores is not in this thumb-tui's schema (a view runs queries "
                "with its owner's rights): drop it with DROP VIEW blind_scores;",
                "rule no_flags on image_flag is not in this thumb-tui's schema (it rewrites "
                "statements on image_flag): drop it with DROP RULE no_flags ON image_flag;"])
            with pytest.raises(SchemaDamaged, match="trigger rating_wipe on rating"):
                open_database(POSTGRES_URL)
            with team.admin.begin() as connection:
                for problem in refused.value.problems:
                    connection.exec_driver_sql(problem.split("drop it with ")[1])
            assert schema_differences(team.admin) == []
        finally:
            with team.admin.begin() as connection:
                connection.exec_driver_sql("DROP VIEW IF EXISTS blind_scores")
                connection.exec_driver_sql("DROP FUNCTION IF EXISTS wipe() CASCADE")
