"""What a new-user trial of `thumb judgments` found: an export that imports again whole,
terminal tables within 80 columns, headings without CIs under --bootstrap 0, import
messages that say what is wrong, a references file's problems, a bad UTF-8 byte that does
not hide the other problems, and `thumb metrics list` pointing to a judgment set's scores."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from storage import InputError, open_database
from storage.errors import Problems
from storage.imports.import_files import read_records
from storage.imports.judgment_import import Scale, import_judgments
from storage.models import JudgmentImage
from tests.conftest import ROOT
from tests.image_files import good_png
from thumb_tui.cli import app

SAMPLE = ROOT / "sample_data"
SCORES = """image_id,caption_id,caption,judge,score
1,c1,A dog runs on the grass.,j1,4
1,c1,A dog runs on the grass.,j2,3.5
1,c2,A cat sleeps.,j1,1
1,c2,A cat sleeps.,j2,2
2,c3,Two people ride bikes.,j1,3
2,c3,Two people ride bikes.,j2,2.5
2,r9,Two riders on bicycles.,j1,4
2,r9,Two riders on bicycles.,j2,4
"""
REFERENCES = """image_id,reference,reference_id
1,A brown dog running across a lawn.,r1
1,A dog on green grass.,r2
2,Two riders on bicycles.,r9
2,People cycling down a street.,
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def thumb(db: Path, *args: str) -> str:
    result = CliRunner().invoke(app, ["--db", str(db), *args])
    assert result.exit_code == 0, result.output
    return result.output


def report_json(db: Path, name: str) -> dict:
    return json.loads(thumb(db, "judgments", "report", name, "--bootstrap", "0",
                            "--format", "json"))


def test_an_exported_set_imports_again_whole_and_scores_the_same(tmp_path):
    first, second = tmp_path / "a.db", tmp_path / "b.db"
    thumb(first, "judgments", "import", str(write(tmp_path / "s.csv", SCORES)), "--name",
          "s", "--scale", "1-4", "--halves", "--references",
          str(write(tmp_path / "r.csv", REFERENCES)))
    thumb(first, "metrics", "compute", "--judgments", "s", "--metric", "bleu")
    out = tmp_path / "export.jsonl"
    exported = thumb(first, "judgments", "export", "s", "--out", str(out))
    assert f"wrote 4 references to {tmp_path / 'export.references.jsonl'}" in exported
    command = re.search(r"import it again with: (.*)", exported).group(1)
    words = shlex.split(command)
    assert words[:3] == ["thumb", "judgments", "import"]
    assert words[words.index("--scale") + 1] == "1-4" and "--halves" in words
    thumb(second, *words[1:])
    thumb(second, "metrics", "compute", "--judgments", "s", "--metric", "bleu")
    before, after = report_json(first, "s"), report_json(second, "s")
    assert after["records"] == before["records"] and len(before["records"]) == 4
    assert after["header"]["scale"] == before["header"]["scale"] == "1-4 (halves)"
    # the reference with the id of caption r9 is still left out of r9's own references
    assert after["signatures"] == before["signatures"]
    assert "self:excluded" in next(iter(after["signatures"].values()))
    assert ([line.split("\t")[-1] for line in thumb(second, "metrics", "list",
                                                     "--judgments", "s").splitlines()]
            == [line.split("\t")[-1] for line in thumb(first, "metrics", "list",
                                                        "--judgments", "s").splitlines()])


def image_path(db: Path) -> str:
    engine = open_database(db)
    with engine.connect() as connection:
        path = connection.execute(select(JudgmentImage.__table__.c.path)).scalar_one()
    engine.dispose()
    return path


def test_an_export_keeps_the_image_files(tmp_path):
    (tmp_path / "img").mkdir()
    good_png(tmp_path / "img" / "a.png")
    db, out = tmp_path / "a.db", tmp_path / "out" / "e.csv"
    thumb(db, "judgments", "import", str(write(tmp_path / "s.csv", (
        "image_id,image,caption,judge,score\n1,img/a.png,a dog,j1,3\n"))), "--name", "s",
        "--scale", "1-4")
    out.parent.mkdir()
    exported = thumb(db, "judgments", "export", "s", "--out", str(out))
    assert "../img/a.png" in out.read_text()  # relative to the export, as import reads it
    words = shlex.split(re.search(r"import it again with: (.*)", exported).group(1))
    assert words[-1] == "--allow-outside-images"
    thumb(tmp_path / "b.db", *words[1:])
    assert image_path(db) == image_path(tmp_path / "b.db") == str(
        (tmp_path / "img" / "a.png").resolve())


