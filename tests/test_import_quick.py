"""The quick check of a large CSV import (storage/imports/import_scan.py): it refuses a file for its
rows' values before the full pass, with the full pass's lines and messages; it never
reports what the full pass would not; and where it cannot read a file as the full pass
does, it finds nothing and the full pass reports."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from rubrics import load_rubric
from storage import InputError, import_captions, open_database
from storage.imports import import_scan, importer
from tests.conftest import database_dump
from tests.image_files import good_png
from thumb_tui.cli import app

COLUMNS = ["image", "system", "caption", "reference_1", "reference_2", "annotator", "stage",
           "precision", "recall", "fluency", "fluency_type", "conciseness", "note", "seconds",
           "created_at", "native_english", "double_rating", "resolution_reasons",
           "resolution_note", "resolved_at", "rubric", "total"]
SYSTEMS = ("Human", "Up-Down", "VinVL", "Show-Tell", "OSCAR")
IMAGES = 8
THUMB = load_rubric("thumb-1.0")

# (column, value): cells that make a row's values wrong, each alone in its row
BAD_CELLS = [
    ("stage", "7"), ("stage", ""), ("stage", "first"), ("precision", "6"),
    ("precision", "2.5"), ("precision", "x"), ("precision", ""), ("recall", "0"),
    ("recall", "nan"), ("recall", "inf"), ("fluency", "1e999"), ("fluency_type", "no-such"),
    ("conciseness", "abc"), ("seconds", "-3"), ("seconds", "abc"),
    ("created_at", "yesterday"), ("created_at", "2026-13-01"), ("native_english", "maybe"),
    ("double_rating", "2"), ("resolution_reasons", "bogus"),
    ("resolution_reasons", "other"), ("resolution_note", "why"),
    ("resolved_at", "2026-01-01"), ("rubric", "another-rubric"), ("annotator", ""),
    ("caption", ""), ("caption", "   "), ("system", ""), ("image", ""), ("reference_1", ""),
]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "img").mkdir()
    for index in range(IMAGES):
        good_png(tmp_path / "img" / f"{index}.png")
    return tmp_path


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every CSV file gets the quick check, however small."""
    monkeypatch.setattr(import_scan, "QUICK_BYTES", 0)


def good_rows() -> list[dict[str, str]]:
    """One stage-1 rating of every caption of IMAGES images by SYSTEMS: no problem."""
    rows = []
    for image in range(IMAGES):
        for number, system in enumerate(SYSTEMS):
            rows.append({
                "image": f"img/{image}.png", "system": system,
                "caption": f"Caption {number} of image {image}.",
                "reference_1": f"A reference of {image}.", "reference_2": "Another one.",
                "annotator": "ann", "stage": "1", "precision": str(1 + number % 5),
                "recall": str(1 + image % 5), "fluency": "0", "fluency_type": "",
                "conciseness": "0", "note": "", "seconds": f"{3 + number}.5",
                "created_at": f"2026-01-0{1 + number}T10:00:00+00:00",
                "native_english": "yes", "double_rating": "", "resolution_reasons": "",
                "resolution_note": "", "resolved_at": "", "rubric": "thumb-1.0",
                "total": "4.0"})
    return rows


def write(path: Path, rows: list[dict[str, str]], *, newline: str = "\n",
          header: list[str] | None = None, encoding: str = "utf-8") -> Path:
    out = io.StringIO()
    writer = csv.DictWriter(out, header or COLUMNS, lineterminator=newline)
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(out.getvalue(), encoding=encoding, newline="")
    return path


def full_pass_problems(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str]]:
    """The problems the import gives without the quick check (a fresh database)."""
    monkeypatch.setattr(import_scan, "QUICK_BYTES", 2**62)
    database = path.with_name(f"full-{path.stem}.db")
    database.unlink(missing_ok=True)
    try:
        import_captions(open_database(database), path, actor="t")
    except InputError as exc:
        return [(problem.line, problem.message) for problem in exc.problems]
    finally:
        monkeypatch.setattr(import_scan, "QUICK_BYTES", 0)
    return []


def quick_problems(path: Path, *, own_process: bool = False) -> list[tuple[int, str]]:
    """The quick check's problems, found in this process (or, with `own_process`, in the
    process of its own that an import starts)."""
    if own_process:
        found = import_scan.quick_problems(path, THUMB)
    else:
        found = import_scan.scan_problems(path, THUMB) or []
    return [(problem.line, problem.message) for problem in found]


