"""What a campaign lead's trial of the operations found: an upgrade that fails leaves no
backup copy behind (each retry would add one); a backup that cannot read a database in a
read-only folder says why; and on a team database an annotator who writes a stage-2 claim
or rating of their own with plain SQL reads no stage-1 scores the protocol hides (the other
blind rater's of their own image, anyone's of an image still at stage 1)."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import DBAPIError

from storage import import_captions, open_database
from storage.db.migrations import SchemaError
from storage.models import Stage
from storage.rating.project_queues import assign_double
from storage.rating.rating_sessions import AnnotationSession
from tests.conftest import SAMPLE_CSV
from tests.team_helpers import Team, team_on
from tests.test_migrations import migrate
from tests.test_team_rls import is_double, rate_image

POSTGRES_URL = os.environ.get("THUMB_TEST_POSTGRES")


def older_database(path: Path) -> None:
    """A SQLite database at revision 0010 (before the head), in WAL mode as thumb-tui
    leaves its files."""
    engine = create_engine(f"sqlite:///{path}")
    migrate(engine, "0010")
    engine.dispose()
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.close()


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}.backup-*"))


def test_an_upgrade_that_fails_leaves_no_backup_copy(tmp_path, monkeypatch):
    path = tmp_path / "thumb.db"
    older_database(path)
    before = path.read_bytes()

    def fails(*_args: object) -> None:
        raise SchemaError("a revision failed half-way")

    monkeypatch.setattr("alembic.command.upgrade", fails)
    with pytest.raises(SchemaError, match="half-way"):
        open_database(path)
    assert backups(path) == []
    assert path.read_bytes() == before  # rolled back: the database is its own copy


@pytest.mark.slow
def test_an_upgrade_refused_by_another_writer_leaves_no_backup_copy(tmp_path):
    """An annotator still rating with the old thumb-tui holds the write lock past the
    upgrade's lock wait: the copy is made first, and must go when the upgrade gives up."""
    path = tmp_path / "thumb.db"
    older_database(path)
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("BEGIN IMMEDIATE")
    release = threading.Timer(30, writer.rollback)  # the test must not hang if it fails
    release.start()
    try:
        with pytest.raises(Exception, match="database is locked"):
            open_database(path)
        assert backups(path) == []
    finally:
        release.cancel()
        writer.rollback()
        writer.close()
    open_database(path).dispose()  # once it is free, the upgrade runs and keeps its copy
    assert len(backups(path)) == 1


# -- a team on PostgreSQL ----------------------------------------------------------------

FORGED_CLAIM = ("INSERT INTO assignment (image_id, annotator_id, stage, shuffle_seed, "
                "seconds, focus, last_viewed_at) VALUES (:image, thumb_me(), 2, 0, 0, 0, now())")
CLAIM_MOVED_TO_REVIEW = ("UPDATE assignment SET stage = 2 WHERE image_id = :image "
                         "AND annotator_id = thumb_me()")
FORGED_REVIEW = ("INSERT INTO rating (caption_id, annotator_id, stage, fluency, conciseness, "
                 "inclusive, note, seconds, rubric, created_at, updated_at) SELECT id, "
                 "thumb_me(), 2, 0, 0, 0, '', 0, 'thumb-1.0', now(), now() FROM caption "
                 "WHERE image_id = :image")
OTHERS_STAGE_ONE = ("SELECT r.precision FROM rating r JOIN caption c ON c.id = r.caption_id "
                    "WHERE c.image_id = :image AND r.stage = 1 AND r.annotator_id <> thumb_me()")


@pytest.fixture
def team() -> Iterator[Team]:
    if not POSTGRES_URL:
        pytest.skip("THUMB_TEST_POSTGRES is not set")
    with team_on(POSTGRES_URL, {"alice": False, "bob": False, "carol": False,
                                "lead": True}) as made:
        import_captions(made.engine("lead"), SAMPLE_CSV, actor="lead")
        yield made


def read_after(team: Team, who: str, forgery: str, image_id: int) -> list[int]:
    """The other raters' stage-1 scores of the image that `who` reads once their role has
    tried to write `forgery` (since #45 the server's write policies refuse it; rolled back
    afterwards)."""
    with team.engine(who).connect() as connection:
        assert connection.execute(text(OTHERS_STAGE_ONE), {"image": image_id}).all() == []
        try:
            with connection.begin_nested():
                connection.execute(text(forgery), {"image": image_id})
        except DBAPIError:
            pass  # refused: the reads below must still show nothing
        seen = connection.execute(text(OTHERS_STAGE_ONE), {"image": image_id}).scalars().all()
        connection.rollback()
    return seen