def test_an_export_refuses_to_replace_a_references_file(tmp_path):
    db = tmp_path / "a.db"
    thumb(db, "judgments", "import", str(write(tmp_path / "s.csv", SCORES)), "--name", "s",
          "--scale", "1-4", "--halves", "--references",
          str(write(tmp_path / "r.csv", REFERENCES)))
    kept = write(tmp_path / "out.references.csv", "someone's file\n")
    refused = CliRunner().invoke(app, ["--db", str(db), "judgments", "export", "s",
                                       "--out", str(tmp_path / "out.csv")])
    assert refused.exit_code == 2 and "exists; add --force" in refused.output
    assert kept.read_text() == "someone's file\n"
    assert not (tmp_path / "out.csv").exists()


def test_pairwise_sets_export_the_kind_to_import_again(tmp_path):
    db = tmp_path / "a.db"
    thumb(db, "judgments", "import", str(SAMPLE / "judgment_pairs.csv"), "--name", "p",
          "--kind", "pairwise")
    exported = thumb(db, "judgments", "export", "p", "--out", str(tmp_path / "p.csv"))
    assert "import it again with: thumb judgments import" in exported
    assert exported.rstrip().endswith("--name p --kind pairwise")  # no references: none
    assert not (tmp_path / "p.references.csv").exists()


@pytest.mark.slow
def test_the_terminal_report_fits_80_columns_with_long_metric_labels(tmp_path):
    db = tmp_path / "j.db"
    thumb(db, "judgments", "import", str(SAMPLE / "judgments.csv"), "--name", "s",
          "--scale", "1-4", "--references", str(SAMPLE / "references.csv"))
    metrics = ["--metric", "bleu", "--metric", "cider-d"]
    thumb(db, "metrics", "compute", "--judgments", "s", *metrics)
    thumb(db, "metrics", "compute", "--judgments", "s", *metrics, "--clean", "thumb",
          "--cider-corpus", "per-system", "--keep-self-references")
    text = thumb(db, "judgments", "report", "s", "--bootstrap", "100")
    tables = text.split("\nsignatures:")[0].splitlines()
    assert "differences between metrics" in text
    assert max(map(len, tables)) <= 80
    # every CI is whole on its line
    assert all(re.fullmatch(r"\[-?\d\.\d\d, -?\d\.\d\d\]", ci)
               for line in tables for ci in re.findall(r"\[[^]]*\]?", line))


def test_headings_say_no_cis_under_bootstrap_0(tmp_path):
    db = tmp_path / "j.db"
    thumb(db, "judgments", "import", str(SAMPLE / "judgments.csv"), "--name", "s",
          "--scale", "1-4", "--references", str(SAMPLE / "references.csv"))
    thumb(db, "metrics", "compute", "--judgments", "s", "--metric", "bleu", "--clean",
          "thumb")
    thumb(db, "metrics", "compute", "--judgments", "s", "--metric", "bleu")
    for fmt in ("table", "md", "latex"):
        text = thumb(db, "judgments", "report", "s", "--bootstrap", "0", "--format", fmt)
        words = " ".join(text.split())  # a terminal heading is wrapped at 80 columns
        assert "BCa" not in words and "CIs over images" not in words, fmt
        # the correlations, the differences between metrics, the judges' agreement
        assert words.count("no CIs") == 3, fmt  # (LaTeX writes -- as -{}-)
    with_cis = thumb(db, "judgments", "report", "s", "--bootstrap", "100",
                     "--format", "md")
    assert "paired bootstrap 90% BCa CIs" in with_cis and "no CIs" not in with_cis


def refused(engine, path: Path, **options) -> list[str]:
    with pytest.raises(InputError) as caught:
        import_judgments(engine, path, name="x", actor="t", **options)
    return str(caught.value).splitlines()


def test_import_messages_say_what_is_wrong(engine, tmp_path):
    header_only = write(tmp_path / "h.csv", "image_id,caption,judge,score\n")
    assert refused(engine, header_only, kind="score", scale=Scale.parse("1-5")) == [
        f"{header_only}:1: no rows under the header: expected one judgment per row with "
        "the columns image_id, caption, judge, score (optional: image, caption_id, system, "
        "note)"]
    quote = write(tmp_path / "q.csv", 'image_id,caption,judge,score\nimg1,"open,j1,3\n')
    assert refused(engine, quote, kind="score", scale=Scale.parse("1-5")) == [
        f"{quote}:2: malformed CSV: unexpected end of data"]
    pairs = write(tmp_path / "p.csv", "image_id,caption_a,caption_b,judge,choice,category\n"
                                      "1,a dog,a cat,j1,a,hm\n1,a dog,a cat,j2,b,\n"
                                      "2,a car,a bus,j1,a,\n2,a car,a bus,j2,a,mm\n")
    assert refused(engine, pairs, kind="pairwise") == [
        f"{pairs}:3: category (none given) differs from 'hm' at line 2 for the same pair",
        f"{pairs}:5: category 'mm' differs from (none given) at line 4 for the same pair"]