def test_a_bad_value_is_refused_with_the_full_pass_line_and_message(folder, quick, monkeypatch):
    rows = good_rows()
    corrupted = {}
    for index, (column, value) in enumerate(BAD_CELLS):
        row = rows[index]
        row[column] = value
        if column == "resolution_reasons" and value == "other":
            row["stage"] = "1"  # a known reason on a stage-1 rating: not allowed there
        corrupted[index + 2] = column  # (the header is line 1)
    rows[35].update(stage="9", precision="0")  # two problems in one row
    corrupted[37] = "stage"
    path = write(folder / "captions.csv", rows)

    found = quick_problems(path)
    expected = [problem for problem in full_pass_problems(path, monkeypatch)
                if problem[0] in corrupted]
    assert found == expected
    assert {line for line, _ in found} == set(corrupted)  # every one of them is wrong
    assert (37, "stage must be 1, 2 or final, not '9'; precision must be a whole number "
                "from 1 to 5, not '0'") in found

    engine = open_database(folder / "project.db")
    before = database_dump(engine)
    heard = []
    with pytest.raises(InputError) as refused:  # (the check in a process of its own)
        import_captions(engine, path, actor="t",
                        progress=lambda *report: heard.append(report))
    assert [(p.line, p.message) for p in refused.value.problems] == found
    assert heard[-1] == (importer.QUICK_CHECK, path.stat().st_size, path.stat().st_size)
    assert {phase for phase, _, _ in heard} == {importer.QUICK_CHECK}  # nothing further
    assert str(refused.value).endswith(import_scan.NOTE)
    assert database_dump(engine) == before


def test_a_good_file_imports_as_it_does_without_the_quick_check(folder, quick, monkeypatch):
    path = write(folder / "captions.csv", good_rows())
    with_check = open_database(folder / "with.db")
    import_captions(with_check, path, actor="t")
    monkeypatch.setattr(import_scan, "QUICK_BYTES", 2**62)
    without = open_database(folder / "without.db")
    import_captions(without, path, actor="t")

    def rows(engine) -> dict[str, list[tuple]]:  # (times of the import aside)
        """The images, captions and ratings, each caption by its place in the file and
        each rating by its caption's: caption ids are drawn at random at import."""
        dump = database_dump(engine)
        with engine.connect() as connection:
            captions = connection.exec_driver_sql(
                "SELECT * FROM caption ORDER BY import_order").mappings().all()
            ratings = connection.exec_driver_sql(
                "SELECT r.*, c.import_order AS caption_place FROM rating r JOIN caption c "
                "ON c.id = r.caption_id ORDER BY c.import_order, r.stage").mappings().all()
        return {"image": dump["image"],
                "caption": [{k: v for k, v in row.items() if k != "id"} for row in captions],
                "rating": [{k: v for k, v in row.items() if k not in ("id", "caption_id")}
                           for row in ratings]}

    assert rows(with_check) == rows(without)
    assert len(rows(with_check)["rating"]) == IMAGES * len(SYSTEMS)


def test_lines_are_counted_as_the_full_pass_counts_them(folder, quick, monkeypatch):
    """Quoted captions over several lines (LF, CR LF, CR), CR LF row ends, a byte order
    mark, an empty line and a row of empty cells (both skipped by the full pass) before
    the bad rows; empty lines at the end."""
    rows = good_rows()
    rows[2]["caption"] = "A caption\nover two lines."
    rows[4]["note"] = "A note\r\nover two\rlines and three."  # (ends on line 9)
    rows[6]["stage"] = "7"
    rows[30]["precision"] = "9"
    path = write(folder / "captions.csv", rows[:20], newline="\r\n", encoding="utf-8-sig")
    with path.open("a", encoding="utf-8", newline="") as handle:
        handle.write("\r\n" + "," * (len(COLUMNS) - 1) + "\r\n")
        csv.DictWriter(handle, COLUMNS, lineterminator="\r\n").writerows(rows[20:])
        handle.write("\r\n\r\n")

    found = quick_problems(path)
    assert [line for line, _ in found] == [11, 37]
    # (a lone CR is a forbidden character: the full pass finds it, in a row whose values
    # pass, which the quick check leaves to it)
    assert full_pass_problems(path, monkeypatch) == [
        (7, "note: control character U+000D is not allowed (only tab and newline are)"),
        *found]


