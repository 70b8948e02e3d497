from __future__ import annotations

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from tests.conftest import SAMPLE_CSV, THUMB_JSONL, THUMB_REFS, needs_anchors
from thumb_tui.cli import app

runner = CliRunner()


def test_import_status_export(tmp_path):
    db = str(tmp_path / "cli.db")
    result = runner.invoke(app, ["--db", db, "import", str(SAMPLE_CSV), "--by", "me"])
    assert result.exit_code == 0, result.output
    assert "15 images, 60 captions, 60 references" in result.output
    status = runner.invoke(app, ["--db", db, "status"])
    assert status.exit_code == 0
    assert "captions by Human" in status.output and "60" in status.output
    out = tmp_path / "out.jsonl"
    exported = runner.invoke(app, ["--db", db, "export", "--format", "jsonl", "--out", str(out)])
    assert exported.exit_code == 0 and "wrote 60 rows" in exported.output
    assert len(out.read_text(encoding="utf-8").splitlines()) == 60


def test_bad_input_exits_2_with_file_and_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("image,system,caption\nmissing.png,H,A dog.\n", encoding="utf-8")
    result = runner.invoke(app, ["--db", str(tmp_path / "x.db"), "import", str(bad)])
    assert result.exit_code == 2
    assert f"{bad}:2: image file not found: missing.png" in result.output
    assert "database is unchanged" in result.output
    assert list(tmp_path.iterdir()) == [bad]  # no empty database left behind


def test_empty_queues_say_why_and_open_no_screen(tmp_path):
    db = str(tmp_path / "q.db")
    assert runner.invoke(app, ["--db", db, "import", str(SAMPLE_CSV)]).exit_code == 0
    expected = {
        ("review",): "Nothing to review",
        ("resolve",): "Nothing for you to resolve",
        ("bison", "annotate"): "No BISON items",
    }
    assert runner.invoke(app, ["--db", db, "annotator", "zoe"]).exit_code == 0  # known first
    for command, message in expected.items():
        result = runner.invoke(app, ["--db", db, *command, "--annotator", "zoe"])
        assert result.exit_code == 0 and message in result.output, (command, result.output)
    assert runner.invoke(app, ["--db", db, "annotator", "dan", "--native"]).exit_code == 0
    result = runner.invoke(app, ["--db", db, "fluency-round", "--annotator", "dan"])
    assert result.exit_code == 0 and "No captions are waiting" in result.output


def test_references_out_only_with_the_release_format(tmp_path):
    db = str(tmp_path / "r.db")
    runner.invoke(app, ["--db", db, "import", str(SAMPLE_CSV)])
    result = runner.invoke(app, ["--db", db, "export", "--format", "csv", "--out",
                                 str(tmp_path / "x.csv"), "--references-out",
                                 str(tmp_path / "refs.jsonl")])
    assert result.exit_code == 2 and "--references-out is for --format thumb-jsonl" in (
        result.output)
    assert not (tmp_path / "x.csv").exists()


def test_unknown_export_format(tmp_path):
    result = runner.invoke(
        app, ["--db", str(tmp_path / "x.db"), "export", "--format", "xlsx", "--out", "x"]
    )
    assert result.exit_code == 2 and "unknown format 'xlsx'" in result.output


@pytest.mark.slow
@needs_anchors
def test_import_thumb_and_export_release(tmp_path):
    db = str(tmp_path / "t.db")
    result = runner.invoke(
        app, ["--db", db, "import-thumb", str(THUMB_JSONL), "--references", str(THUMB_REFS)]
    )
    assert result.exit_code == 0, result.output
    out = tmp_path / "release.jsonl"
    result = runner.invoke(
        app, ["--db", db, "export", "--format", "thumb-jsonl", "--out", str(out)]
    )
    assert result.exit_code == 0
    assert out.read_bytes() == THUMB_JSONL.read_bytes()


def test_read_only_commands_need_an_existing_database(tmp_path):
    db = tmp_path / "typo.db"
    for command in (["status"], ["export", "--out", str(tmp_path / "x.csv")],
                    ["annotate", "--annotator", "a"], ["metrics", "list"]):
        result = runner.invoke(app, ["--db", str(db), *command])
        assert result.exit_code == 2, command
        assert f"no database at {db}" in result.output
    assert not db.exists()


