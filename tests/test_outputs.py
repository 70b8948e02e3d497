"""Outputs never destroy, CSV cells never run as formulas, a failed command changes nothing
on disk (issue #24 items 8 and 9). Every command with --out goes through
thumb_tui/cli/outputs.py: an existing file is replaced only with --force, a symbolic link
never, a missing folder is refused, the name asked for is the name written, and the file
appears whole or not at all."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import stat
from pathlib import Path

import click
import pandas as pd
import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.conftest import SAMPLE_CSV
from thumb_tui.cli import app

runner = CliRunner()
SAMPLE = SAMPLE_CSV.parent
FORMULAS = ['=HYPERLINK("http://evil.example","click")', "=cmd|' /C calc'!A0", "@SUM(1+1)",
            "+1+1", "-2+3", "'=already quoted"]


def thumb(db: Path | str, *args: object):
    return runner.invoke(app, ["--db", str(db), *map(str, args)])


def ok(result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def one_line_error(result) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def leftovers(folder: Path) -> list[str]:
    """Temporary files or folders that an output left behind."""
    return sorted(p.name for p in folder.iterdir() if ".tmp" in p.name)


@pytest.fixture(scope="module")
def rated_db(tmp_path_factory) -> Path:
    """The sample project with its ratings and a judgment set."""
    db = tmp_path_factory.mktemp("outputs") / "rated.db"
    ok(thumb(db, "import", SAMPLE_CSV))
    ok(thumb(db, "import", SAMPLE / "example_ratings.csv"))
    ok(thumb(db, "judgments", "import", SAMPLE / "judgments.csv", "--name", "j", "--scale",
             "1-5"))
    return db


# -- the reproductions of issue #24 item 8 -------------------------------------------------

def test_export_refuses_an_existing_file_and_force_replaces_it(rated_db, tmp_path):
    out = tmp_path / "existing.csv"
    out.write_text("keep me\n")
    out.chmod(0o640)
    line = one_line_error(thumb(rated_db, "export", "--out", out))
    assert "exists; add --force to replace it" in line
    assert out.read_text() == "keep me\n"
    assert "wrote" in ok(thumb(rated_db, "export", "--out", out, "--force"))
    assert out.read_text().startswith("image,image_id,system,caption")
    assert stat.S_IMODE(out.stat().st_mode) == 0o640  # the replaced file's permissions
    assert leftovers(tmp_path) == []


def test_match_export_writes_the_name_asked_for(rated_db, tmp_path):
    """`--format csv --out foo.txt` wrote foo.csv (over an existing foo.csv); now foo.txt
    holds the CSV, foo.csv is untouched, and a suffix of another format is refused."""
    (tmp_path / "foo.csv").write_text("keep me\n")
    out = ok(thumb(rated_db, "match", "export", "--format", "csv", "--out",
                   tmp_path / "foo.txt"))
    assert f"to {tmp_path / 'foo.txt'}" in out
    assert (tmp_path / "foo.txt").read_text().startswith("batch,")
    assert (tmp_path / "foo.csv").read_text() == "keep me\n"
    line = one_line_error(thumb(rated_db, "match", "export", "--format", "csv", "--out",
                                tmp_path / "foo.parquet"))
    assert "is a .parquet name but --format is csv" in line
    assert not (tmp_path / "foo.parquet").exists()
    line = one_line_error(thumb(rated_db, "export", "--format", "jsonl", "--out",
                                tmp_path / "x.csv"))
    assert "is a .csv name but --format is jsonl" in line
    line = one_line_error(thumb(rated_db, "agreement", "--format", "md", "--out",
                                tmp_path / "agreement.tex"))
    assert "is a .tex name but --format is md" in line
    assert not (tmp_path / "agreement.tex").exists()


def test_report_never_writes_through_a_symlink(rated_db, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("victim\n")
    folder = tmp_path / "rep"
    folder.mkdir()
    (folder / "report.md").symlink_to(victim)
    for extra in ([], ["--force"]):
        line = one_line_error(thumb(rated_db, "report", "--out", folder, "--bootstrap", 0,
                                    *extra))
        assert "symbolic link" in line and "even with --force" in line
    assert victim.read_text() == "victim\n"
    assert (folder / "report.md").is_symlink()
    assert leftovers(folder) == [] and leftovers(tmp_path) == []


@pytest.mark.parametrize("fmt, link", [("md", "rep"), ("latex", "rep/tables")])
def test_a_report_folder_that_is_a_symlink_is_refused(rated_db, tmp_path, fmt, link):
    """A link planted as the report folder, or as the LaTeX report's tables/ inside it,
    would send the files to the folder it names: refused, even with --force."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if link != "rep":
        (tmp_path / "rep").mkdir()
    (tmp_path / link).symlink_to(elsewhere)
    for extra in ([], ["--force"]):
        line = one_line_error(thumb(rated_db, "report", "--format", fmt, "--out",
                                    tmp_path / "rep", "--bootstrap", 0, *extra))
        assert f"{tmp_path / link} is a symbolic link" in line and "even with --force" in line
    assert list(elsewhere.iterdir()) == []
    assert leftovers(tmp_path / "rep") == [] and leftovers(tmp_path) == []


