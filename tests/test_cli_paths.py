"""Path mistakes end every command in one line and exit 2, never a traceback: a --db in a
folder that does not exist, a --db that is a CSV file, an --out into a missing folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tests.conftest import SAMPLE_CSV
from thumb_tui.cli import app

runner = CliRunner()
SAMPLE_RATINGS = SAMPLE_CSV.parent / "example_ratings.csv"
# The least each command needs besides --db; {out} is a path in a missing folder.
COMMANDS = {
    "import": ["import", str(SAMPLE_CSV)],
    "import-thumb": ["import-thumb", str(SAMPLE_CSV), "--references", str(SAMPLE_CSV)],
    "export": ["export", "--out", "{out}"],
    "status": ["status"],
    "annotator add": ["annotator", "add", "ann"],
    "annotator list": ["annotator", "list"],
    "annotator rename": ["annotator", "rename", "ann", "bea"],
    "annotator retire": ["annotator", "retire", "ann"],
    "assign": ["assign", "--double", "0.1"],
    "release": ["release", "--annotator", "ann"],
    "annotate": ["annotate", "--annotator", "ann", "--image-mode", "none"],
    "review": ["review", "--annotator", "ann", "--image-mode", "none"],
    "resolve": ["resolve", "--annotator", "ann", "--image-mode", "none"],
    "fluency-round": ["fluency-round", "--annotator", "ann"],
    "agreement": ["agreement", "--out", "{out}"],
    "report": ["report", "--out", "{out}"],
    "metrics compute": ["metrics", "compute", "--metric", "bleu"],
    "metrics list": ["metrics", "list"],
    "bison import": ["bison", "import", str(SAMPLE_CSV.parent / "bison.jsonl")],
    "bison annotate": ["bison", "annotate", "--annotator", "ann", "--image-mode", "none"],
    "bison evaluate": ["bison", "evaluate", "--scorer", "bleu"],
    "bison report": ["bison", "report"],
    "gold import": ["gold", "import", str(SAMPLE_CSV)],
    "gold rate": ["gold", "rate", "0.1"],
    "gold feedback": ["gold", "feedback", "on"],
    "gold accuracy": ["gold", "accuracy"],
    "gold results": ["gold", "results"],
    "db upgrade": ["db", "upgrade"],
    "db backup": ["db", "backup", "{out}"],
    "retrieval evaluate": ["retrieval", "evaluate", "--name", "m", "--scores", str(SAMPLE_CSV),
                           "--positives", "project"],
    "retrieval relevance": ["retrieval", "relevance", "--out", "{out}"],
    "judgments import": ["judgments", "import", str(SAMPLE_CSV), "--name", "j", "--scale",
                         "1-5"],
    "judgments export": ["judgments", "export", "j", "--out", "{out}.csv"],
    "judgments report": ["judgments", "report", "j", "--out", "{out}"],
    "judgments list": ["judgments", "list"],
    "next": ["next", "--annotator", "ann"],
    "image unflag": ["image", "unflag", "img01"],
    "team setup-sql": ["team", "setup-sql", "--admin", "adm"],
    "team init": ["team", "init"],
    "team add": ["team", "add", "ann", "--cert"],
    "team remove": ["team", "remove", "ann"],
    "team status": ["team", "status"],
    "monitor": ["monitor"],
    "match propose": ["match", "propose", "--model", "m", "--scores", str(SAMPLE_CSV)],
    "match batches": ["match", "batches"],
    "match annotate": ["match", "annotate", "--annotator", "ann", "--image-mode", "none"],
    "match qc": ["match", "qc"],
    "match reassign": ["match", "reassign", "--flagged"],
    "match positives": ["match", "positives"],
    "match bias": ["match", "bias"],
    "match export": ["match", "export", "--format", "csv", "--out", "{out}.csv"],
    "match import-positives": ["match", "import-positives", "eccv"],
    "match status": ["match", "status"],
    "retrieval compare": ["retrieval", "compare", "--out", "{out}"],
    "retrieval agreement": ["retrieval", "agreement", "--judgments", str(SAMPLE_CSV),
                            "--positives", "project", "--out", "{out}"],
}
WITH_OUT = [name for name, args in COMMANDS.items() if "{out}" in args]
# Commands that open no database (`team setup-sql` prints the superuser's SQL): the
# `--db` checks below are of the others
NO_DATABASE = {"team setup-sql"}
OPENING = sorted(set(COMMANDS) - NO_DATABASE)


def all_commands() -> set[str]:
    names = set()

    def walk(group, prefix: tuple[str, ...] = ()) -> None:
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                walk(command, (*prefix, name))
            else:
                names.add(" ".join((*prefix, name)))

    walk(typer.main.get_command(app))
    return names


def test_every_command_is_covered():
    assert set(COMMANDS) == all_commands()


def one_line_error(result) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def args_for(name: str, out: Path) -> list[str]:
    return [part.replace("{out}", str(out)) for part in COMMANDS[name]]


@pytest.mark.parametrize("name", OPENING)
def test_db_in_a_missing_folder(tmp_path, name):
    db = tmp_path / "nowhere" / "x.db"
    line = one_line_error(runner.invoke(app, ["--db", str(db), *args_for(name, tmp_path / "o")]))
    assert f"the folder {db.parent} does not exist" in line
    assert not db.parent.exists()


@pytest.mark.parametrize("name", sorted(NO_DATABASE))
def test_a_command_that_opens_no_database_creates_none(tmp_path, name):
    db = tmp_path / "nowhere" / "x.db"
    result = runner.invoke(app, ["--db", str(db), *args_for(name, tmp_path / "o")])
    assert result.exit_code == 0 and result.output.strip(), result.output
    assert not db.parent.exists()


@pytest.mark.parametrize("name", OPENING)
def test_db_that_is_a_csv_file(tmp_path, name):
    csv = tmp_path / "captions.csv"
    csv.write_bytes(SAMPLE_CSV.read_bytes())
    line = one_line_error(runner.invoke(app, ["--db", str(csv), *args_for(name, tmp_path / "o")]))
    assert "is not a thumb-tui database (not a SQLite file)" in line
    assert csv.read_bytes() == SAMPLE_CSV.read_bytes()


@pytest.mark.parametrize("command", [["status"], ["next", "--annotator", "ann"],
                                     ["report", "--format", "json", "--out", "{out}"],
                                     ["db", "upgrade"]])
def test_an_empty_file_is_not_taken_for_an_empty_project(tmp_path, command):
    """A database truncated to no bytes (a full disk, a failed copy) was built into a new
    empty project and reported as one with 0 images: it is refused, and stays empty."""
    db = tmp_path / "thumb.db"
    db.touch()
    arguments = [part.replace("{out}", str(tmp_path / "report")) for part in command]
    line = one_line_error(runner.invoke(app, ["--db", str(db), *arguments]))
    assert "is an empty file, not a thumb-tui database" in line
    assert db.stat().st_size == 0


@pytest.fixture(scope="module")
def rated_db(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("paths") / "rated.db"
    for source in (SAMPLE_CSV, SAMPLE_RATINGS):
        assert runner.invoke(app, ["--db", str(db), "import", str(source)]).exit_code == 0
    return db


@pytest.mark.parametrize("name", WITH_OUT)
def test_out_into_a_missing_folder(rated_db, tmp_path, name):
    out = tmp_path / "missing" / "deeper" / "file.out"
    (tmp_path / "missing").write_text("a file where a folder should be")
    line = one_line_error(runner.invoke(app, ["--db", str(rated_db), *args_for(name, out)]))
    assert "missing" in line


@pytest.mark.slow
def test_a_hub_model_fails_fast_without_hf_hub_offline(rated_db, tmp_path):
    """Issue #15 item 6: without HF_HUB_OFFLINE, loading a hub model spent minutes in
    retries. Models now load from local files only unless --allow-download."""
    import os
    import subprocess
    import sys
    import time

    pytest.importorskip("transformers")
    env = {key: value for key, value in os.environ.items()
           if key not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env["HF_HOME"] = str(tmp_path / "hf")  # an empty cache
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "thumb_tui", "--db", str(rated_db), "metrics", "compute",
         "--metric", "clip-s", "--clip-model", "openai/clip-vit-base-patch32"],
        env=env, capture_output=True, text=True, timeout=300)
    seconds = time.monotonic() - start
    assert result.returncode == 2, result.stderr[-2000:]
    assert "cannot load the CLIP model" in result.stderr and "--allow-download" in result.stderr
    assert seconds < 60, seconds


# -- secrets in a database URL (issue #45 item 6) -------------------------------------------

SECRETS = {"password": "hunter2", "sslpassword": "k3y-pass", "api_token": "t0ken-value",
           "client_secret": "s3cret-value"}
SECRET_QUERY = "&".join(f"{key}={value}" for key, value in SECRETS.items())


def assert_no_secret(output: str, *secrets: str) -> None:
    for secret in (*SECRETS.values(), *secrets):
        assert secret not in output, output


@pytest.mark.parametrize("name", OPENING)
def test_a_password_in_the_url_query_is_never_printed(tmp_path, name):
    """`?password=` was printed in clear where `user:pw@` was masked: every command's
    error (here the server refuses the connection) shows each secret as ***."""
    url = f"postgresql+psycopg://nobody:pw0rd@127.0.0.1:1/none?{SECRET_QUERY}"
    result = runner.invoke(app, ["--db", url, *args_for(name, tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert_no_secret(result.output, "pw0rd")
    if "cannot open the database" in result.output:
        assert "password=***" in result.output and "client_secret=***" in result.output


@pytest.mark.filterwarnings("ignore:Query string argument")  # pysqlite ignores them
def test_the_status_header_masks_a_password_in_the_url_query(rated_db):
    result = runner.invoke(app, ["--db", f"sqlite:///{rated_db}?{SECRET_QUERY}", "status"])
    assert result.exit_code == 0, result.output
    assert_no_secret(result.output)
    assert "***" in result.output


def test_shown_url_masks_every_secret_and_keeps_the_rest():
    from storage.db.engine import shown_url

    assert shown_url("postgresql+psycopg://u:pw@h:5/db?sslmode=require&password=x&"
                     "sslpassword=y&Auth_Token=z") == (
        "postgresql+psycopg://u:***@h:5/db?sslmode=require&password=***&sslpassword=***&"
        "Auth_Token=***")
    assert shown_url("postgresql://u@h/db?password=a&password=b") == \
        "postgresql://u@h/db?password=***&password=***"
    assert shown_url("sqlite:///file:x.db?mode=rwc&uri=true") == \
        "sqlite:///file:x.db?mode=rwc&uri=true"  # nothing secret: as given
    assert shown_url("no such://u:pw@h/d?token=t&x=1") == "no such://u:***@h/d?token=***&x=1"


@pytest.mark.postgres
def test_team_status_and_status_never_print_the_password_in_the_query():
    """A lead who logs in with `?password=` in --db: neither `thumb status` (its header
    names the database) nor `thumb team status` prints it."""
    import os
    from urllib.parse import quote_plus

    from sqlalchemy.engine import make_url

    from tests.team_helpers import PASSWORD, team_on

    server = os.environ.get("THUMB_TEST_POSTGRES")
    if not server:
        pytest.skip("THUMB_TEST_POSTGRES is not set")
    with team_on(server, {"lead": True}) as team:
        url = make_url(server).set(username=team.names["lead"], password=None)
        url = url.update_query_dict({"password": PASSWORD})
        db = url.render_as_string(hide_password=False)
        assert quote_plus(PASSWORD) in db
        for command in (["status"], ["team", "status"]):
            result = runner.invoke(app, ["--db", db, *command])
            assert result.exit_code == 0, result.output
            assert_no_secret(result.output, PASSWORD, quote_plus(PASSWORD))
        assert "password=***" in "".join(line.strip() for line in runner.invoke(
            app, ["--db", db, "status"]).output.splitlines())