def test_annotate_needs_a_name(tmp_path):
    db = str(tmp_path / "a.db")
    runner.invoke(app, ["--db", db, "import", str(SAMPLE_CSV)])
    result = runner.invoke(app, ["--db", db, "annotate", "--annotator", "  "])
    assert result.exit_code == 2 and "--annotator needs a name" in result.output


def test_annotate_says_in_counts_why_no_image_is_open(tmp_path):
    db = str(tmp_path / "e.db")
    runner.invoke(app, ["--db", db, "import", str(SAMPLE_CSV)])
    from storage import open_database
    from storage.rating.annotators import register_annotator

    register_annotator(open_database(tmp_path / "empty.db"), "zoe", None)  # no images yet
    result = runner.invoke(app, ["--db", str(tmp_path / "empty.db"), "annotate",
                                 "--annotator", "zoe"])
    assert result.exit_code == 0 and "the project has none yet" in result.output
    ratings = SAMPLE_CSV.parent / "example_ratings.csv"  # ann-a rated all 15 images
    assert runner.invoke(app, ["--db", db, "import", str(ratings)]).exit_code == 0
    result = runner.invoke(app, ["--db", db, "annotate", "--annotator", "ann-a"])
    assert result.exit_code == 0
    assert "of the project's 15 images, you rated 15 through stage 1" in result.output
    assert "and 0 are taken or closed by other annotators" in result.output


@pytest.mark.slow
def test_annotator_records_native_speaker(tmp_path):
    db = str(tmp_path / "n.db")
    runner.invoke(app, ["--db", db, "import", str(SAMPLE_CSV)])
    result = runner.invoke(app, ["--db", db, "annotator", "dave", "--native"])
    assert result.exit_code == 0 and "dave: a native English speaker" in result.output
    result = runner.invoke(app, ["--db", db, "annotator", "dave"])
    assert "dave: a native English speaker" in result.output
    assert runner.invoke(app, ["--db", db, "annotator", "erin"]).exit_code == 0
    result = runner.invoke(app, ["--db", db, "fluency-round", "--annotator", "erin"])
    assert result.exit_code == 2 and "not recorded as a native English speaker" in result.output


@pytest.mark.parametrize("name", ["bob\x1b[2J", "bob\u202eevil", "bob\tsmith", "a\nb"])
def test_an_annotator_name_that_an_import_would_refuse_is_refused(tmp_path, name):
    """A name with what `thumb import` refuses (or more than one line) would make the
    project's export impossible to import again: refused where it is given, nothing made."""
    db = str(tmp_path / "n.db")
    runner.invoke(app, ["--db", db, "import", str(SAMPLE_CSV)])
    for command in (["annotator", name], ["annotate", "--annotator", name,
                                          "--image-mode", "none"]):
        result = runner.invoke(app, ["--db", db, *command])
        assert result.exit_code == 2 and "is not allowed (a name is one line" in result.output
    assert "bob" not in runner.invoke(app, ["--db", db, "status"]).output


@pytest.mark.parametrize("command", [["agreement"], ["report", "--out", "r"],
                                     ["bison", "report"], ["judgments", "report", "j"]])
def test_a_handful_of_resamples_is_refused_not_reported_as_an_interval(tmp_path, command):
    """--bootstrap 1 gave a "90% CI" and a significance verdict from one draw."""
    db = str(tmp_path / "b.db")
    runner.invoke(app, ["--db", db, "import", str(SAMPLE_CSV)])
    for count in ("1", "99"):
        result = runner.invoke(app, ["--db", db, *command, "--bootstrap", count])
        said = " ".join(result.output.replace("│", " ").split())  # unboxed, one line
        assert result.exit_code == 2 and "too few for a confidence interval" in said
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("command", [["annotate"], ["bison", "annotate"]])
def test_the_screens_refuse_to_start_without_a_terminal(tmp_path, command):
    """With standard input and output a pipe or a file, the app waited for keys that never
    came, writing escape codes into the file: now one line, exit 2, nothing claimed."""
    from sqlalchemy import func, select

    from storage import open_database
    from storage.models import Assignment

    db = str(tmp_path / "t.db")
    runner.invoke(app, ["--db", db, "import", str(SAMPLE_CSV)])
    runner.invoke(app, ["--db", db, "bison", "import", str(SAMPLE_CSV.parent / "bison.jsonl")])
    runner.invoke(app, ["--db", db, "annotator", "zed"])
    result = runner.invoke(app, ["--db", db, *command, "--annotator", "zed",
                                 "--image-mode", "none"])
    assert result.exit_code == 2 and "need a terminal" in result.output, result.output
    engine = open_database(db)
    with engine.connect() as connection:
        claims = connection.execute(select(func.count()).select_from(Assignment)).scalar()
    engine.dispose()
    assert claims == 0