def test_report_refuses_a_figure_that_exists_and_replaces_it_with_force(rated_db, tmp_path):
    folder = tmp_path / "rep"
    ok(thumb(rated_db, "report", "--out", folder, "--bootstrap", 0))
    written = sorted(p.name for p in folder.iterdir())
    assert "report.md" in written and "figure2.svg" in written
    (folder / "report.md").unlink()  # the main file is gone, a figure is still there
    line = one_line_error(thumb(rated_db, "report", "--out", folder, "--bootstrap", 0))
    assert "figure2.svg exists; add --force" in line
    assert not (folder / "report.md").exists()  # nothing was written
    ok(thumb(rated_db, "report", "--out", folder, "--bootstrap", 0, "--force"))
    assert sorted(p.name for p in folder.iterdir()) == written


def test_judgments_export_never_follows_a_symlink(rated_db, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("victim\n")
    link = tmp_path / "link.csv"
    link.symlink_to(victim)
    for extra in ([], ["--force"]):
        line = one_line_error(thumb(rated_db, "judgments", "export", "j", "--out", link,
                                    *extra))
        assert "symbolic link" in line
    assert victim.read_text() == "victim\n" and link.is_symlink()


def test_report_into_a_missing_folder_is_refused_and_creates_nothing(rated_db, tmp_path):
    out = tmp_path / "missing" / "dir" / "rep"
    line = one_line_error(thumb(rated_db, "report", "--out", out, "--bootstrap", 0))
    assert f"the folder {out.parent} does not exist" in line
    assert not (tmp_path / "missing").exists()
    ok(thumb(rated_db, "report", "--out", tmp_path / "rep", "--bootstrap", 0))  # one level


def test_a_failed_export_leaves_no_partial_file(rated_db, tmp_path, monkeypatch):
    import storage.exporter

    real = storage.exporter.write_frame

    def half(frame, out, fmt, **options):
        real(frame.head(3), out, fmt, **options)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(storage.exporter, "write_frame", half)
    out = tmp_path / "e.csv"
    line = one_line_error(thumb(rated_db, "export", "--out", out))
    assert "No space left on device" in line
    assert list(tmp_path.iterdir()) == []
    out.write_text("old\n")
    one_line_error(thumb(rated_db, "export", "--out", out, "--force"))
    assert out.read_text() == "old\n" and leftovers(tmp_path) == []


# -- every command with an output option -------------------------------------------------

# The least each command with --out needs to reach its output check; {out} is the output
# (a folder for the report), `inside` the file in it that the check must find.
OUT_COMMANDS = {
    "export": (["export", "--out", "{out}"], None),
    "agreement": (["agreement", "--out", "{out}"], None),
    "report": (["report", "--out", "{out}", "--bootstrap", "0"], "report.md"),
    "judgments report": (["judgments", "report", "j", "--out", "{out}"], None),
    "judgments export": (["judgments", "export", "j", "--out", "{out}.csv"], None),
    "match export": (["match", "export", "--format", "csv", "--out", "{out}.csv"], None),
    "match export eccv-json": (["match", "export", "--positives", "s", "--out", "{out}"],
                               "s_image_to_caption.json"),
    "retrieval evaluate": (["retrieval", "evaluate", "--name", "m", "--scores",
                            str(SAMPLE_CSV), "--positives", "project", "--out", "{out}"],
                           None),
    "retrieval relevance": (["retrieval", "relevance", "--out", "{out}"], None),
    "retrieval compare": (["retrieval", "compare", "--out", "{out}"], None),
    "retrieval agreement": (["retrieval", "agreement", "--judgments", str(SAMPLE_CSV),
                             "--positives", "project", "--out", "{out}"], None),
}
OTHER_OUTPUTS = {  # output options besides --out
    ("export", "--references-out"): ["export", "--format", "thumb-jsonl", "--out", "{new}",
                                     "--references-out", "{out}"],
    ("retrieval compare", "--plot"): ["retrieval", "compare", "--plot", "{out}"],
}
OUTPUT_OPTIONS = {"--out", "--references-out", "--plot"}
# Commands that take their output as an argument (`thumb db backup OUT`).
ARGUMENT_OUTPUTS = {("db backup", "OUT"): ["db", "backup", "{out}"]}


def commands_with_outputs() -> dict[tuple[str, str], click.Command]:
    found = {}

    def walk(group, prefix: tuple[str, ...] = ()) -> None:
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                walk(command, (*prefix, name))
                continue
            for parameter in command.params:
                for option in set(parameter.opts) & OUTPUT_OPTIONS:
                    found[(" ".join((*prefix, name)), option)] = command
                if parameter.param_type_name == "argument" and parameter.name == "out":
                    found[(" ".join((*prefix, name)), "OUT")] = command

    walk(typer.main.get_command(app))
    return found


def test_every_command_with_an_output_is_covered_and_has_force():
    found = commands_with_outputs()
    covered = {(name.removesuffix(" eccv-json"), "--out") for name in OUT_COMMANDS}
    assert set(found) == covered | set(OTHER_OUTPUTS) | set(ARGUMENT_OUTPUTS)
    for (name, _), command in found.items():
        options = {o for parameter in command.params for o in parameter.opts}
        assert "--force" in options, f"{name} has an output but no --force"


def _args(template: list[str], out: Path, new: Path | None = None) -> list[str]:
    return [part.replace("{out}", str(out)).replace("{new}", str(new)) for part in template]


def _output(template: list[str], out: Path) -> Path:
    """The path the command is asked to write: `out`, or `out.csv` where it needs one."""
    return out.with_name(out.name + ".csv") if "{out}.csv" in template else out


def _cases():
    for name, (template, inside) in OUT_COMMANDS.items():
        yield pytest.param(template, inside, id=name)
    for (name, option), template in {**OTHER_OUTPUTS, **ARGUMENT_OUTPUTS}.items():
        yield pytest.param(template, None, id=f"{name} {option}")


@pytest.mark.parametrize(("template", "inside"), list(_cases()))
def test_an_existing_output_needs_force_and_a_symlink_is_always_refused(
        rated_db, tmp_path, template, inside):
    out = tmp_path / ("folder" if inside else "out")
    target = out / inside if inside else _output(template, out)
    target.parent.mkdir(exist_ok=True)
    target.write_text("keep me\n")
    before = sorted(tmp_path.rglob("*"))
    new = tmp_path / "new.jsonl"
    line = one_line_error(runner.invoke(app, ["--db", str(rated_db),
                                              *_args(template, out, new)]))
    assert "exists" in line and "--force" in line, line
    assert target.read_text() == "keep me\n" and sorted(tmp_path.rglob("*")) == before

    victim = tmp_path / "victim.txt"
    victim.write_text("victim\n")
    target.unlink()
    target.symlink_to(victim)
    line = one_line_error(runner.invoke(app, ["--db", str(rated_db),
                                              *_args(template, out, new), "--force"]))
    assert "symbolic link" in line, line
    assert victim.read_text() == "victim\n" and target.is_symlink()
    assert not new.exists() and leftovers(tmp_path) == [] and leftovers(target.parent) == []


@pytest.mark.parametrize(("template", "inside"), list(_cases()))
def test_an_output_through_a_symlinked_folder_is_refused(rated_db, tmp_path, template,
                                                         inside):
    """Issue #45 item 6: `export --out sub/x.csv` wrote into the folder that a link `sub`
    leads to. Every writer refuses it, even with --force, and leaves nothing there."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / "sub").symlink_to(victim)
    out = tmp_path / "sub" / ("folder" if inside else "out")
    for extra in ([], ["--force"]):
        line = one_line_error(runner.invoke(app, ["--db", str(rated_db), *_args(
            template, out, tmp_path / "new.jsonl"), *extra]))
        assert f"the folder {tmp_path / 'sub'} is a symbolic link" in line, line
    assert list(victim.iterdir()) == [] and leftovers(tmp_path) == []


@pytest.mark.parametrize(("template", "inside"), list(_cases()))
def test_an_output_into_a_missing_folder_is_refused(rated_db, tmp_path, template, inside):
    out = tmp_path / "missing" / "deeper" / "out"
    line = one_line_error(runner.invoke(app, ["--db", str(rated_db),
                                              *_args(template, out, tmp_path / "n.jsonl")]))
    assert "missing" in line and "does not exist" in line
    assert not (tmp_path / "missing").exists()


# -- CSV cells and spreadsheets --------------------------------------------------------------

@given(st.text())
def test_the_spreadsheet_escape_is_undone_exactly(text):
    from rubrics.escape import for_spreadsheet as escape
    from rubrics.escape import from_spreadsheet

    escaped = escape(text)
    assert escaped == for_spreadsheet(text)  # the copy these tests use
    assert from_spreadsheet(escaped) == text
    assert escaped == text or escaped == "'" + text
    assert escaped[:1] not in ("=", "+", "-", "@", "\t", "\r")


def test_only_text_cells_are_escaped():
    from storage.exporter import spreadsheet_safe

    frame = pd.DataFrame({"text": ["=1+1", "-x", "plain", None],
                          "number": [-0.1, -2.0, 0.0, float("nan")],
                          "mixed": [-0.5, "@x", 3, None]})
    safe = spreadsheet_safe(frame)
    assert safe["text"].tolist()[:3] == ["'=1+1", "'-x", "plain"]
    assert safe["number"].tolist()[:3] == [-0.1, -2.0, 0.0]
    assert safe["mixed"].tolist()[:3] == [-0.5, "'@x", 3]
    assert frame["text"][0] == "=1+1"  # the frame itself is not changed


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory) -> tuple[Path, Path]:
    """The sample project with formulas as captions, a system name and an annotator name,
    and a judgment set with formulas as captions and judge names (a caption that begins
    with a quote comes from JSON lines, which a CSV import would read as an escape)."""
    folder = tmp_path_factory.mktemp("formulas")
    shutil.copytree(SAMPLE / "images", folder / "images")
    captions = list(csv.reader((SAMPLE_CSV).open(encoding="utf-8")))
    texts = {}
    for index, formula in enumerate(FORMULAS[:-1]):
        texts[captions[1 + 4 * index][3]] = formula
        captions[1 + 4 * index][3] = formula
    system = {"Show-Tell": "=cmd|' /C calc'!A0"}
    for row in captions[1:]:
        row[2] = system.get(row[2], row[2])
    with (folder / "captions.csv").open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(captions)
    ratings = list(csv.reader((SAMPLE / "example_ratings.csv").open(encoding="utf-8")))
    for row in ratings[1:]:
        row[1], row[2] = system.get(row[1], row[1]), texts.get(row[2], row[2])
        row[3] = {"ann-a": "@ann-a"}.get(row[3], row[3])
    with (folder / "ratings.csv").open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(ratings)
    judgments = list(csv.reader((SAMPLE / "judgments.csv").open(encoding="utf-8")))
    for row in judgments[1:]:
        row[2] = {"Three red balls on the grass under a blue sky.": "=1+1"}.get(row[2], row[2])
        row[3] = {"judge-1": "-judge"}.get(row[3], row[3])
    with (folder / "judgments.csv").open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(judgments)
    shutil.copy(folder / captions[1][0], folder / "images" / "quoted.png")
    quoted = {"image": "images/quoted.png", "image_id": "quoted", "system": "Quoted",
              "caption": FORMULAS[-1], "references": ["A reference."]}
    (folder / "quoted.jsonl").write_text(json.dumps(quoted) + "\n", encoding="utf-8")
    db = folder / "hostile.db"
    ok(thumb(db, "import", folder / "captions.csv"))
    ok(thumb(db, "import", folder / "quoted.jsonl"))
    ok(thumb(db, "import", folder / "ratings.csv"))
    ok(thumb(db, "judgments", "import", folder / "judgments.csv", "--name", "j", "--scale",
             "1-5"))
    return db, folder


def for_spreadsheet(text: str) -> str:  # as rubrics.escape has it, for the checks
    return "'" + text if re.match("'*[=+\\-@\t\r]", text) else text


def _cells(path: Path) -> list[str]:
    return [cell for row in csv.reader(path.open(encoding="utf-8")) for cell in row]


def _unsafe(cells: list[str]) -> list[str]:
    return [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r")
            or (c[:1] == "-" and not _number(c))]


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@pytest.mark.slow
def test_thumb_export_neutralises_formulas_and_imports_back(hostile_db, tmp_path):
    db, folder = hostile_db
    out = folder / "export.csv"
    ok(thumb(db, "export", "--out", out))
    cells = _cells(out)
    assert _unsafe(cells) == []
    for formula in FORMULAS:
        assert for_spreadsheet(formula) in cells
    assert "'=cmd|' /C calc'!A0" in cells and "'@ann-a" in cells
    assert "''=already quoted" in cells  # so that the import knows to remove one quote
    raw = folder / "raw.csv"
    ok(thumb(db, "export", "--out", raw, "--raw"))
    assert FORMULAS[0] in _cells(raw) and "@ann-a" in _cells(raw)

    again = tmp_path / "again.db"  # the export imports back as it was
    ok(thumb(again, "import", out))
    second = folder / "second.csv"
    ok(thumb(again, "export", "--out", second))
    columns = ["image", "image_id", "system", "caption", "annotator", "stage", "precision",
               "recall"]
    read = {"dtype": str, "keep_default_na": False}
    assert pd.read_csv(second, **read)[columns].equals(pd.read_csv(out, **read)[columns])
    from storage import open_database
    from storage.retrieval import project_captions

    engine = open_database(again)
    try:
        stored = set(project_captions(engine)["text"])
    finally:
        engine.dispose()
    assert set(FORMULAS) <= stored


def test_judgments_export_neutralises_formulas_and_imports_back(hostile_db, tmp_path):
    db, _ = hostile_db
    out = tmp_path / "j.csv"
    ok(thumb(db, "judgments", "export", "j", "--out", out))
    cells = _cells(out)
    assert _unsafe(cells) == [] and "'=1+1" in cells and "'-judge" in cells
    ok(thumb(db, "judgments", "import", out, "--name", "again", "--scale", "1-5"))
    second = tmp_path / "again.csv"
    ok(thumb(db, "judgments", "export", "again", "--out", second))
    assert second.read_bytes() == out.read_bytes()


def test_agreement_csv_neutralises_names_but_not_numbers(hostile_db, tmp_path):
    db, _ = hostile_db
    out = tmp_path / "agreement.csv"
    ok(thumb(db, "agreement", "--format", "csv", "--bootstrap", 0, "--out", out))
    cells = _cells(out)
    assert _unsafe(cells) == []
    assert any(c.startswith("'@ann-a") for c in cells)
    frame = pd.read_csv(out)
    raw = pd.read_csv(pd.io.common.StringIO(
        ok(thumb(db, "agreement", "--format", "csv", "--bootstrap", 0, "--raw"))))
    numbers = frame.select_dtypes("number").columns
    assert len(numbers) and frame[numbers].equals(raw[numbers])  # -0.1 stays -0.1
    assert any(str(c).startswith("@ann-a") for c in raw.astype(str).to_numpy().ravel())


def test_match_export_neutralises_annotator_names(tmp_path):
    from tests.match_helpers import fixed_session, match_project

    db, engine = match_project(tmp_path)
    try:
        session = fixed_session(engine, "=evil")
        for index in range(len(session.items)):
            session.answer(index, 1)
        session.close()
    finally:
        engine.dispose()
    out = tmp_path / "answers.csv"
    ok(thumb(db, "match", "export", "--format", "csv", "--out", out))
    cells = _cells(out)
    assert "'=evil" in cells and "=evil" not in cells and _unsafe(cells) == []
    raw = tmp_path / "raw.csv"
    ok(thumb(db, "match", "export", "--format", "csv", "--out", raw, "--raw"))
    assert "=evil" in _cells(raw)


# -- a failed command leaves no database behind (issue #24 item 9) -------------------------

NEW_DB_FAILURES = {
    "match import-positives": ["match", "import-positives", "x", "{tmp}/no-such-folder"],
    "retrieval evaluate": ["retrieval", "evaluate", "--name", "m", "--scores",
                           str(SAMPLE_CSV), "--positives", "project"],
    "retrieval agreement": ["retrieval", "agreement", "--judgments", str(SAMPLE_CSV),
                            "--positives", "project"],
}


@pytest.mark.parametrize("name", sorted(NEW_DB_FAILURES))
def test_a_refused_command_leaves_no_new_database(tmp_path, name):
    db = tmp_path / "new.db"
    args = [a.replace("{tmp}", str(tmp_path)) for a in NEW_DB_FAILURES[name]]
    result = thumb(db, *args)
    assert result.exit_code == 2, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_an_import_that_fails_in_the_database_leaves_no_new_database(tmp_path, monkeypatch):
    """A rubric that failed a NOT NULL constraint left a migrated database behind: the
    clean-up ran only on InputError."""
    import storage.imports.importer
    from storage.models import RubricRecord

    def not_null(connection, rubric, *, choose=False):
        connection.execute(RubricRecord.__table__.insert().values(signature="x"))

    monkeypatch.setattr(storage.imports.importer, "register_rubric", not_null)
    db = tmp_path / "new.db"
    line = one_line_error(thumb(db, "import", SAMPLE_CSV, "--rubric", "thumb-1.0"))
    assert "NOT NULL" in line
    assert list(tmp_path.iterdir()) == []


def test_a_failed_command_keeps_a_database_it_did_not_create(rated_db, tmp_path):
    before = rated_db.read_bytes()
    result = thumb(rated_db, "match", "import-positives", "x", tmp_path / "none")
    assert result.exit_code == 2 and rated_db.read_bytes() == before


def test_a_sqlite_url_is_checked_like_a_path(tmp_path):
    url = f"sqlite:///{tmp_path / 'new.db'}"
    line = one_line_error(runner.invoke(app, ["--db", url, "status"]))
    assert "no database at" in line
    assert list(tmp_path.iterdir()) == []
    url = f"sqlite:///{tmp_path / 'nowhere' / 'x.db'}"
    line = one_line_error(runner.invoke(app, ["--db", url, "import", str(SAMPLE_CSV)]))
    assert f"the folder {tmp_path / 'nowhere'} does not exist" in line
    csv_file = tmp_path / "captions.csv"
    csv_file.write_bytes(SAMPLE_CSV.read_bytes())
    line = one_line_error(runner.invoke(app, ["--db", f"sqlite:///{csv_file}", "status"]))
    assert "not a SQLite file" in line
    assert ok(runner.invoke(app, ["--db", f"sqlite:///{tmp_path / 'made.db'}", "import",
                                  str(SAMPLE_CSV)]))
    assert (tmp_path / "made.db").is_file()


def test_sqlite_path_reads_urls():
    """The file each form opens, as SQLAlchemy and SQLite read it (a `file:` URI was
    None, so nothing checked it: issue #45 item 6)."""
    from storage.db.engine import sqlite_path

    assert sqlite_path("/a/b.db") == Path("/a/b.db")
    assert sqlite_path("sqlite:////a/b.db") == Path("/a/b.db")
    assert sqlite_path("sqlite+pysqlite:///rel.db") == Path("rel.db")
    assert sqlite_path("sqlite:///file:x.db?mode=ro&uri=true") == Path("x.db")
    assert sqlite_path("sqlite:///file:///a/b%20c.db?mode=rwc&uri=true") == Path("/a/b c.db")
    assert sqlite_path("sqlite:///new.db?mode=rwc&uri=true") == Path("new.db?mode=rwc")
    assert sqlite_path("sqlite:///new.db?uri=true&timeout=5") == Path("new.db")
    assert sqlite_path("sqlite:///file:x.db") == Path("file:x.db")  # no uri=true: a name
    assert sqlite_path("sqlite:///x.db?mode=memory") == Path("x.db")  # ignored without it
    for other in ("sqlite://", "sqlite:///:memory:", "postgresql://u@h/db",
                  "sqlite:///file::memory:?uri=true", "sqlite:///file:x?mode=memory&uri=true",
                  "sqlite:///file:x.db?vfs=memdb&uri=true"):
        assert sqlite_path(other) is None


@pytest.mark.parametrize("url", [
    "sqlite:///file:{folder}/new.db?mode=rwc&uri=true",
    "sqlite:///file:new.db?mode=rwc&uri=true",
    "sqlite:///file://localhost{folder}/new.db?uri=true",
    "sqlite:///{folder}/new.db?mode=rwc&uri=true",
    "sqlite:///{folder}/new.db",
])
def test_a_read_command_creates_no_database_from_a_sqlite_uri(tmp_path, monkeypatch, url):
    """Issue #45 item 6: `--db 'sqlite:///file:new.db?mode=rwc&uri=true' status` created
    and migrated a database. Every form is refused as a missing plain path is; an import
    through the same URL makes the file SQLite opens."""
    monkeypatch.chdir(tmp_path)
    url = url.format(folder=tmp_path)
    line = one_line_error(runner.invoke(app, ["--db", url, "status"]))
    assert "no database at" in line
    assert list(tmp_path.iterdir()) == []
    ok(runner.invoke(app, ["--db", url, "import", str(SAMPLE_CSV)]))
    ok(runner.invoke(app, ["--db", url, "status"]))
    from storage.db.engine import sqlite_path

    assert (tmp_path / sqlite_path(url)).is_file()


def test_temporary_files_keep_the_umask(rated_db, tmp_path):
    old = os.umask(0o027)
    try:
        ok(thumb(rated_db, "export", "--out", tmp_path / "e.csv"))
        ok(thumb(rated_db, "report", "--out", tmp_path / "rep", "--bootstrap", 0))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "e.csv").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "rep").stat().st_mode) == 0o750