def alice_rates_a_double_image(team: Team) -> int:
    """A double-rated image's id, with alice's stage-1 rating (precision 1): one of the
    two blind ratings it takes."""
    assign_double(team.engine("lead"), 0.2, seed=3, actor="lead")
    alice = AnnotationSession(team.engine("alice"), team.names["alice"])
    double = next(i for i, image in enumerate(alice.images) if is_double(team, image.id))
    rate_image(alice, double, precision=1)
    return alice.images[double].id


@pytest.mark.slow
@pytest.mark.postgres
def test_a_forged_review_does_not_show_the_other_blind_raters_scores(team):
    image_id = alice_rates_a_double_image(team)
    bob = AnnotationSession(team.engine("bob"), team.names["bob"])
    rate_image(bob, bob.index_of(image_id), precision=2)  # the blind second rating
    for forgery in (FORGED_CLAIM, CLAIM_MOVED_TO_REVIEW, FORGED_REVIEW):
        assert read_after(team, "bob", forgery, image_id) == []
    # the image's real reviewer (who rated none of it) reads both raters' scores
    carol = AnnotationSession(team.engine("carol"), team.names["carol"], stage=Stage.SECOND)
    carol.open_image(carol.index_of(image_id))
    with team.engine("carol").connect() as connection:
        seen = connection.execute(text(OTHERS_STAGE_ONE), {"image": image_id}).scalars()
        assert sorted(set(seen)) == [1, 2]


@pytest.mark.slow
@pytest.mark.postgres
def test_a_forged_review_does_not_show_scores_of_an_image_still_at_stage_one(team):
    image_id = alice_rates_a_double_image(team)
    for forgery in (FORGED_CLAIM, FORGED_REVIEW):
        assert read_after(team, "bob", forgery, image_id) == []


def test_a_backup_that_cannot_open_a_read_only_folders_database_says_why(tmp_path,
                                                                          monkeypatch):
    """A database in a folder this process cannot write (read-only media: SQLite cannot
    create the -shm file it reads a WAL database through). Root writes any folder but a
    read-only mount, so the folder's refusal and SQLite's are both simulated here;
    /tmp/trial_ops/repro/05_backup_from_read_only_folder.sh runs it on a real mount."""
    from typer.testing import CliRunner

    from thumb_tui.cli import app

    archive = tmp_path / "archive"
    archive.mkdir()
    open_database(archive / "thumb.db").dispose()

    def cannot_open(*_args: object, **_kwargs: object) -> None:
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr("storage.db.backup.copy_sqlite", cannot_open)
    monkeypatch.setattr("thumb_tui.cli.common.os.access",
                        lambda path, mode: Path(path) != archive)
    result = CliRunner().invoke(app, ["--db", str(archive / "thumb.db"), "db", "backup",
                                      str(tmp_path / "copy.db")])
    assert result.exit_code == 2, result.output
    assert "unable to open database file" in result.output
    assert f"its folder {archive} is read-only here" in result.output
    assert not (tmp_path / "copy.db").exists()


def test_any_command_that_cannot_open_a_read_only_folders_database_says_why(tmp_path,
                                                                            monkeypatch):
    """The same hint where any command opens the database (`thumb status` here), not only
    `db backup`; SQLite's refusal simulated as above."""
    from sqlalchemy.exc import OperationalError
    from typer.testing import CliRunner

    from thumb_tui.cli import app

    archive = tmp_path / "archive"
    archive.mkdir()
    open_database(archive / "thumb.db").dispose()

    def cannot_open(*_args: object, **_kwargs: object) -> None:
        raise OperationalError("connect", None,
                               sqlite3.OperationalError("unable to open database file"))

    monkeypatch.setattr("storage.db.opening.open_database", cannot_open)
    monkeypatch.setattr("thumb_tui.cli.common.os.access",
                        lambda path, mode: Path(path) != archive)
    result = CliRunner().invoke(app, ["--db", str(archive / "thumb.db"), "status"])
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "unable to open database file" in result.output
    assert f"its folder {archive} is read-only here" in result.output


def test_an_upgrade_another_process_made_first_leaves_only_its_reported_copy(tmp_path,
                                                                             monkeypatch):
    """Two commands open an older file at once: both copy it, one upgrades and reports its
    copy; the other finds the schema current under the lock and must not leave a second,
    unreported copy (named after the old revision, whichever state it caught)."""
    from storage.db import migrations

    path = tmp_path / "thumb.db"
    older_database(path)
    make_copy = migrations._backup_sqlite

    def copy_while_another_process_upgrades(engine: Engine, revision: str) -> Path:
        copy = make_copy(engine, revision)
        monkeypatch.setattr(migrations, "_backup_sqlite", make_copy)
        open_database(path).dispose()  # the other command: its copy, then the upgrade
        return copy

    monkeypatch.setattr(migrations, "_backup_sqlite", copy_while_another_process_upgrades)
    notes = []
    open_database(path, on_upgrade=notes.append).dispose()
    assert notes == []  # the other command upgraded it, and said so
    assert len(backups(path)) == 1