def test_it_reports_nothing_the_full_pass_does_not(folder, quick, monkeypatch):
    """Forbidden characters and spreadsheet escapes, aliased columns (`p`, `r`, `sys`,
    `hyp`), a cell of white space: what the quick check reports, the full pass reports at
    the same line with the same message."""
    rows = good_rows()
    header = ["image", "sys", "hyp", "reference_1", "annotator", "stage", "p", "r", "fluency"]
    named = [{"image": row["image"], "sys": row["system"], "hyp": row["caption"],
              "reference_1": row["reference_1"], "annotator": "ann", "stage": "1",
              "p": row["precision"], "r": row["recall"], "fluency": "0"} for row in rows]
    named[1].update(hyp="A caption with \x1b[31m colour.", p="8",  # text and value problems
                    reference_1="\x1b[0m")
    named[2].update(hyp="'=1+1")  # an export's escape: a caption like any other
    named[3].update(p="'=1+1")  # not a number, as the full pass reads it
    named[4].update(stage="\u00a0")  # white space only: missing
    named[5].update(r="\u2003 2 ")
    path = write(folder / "captions.csv", named, header=header)
    found = quick_problems(path)
    full = full_pass_problems(path, monkeypatch)
    assert [line for line, _ in found] == [3, 3, 5, 6]  # (line 3: two texts' problems)
    assert set(found) <= set(full)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(st.tuples(
    st.integers(0, IMAGES * len(SYSTEMS) - 1), st.sampled_from(COLUMNS),
    st.sampled_from(["", " ", "1", "2", "5", "final", "0.1", "-1", "1e3", "x", "yes",
                     "2026-02-30", "2026-01-01T00:00:00", "'=2", "a\nb", "\x1b", "\u00a0",
                     "content-errors", "thumb-1.0", "img/0.png", "img/none.png"])),
    max_size=6))
def test_whatever_a_file_holds_the_full_pass_reports_each_problem_it_reports(
        folder, quick, monkeypatch, changes):
    rows = good_rows()
    for index, column, value in changes:
        rows[index][column] = value
    path = write(folder / "captions.csv", rows)
    full = full_pass_problems(path, monkeypatch)
    for line, message in quick_problems(path):
        # the same, but for the problem of the row's image file, which comes first there
        assert any(at == line and (said == message or said.endswith(f"; {message}"))
                   for at, said in full)


@pytest.mark.parametrize("damage", ["bad utf-8", "short row", "unknown column",
                                    "header over two lines", "white space line",
                                    "too many signatures"])
def test_a_file_it_cannot_read_as_the_full_pass_is_left_to_the_full_pass(
        folder, monkeypatch, damage):
    rows = good_rows()
    rows[10]["stage"] = "7"
    header = COLUMNS
    if damage == "unknown column":
        header = [*COLUMNS, "colour"]
        for row in rows:
            row["colour"] = "red"
    if damage == "header over two lines":
        header = [*COLUMNS[:-1], "to\ntal"]
        for row in rows:
            row["to\ntal"] = row.pop("total")
    path = write(folder / "captions.csv", rows, header=header)
    text = path.read_bytes()
    if damage == "bad utf-8":
        path.write_bytes(text.replace(b"Caption 3 of image 5", b"Caption \xff of image 5"))
    if damage == "short row":
        path.write_bytes(text + b"img/0.png,Human\n")
    if damage == "white space line":
        path.write_bytes(text.replace(b"\n", b"\n  \n", 3))
    limit = 2 if damage == "too many signatures" else import_scan.MAX_SIGNATURES
    assert import_scan.scan_problems(path, THUMB, max_signatures=limit) is None
    assert full_pass_problems(path, monkeypatch)  # (which names the stage or the file)


@pytest.mark.slow
def test_what_the_quick_check_cannot_read_the_import_refuses_all_the_same(
        folder, quick, monkeypatch):
    """The quick check's process says it cannot read the file (too many signatures
    here); the import goes on to the full pass, which lists every problem."""
    monkeypatch.setattr(import_scan, "MAX_SIGNATURES", 2)
    rows = good_rows()
    rows[10]["stage"] = "7"
    rows[20]["caption"] = rows[21]["caption"] = "The same caption."  # not a values' problem
    rows[21]["system"] = rows[20]["system"]
    path = write(folder / "captions.csv", rows)
    assert quick_problems(path, own_process=True) == []
    with pytest.raises(InputError) as refused:
        import_captions(open_database(folder / "project.db"), path, actor="t")
    assert [problem.line for problem in refused.value.problems] == [12, 23]
    assert import_scan.NOTE not in str(refused.value)