@pytest.mark.slow
def test_agreement_md_out_says_what_it_wrote(tmp_path):
    from storage import open_database
    from tests.test_workflow import review_with_changes

    db = tmp_path / "a.db"
    assert runner.invoke(app, ["--db", str(db), "import", str(SAMPLE_CSV)]).exit_code == 0
    review_with_changes(open_database(db))
    out = tmp_path / "agreement.md"
    result = runner.invoke(app, ["--db", str(db), "agreement", "--format", "md", "--out",
                                 str(out), "--bootstrap", "100"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"wrote the agreement tables to {out}"
    assert out.read_text(encoding="utf-8").startswith("Agreement")


def test_the_collector_is_paused_for_a_command_and_restored_as_it_was():
    import gc

    from thumb_tui.cli.common import collector_paused

    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        assert not gc.isenabled()
        raise RuntimeError("the command failed")
    assert gc.isenabled()  # back on after an error too
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # off before, off after
    finally:
        gc.enable()


@pytest.mark.slow
def test_native_on_the_rating_command_is_recorded_even_with_nothing_to_rate(tmp_path):
    db = str(tmp_path / "n.db")
    runner.invoke(app, ["--db", db, "import", str(SAMPLE_CSV)])
    assert runner.invoke(app, ["--db", db, "annotator", "fay"]).exit_code == 0
    result = runner.invoke(app, ["--db", db, "review", "--annotator", "fay", "--native"])
    assert result.exit_code == 0 and "Nothing to review" in result.output
    result = runner.invoke(app, ["--db", db, "annotator", "fay"])
    assert "fay: a native English speaker" in result.output


def test_an_annotator_without_a_recorded_language_is_said_so_plainly(tmp_path):
    db = str(tmp_path / "n.db")
    runner.invoke(app, ["--db", db, "import", str(SAMPLE_CSV)])
    result = runner.invoke(app, ["--db", db, "annotator", "gil"])
    assert result.exit_code == 0
    assert "gil: native language not recorded (--native or --non-native records it)" in (
        result.output)


def test_printed_commands_and_titles_never_show_a_database_password(tmp_path):
    from thumb_tui.cli.common import State

    url = State()
    url.db = "postgresql+psycopg://lead:s3cret@db.example:5432/thumb"
    assert url.shown_db == "postgresql+psycopg://lead:***@db.example:5432/thumb"
    assert "s3cret" not in url.db_option
    db = str(tmp_path / "n.db")
    runner.invoke(app, ["--db", db, "import", str(SAMPLE_CSV)])
    runner.invoke(app, ["--db", db, "annotator", "bea"])
    given = runner.invoke(app, ["--db", db, "next", "--annotator", "bea"])
    assert given.output.startswith(f"thumb --db {db} annotate --annotator bea")
    from_environment = runner.invoke(app, ["next", "--annotator", "bea"],
                                     env={"THUMB_DB": db})  # found again the same way
    assert from_environment.output.startswith("thumb annotate --annotator bea")


@pytest.mark.slow
def test_output_into_a_closed_pipe_ends_quietly(tmp_path):
    """`thumb … | head`: once the reader has gone, the command stops with status 1 and
    nothing on stderr, as Click ends any command whose output is cut short (it printed
    "error: Broken pipe" with status 2)."""
    db = str(tmp_path / "p.db")
    assert runner.invoke(app, ["--db", db, "import", str(SAMPLE_CSV)]).exit_code == 0
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line is written
    try:
        done = subprocess.run([sys.executable, "-m", "thumb_tui", "--db", db, "status",
                               "--format", "json"], stdout=write_end, stderr=subprocess.PIPE,
                              timeout=120, check=False)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (1, b"")


def test_annotator_commands_list_rename_and_retire_and_never_make_a_subcommand_a_name(
        tmp_path):
    """The trial: `thumb annotator list` silently made an annotator named "list", and no
    command listed, renamed or retired annotators."""
    from sqlalchemy import select

    from storage import open_database
    from storage.models import Event, Stage
    from storage.rating.annotators import annotator_names
    from storage.rating.protocol import ProtocolError, check_may_rate, open_images

    db = str(tmp_path / "a.db")
    assert runner.invoke(app, ["--db", db, "import", str(SAMPLE_CSV)]).exit_code == 0
    empty = runner.invoke(app, ["--db", db, "annotator", "list"])
    assert empty.exit_code == 0 and "No annotators yet" in empty.output
    assert runner.invoke(app, ["--db", db, "annotator", "zoe", "--native"]).exit_code == 0
    assert runner.invoke(app, ["--db", db, "annotator", "add", "yan"]).exit_code == 0
    for name in ("list", "retire"):
        refused = runner.invoke(app, ["--db", db, "annotator", "add", name])
        assert refused.exit_code == 2 and "is a subcommand of `thumb annotator`" in (
            refused.output)
    # the trial after the fix: a mistyped subcommand made annotators `lsit` and `Rename`
    for typo, meant in (("lsit", "list"), ("Rename", "rename"), ("retier", "retire")):
        refused = runner.invoke(app, ["--db", db, "annotator", typo])
        assert refused.exit_code == 2 and f"did you mean `{meant}`?" in refused.output
        assert "thumb annotator add NAME" in refused.output
    added = runner.invoke(app, ["--db", db, "annotator", "add", "lisa"])
    assert added.exit_code == 0 and added.output.startswith("added annotator lisa:")
    engine = open_database(db)
    assert annotator_names(engine) == ["lisa", "yan", "zoe"]

    taken = runner.invoke(app, ["--db", db, "annotator", "rename", "zoe", "yan"])
    assert taken.exit_code == 2 and "there is an annotator 'yan' already" in taken.output
    assert runner.invoke(app, ["--db", db, "annotator", "rename", "zoe", "add"]).exit_code == 2
    renamed = runner.invoke(app, ["--db", db, "annotator", "rename", "zoe", "amy", "--by",
                                  "lead"])
    assert renamed.exit_code == 0 and "renamed zoe to amy" in renamed.output
    retired = runner.invoke(app, ["--db", db, "annotator", "retire", "yan", "--by", "lead"])
    assert retired.exit_code == 0 and retired.output.startswith("retired yan")
    listed = runner.invoke(app, ["--db", db, "annotator", "list"])
    rows = {line.split()[0]: line.split()[1:] for line in listed.output.splitlines()[2:]}
    assert rows["amy"][0] == "yes" and rows["amy"][-1] == "-"
    assert rows["yan"][0] == "not" and rows["yan"][-1] != "-"  # retired: still listed

    events = Event.__table__
    with engine.connect() as connection:
        logged = connection.execute(
            select(events.c.action, events.c.old_value, events.c.new_value, events.c.actor)
            .where(events.c.table_name == "annotator")).all()
        assert ("rename", '"zoe"', '"amy"', "lead") in logged
        assert any(action == "retire" and actor == "lead" for action, *_, actor in logged)
        assert open_images(connection, "yan", Stage.FIRST) == set()
        image_id = next(iter(open_images(connection, "amy", Stage.FIRST)))
        with pytest.raises(ProtocolError, match="yan is retired"):
            check_may_rate(connection, "yan", Stage.FIRST, image_id)
    waiting = runner.invoke(app, ["--db", db, "next", "--annotator", "yan"])
    assert "Nothing waits for yan now (retired" in waiting.output
    stage_one = runner.invoke(app, ["--db", db, "annotate", "--annotator", "yan",
                                    "--image-mode", "none"])
    assert "you are retired" in stage_one.output


def test_db_after_the_command_name_says_where_it_goes(tmp_path):
    """`thumb status --db x` said only "No such option: --db"."""
    result = runner.invoke(app, ["status", "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2
    assert "--db goes before the command's name (thumb --db PATH status" in " ".join(
        result.output.replace("│", " ").split())
    nested = runner.invoke(app, ["gold", "accuracy", f"--db={tmp_path / 'x.db'}"])
    assert "(thumb --db PATH gold accuracy" in " ".join(nested.output.replace("│", " ").split())