def test_images_of_a_references_file_that_no_judgment_names_are_said(engine, tmp_path):
    """A references file may cover a whole data set (a COCO one always does); a typo'd
    image_id would otherwise be left out without a word: the import names it."""
    scores = write(tmp_path / "s.csv", "image_id,caption,judge,score\nimg1,a dog,j1,3\n")
    references = write(tmp_path / "r.csv", "image_id,reference\nimg1,a dog runs\n"
                                           "imgl,typo image id\nimg1,a dog running\n")
    summary = import_judgments(engine, scores, name="x", kind="score", actor="t",
                               scale=Scale.parse("1-5"), references=references)
    assert summary.references == 2
    assert str(summary).splitlines()[1:] == [
        f"note: {references}: 1 image that no judgment names ('imgl' at line 3): its "
        "references are left out (a typo in image_id?)"]


def test_a_repeated_reference_without_an_id_is_kept_and_said(engine, tmp_path):
    """Two annotators may write one sentence (COCO has such): kept, but not silently."""
    scores = write(tmp_path / "s.csv", "image_id,caption,judge,score\nimg1,a dog,j1,3\n")
    references = write(tmp_path / "r.csv", "image_id,reference,reference_id\n"
                                           "img1,a dog runs,\nimg1,a dog,\nimg1,a dog runs,\n"
                                           "img1,a dog,r7\n")
    summary = import_judgments(engine, scores, name="x", kind="score", actor="t",
                               scale=Scale.parse("1-5"), references=references)
    assert summary.references == 4
    assert str(summary).splitlines()[1] == (
        f"note: {references}: 1 reference without a reference_id repeats another of the "
        "same image (line 4 = line 2): kept as another annotator's (give reference_id to "
        "say so, or remove a row given twice: it counts twice in BLEU and CIDEr-D)")


def test_a_coco_captions_file_may_cover_more_images_than_the_set(engine, tmp_path):
    scores = write(tmp_path / "s.csv", "image_id,caption,judge,score\n1,a dog,j1,3\n")
    coco = write(tmp_path / "c.json", json.dumps({"annotations": [
        {"id": 10, "image_id": 1, "caption": "A dog."},
        {"id": 11, "image_id": 2, "caption": "Another image of the data set."}]}))
    summary = import_judgments(engine, scores, name="x", kind="score", actor="t",
                               scale=Scale.parse("1-5"), references=coco)
    assert summary.references == 1


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_bad_utf8_byte_does_not_end_the_pass(tmp_path, suffix):
    rows = [b'{"caption": "ok"}', b'{"caption": "bad \xff byte"}', b'{"caption": 7',
            b'{"caption": "also \xe9 bad"}', b'{"caption": "fine"}']
    if suffix == ".csv":
        rows = [b"caption", b"ok", b"bad \xff byte", b'"unclosed', b"x"]
    path = tmp_path / f"u{suffix}"
    path.write_bytes(b"\n".join(rows) + b"\n")
    problems = Problems(path)
    records = read_records(path, problems=problems)
    lines = [str(problem) for problem in problems.items]
    if suffix == ".csv":  # the quote opened at line 4 runs to the end of the file
        assert lines == [f"{path}:3: invalid UTF-8 (byte 0xff at column 5)",
                         f"{path}:4: malformed CSV: unexpected end of data"]
    else:
        assert lines[0] == f"{path}:2: invalid UTF-8 (byte 0xff at column 18)"
        assert lines[1].startswith(f"{path}:3: malformed JSON")
        assert lines[2] == f"{path}:4: invalid UTF-8 (byte 0xe9 at column 19)"
        assert [line for line, _ in records] == [1, 2, 4, 5]


def test_a_bad_byte_and_a_missing_score_are_reported_together(engine, tmp_path):
    path = tmp_path / "j.csv"
    path.write_bytes(b"image_id,caption,judge,score\n1,a \xff dog,j1,3\n2,a cat,j1,\n")
    assert refused(engine, path, kind="score", scale=Scale.parse("1-5")) == [
        f"{path}:2: invalid UTF-8 (byte 0xff at column 5)",
        f"{path}:3: score is missing"]


def test_metrics_list_points_to_the_judgment_sets(tmp_path):
    db = tmp_path / "j.db"
    thumb(db, "judgments", "import", str(write(tmp_path / "s.csv", SCORES)), "--name",
          "my set", "--scale", "1-4", "--halves")
    assert thumb(db, "metrics", "list").strip() == (
        "no metric scores of the project's own captions; those of a judgment set are "
        "listed by `thumb metrics list --judgments NAME` (sets: 'my set')")