def test_a_small_file_gets_no_quick_check(folder):
    rows = good_rows()
    rows[0]["stage"] = "7"
    path = write(folder / "captions.csv", rows)
    assert path.stat().st_size < import_scan.QUICK_BYTES
    assert quick_problems(path, own_process=True) == []


def test_the_command_says_what_the_quick_check_left_for_later(folder, quick):
    rows = good_rows()
    rows[-1]["precision"] = "6"
    path = write(folder / "captions.csv", rows)
    result = CliRunner().invoke(app, ["--db", str(folder / "x.db"), "import", str(path)])
    assert result.exit_code == 2
    assert f"captions.csv:{len(rows) + 1}: precision must be a whole number" in result.output
    assert "images, repeated rows, the database and THUMB's protocol are checked" in (
        result.output.replace("\n", " "))
    assert not (folder / "x.db").exists()


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet='ab,"\r\n ', max_size=24))
def test_its_quoting_test_agrees_with_python_s_csv(tmp_path, monkeypatch, text):
    """`_strict_csv` against the full pass's reader (`csv`, strict), chunk boundaries
    anywhere (3-byte chunks): the quick check reads a file only where `csv` would."""
    monkeypatch.setattr(import_scan, "_CHUNK_BYTES", 3)
    path = tmp_path / "quoting.csv"
    path.write_bytes(("\ufeff" + text).encode())
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            for _ in csv.reader(handle, strict=True):
                pass
        strict = True
    except csv.Error:
        strict = False
    assert import_scan._strict_csv(path) == strict


@pytest.mark.parametrize("cell", ['"1"x', '"7" ', '"7', "x" * 140_000])
def test_what_python_s_csv_refuses_is_left_to_the_full_pass(folder, monkeypatch, cell):
    """Characters after a closing quote, a space included, a quote left open, a cell over
    `csv`'s limit: pyarrow would read on (`"1"x` as `1x`) and the quick check would list
    other lines; the full pass stops at this row, `malformed CSV`."""
    rows = good_rows()
    rows[30]["stage"] = "9"  # (after the damage: the full pass never reads it)
    path = write(folder / "captions.csv", rows)
    lines = path.read_text(encoding="utf-8").split("\n")
    quoted = cell if cell.startswith('"') else f'"{cell}"'
    lines[5] = lines[5].replace(",1,", f",{quoted},", 1)  # the stage column
    path.write_text("\n".join(lines), encoding="utf-8")
    assert import_scan.scan_problems(path, THUMB) is None
    full = full_pass_problems(path, monkeypatch)
    assert full[-1][0] == 6 and full[-1][1].startswith("malformed CSV")


def test_times_and_seconds_are_read_as_the_full_pass_reads_them(folder, monkeypatch):
    """A spreadsheet escape (`'-5`, `'+5`) undone before the value is checked: `'-5`
    seconds is negative, `'+5` is not."""
    rows = good_rows()
    rows[0]["seconds"], rows[1]["seconds"] = "'+5", "'-5"
    rows[2]["created_at"] = "'-2026"
    path = write(folder / "captions.csv", rows)
    found = quick_problems(path)
    assert [line for line, _ in found] == [3, 4]
    assert found == [p for p in full_pass_problems(path, monkeypatch) if p[0] in (3, 4)]


def test_rows_wrong_alike_get_each_its_own_message(folder, monkeypatch):
    """A message is made once for rows wrong in the same way, but each bad time it quotes
    is the row's own: every message equals the full pass's."""
    rows = good_rows()
    for index, row in enumerate(rows[:24]):
        # the same problem, the same values; times valid, all different
        row.update(stage="7", precision="3", recall="3", seconds="4.5",
                   created_at=f"2026-01-01T10:{index:02d}:00")
        if index % 3 == 0:  # and a bad time of its own
            row["created_at"] = f"not a time {index}"
        if index % 4 == 0:
            row["seconds"] = f"-{index + 1}"
    path = write(folder / "captions.csv", rows)
    found = quick_problems(path)
    assert len(found) == 24
    assert "not a time 21" in found[21][1] and "not '-9'" in found[8][1]
    assert found == [p for p in full_pass_problems(path, monkeypatch) if p[0] <= 25]
