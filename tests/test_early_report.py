"""Issue #26 item 4: `thumb report` on a project in any state exits 0 with what exists: the
progress of every stage, the tables that can be computed, and for each one that cannot, a
line saying what is missing and the command that makes it. Every format."""

from __future__ import annotations

import json
import re
from pathlib import Path

import markdown_it
import pandas as pd
import pytest
from typer.testing import CliRunner

from metrics.stats.correlation import strict_best_worst
from storage import open_database
from storage.rating.rating_sessions import AnnotationSession
from tests.conftest import SAMPLE_CSV
from tests.test_untrusted_output import injected
from thumb_tui.cli import app

runner = CliRunner()
SAMPLE_RATINGS = SAMPLE_CSV.parent / "example_ratings.csv"
FORMATS = ["md", "html", "json"]


def thumb(db: Path, *args: str) -> str:
    result = runner.invoke(app, ["--db", str(db), *args])
    assert result.exit_code == 0, (args, result.output, result.exception)
    return result.output


def report(db: Path, folder: Path, fmt: str) -> tuple[str, str]:
    """(the command's output, the report's text)."""
    out = thumb(db, "report", "--format", fmt, "--out", str(folder), "--bootstrap", "100")
    return out, (folder / f"report.{fmt}").read_text(encoding="utf-8")


def imported(folder: Path) -> Path:
    db = folder / "early.db"
    thumb(db, "import", str(SAMPLE_CSV))
    return db


def rate_one_image(db: Path) -> None:
    """alice rates every caption of the first image in stage 1."""
    engine = open_database(db)
    session = AnnotationSession(engine, "alice")
    for focus, group in enumerate(session.open_image(0)):
        session.set_values(group, {"precision": 4, "recall": 3}, image_index=0, focus=focus)
    engine.dispose()


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_project_with_captions_only_reports_its_progress_and_what_is_missing(tmp_path, fmt):
    db = imported(tmp_path)
    out, text = report(db, tmp_path / "r", fmt)
    assert f"report written to {tmp_path / 'r' / f'report.{fmt}'}" in out
    # the terminal says what is not computed yet, and how to get it
    assert "not computed yet" in out and "thumb annotate" in out
    assert "thumb metrics compute" in out
    if fmt == "json":
        data = json.loads(text)
        stages = {row["stage"]: row for row in data["progress"]}
        assert stages["stage 1"]["waiting"] == 15 and stages["stage 1"]["done"] == 0
        assert data["systems"] == [] and data["correlations"] == []
        commands = " ".join(row["command"] for row in data["missing"])
        assert "thumb annotate" in commands and "thumb metrics compute" in commands
        assert all(row["tables"] and row["missing"] for row in data["missing"])
        assert data["header"]["images"] == 15 and data["header"]["captions"] == 60
    else:
        assert "Progress" in text and "stage 1" in text and "review" in text
        assert "Not computed yet" in text
        assert "thumb annotate" in text and "thumb metrics compute" in text


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_project_with_one_p_set_reports_the_rating_in_progress(tmp_path, fmt):
    db = imported(tmp_path)
    engine = open_database(db)
    session = AnnotationSession(engine, "alice")
    session.set_values(session.open_image(0)[0], {"precision": 4}, image_index=0, focus=0)
    engine.dispose()
    _, text = report(db, tmp_path / "r", fmt)
    if fmt == "json":
        stage = next(r for r in json.loads(text)["progress"] if r["stage"] == "stage 1")
        assert (stage["waiting"], stage["in_progress"], stage["done"]) == (14, 1, 0)
    else:
        assert "Not computed yet" in text


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_few_stage_1_ratings_give_the_human_tables_and_say_metrics_are_missing(tmp_path,
                                                                                 fmt):
    db = imported(tmp_path)
    rate_one_image(db)
    _, text = report(db, tmp_path / "r", fmt)
    if fmt == "json":
        data = json.loads(text)
        assert len(data["systems"]) == 4  # the human means of the four captions rated
        stage = next(r for r in data["progress"] if r["stage"] == "stage 1")
        assert (stage["waiting"], stage["done"]) == (14, 1)
        missing = data["missing"]
        assert all("thumb annotate" not in row["command"] for row in missing)
        assert any("thumb metrics compute" in row["command"] for row in missing)
    else:
        assert "THUMB Table 2" in text  # the human scores so far
        assert "Not computed yet" in text and "thumb metrics compute" in text
        assert "no metrics computed" not in text


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_metric_scores_without_ratings_say_the_human_scores_are_missing(tmp_path, fmt):
    db = imported(tmp_path)
    thumb(db, "metrics", "compute", "--metric", "bleu")
    _, text = report(db, tmp_path / "r", fmt)
    if fmt == "json":
        data = json.loads(text)
        assert data["systems"][0]["bleu"] > 0
        commands = " ".join(row["command"] for row in data["missing"])
        assert "thumb annotate" in commands and "thumb metrics compute" not in commands
    else:
        assert "metric mean" in text and "thumb annotate" in text


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_complete_project_has_nothing_missing(tmp_path, fmt):
    db = imported(tmp_path)
    thumb(db, "import", str(SAMPLE_RATINGS))
    thumb(db, "metrics", "compute", "--metric", "bleu", "--metric", "rouge-l")
    out, text = report(db, tmp_path / "r", fmt)
    assert "not computed yet" not in out
    if fmt == "json":
        assert json.loads(text)["missing"] == []
    else:
        assert "Not computed yet" not in text and "Progress" in text


def test_an_early_report_in_html_keeps_its_policy_and_escapes_stored_names(tmp_path):
    captions = tmp_path / "captions.csv"
    captions.write_text("image,system,caption\n"
                        f"{SAMPLE_CSV.parent / 'images' / '01_red_balls.png'},"
                        "<script>alert(1)</script>,A *dog*.\n", encoding="utf-8")
    db = tmp_path / "hostile.db"
    thumb(db, "import", str(captions), "--allow-outside-images")
    _, html = report(db, tmp_path / "r", "html")
    assert injected(html) == []
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    _, text = report(db, tmp_path / "m", "md")
    rendered = markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table").render(text)
    assert injected(rendered) == []


def test_an_empty_database_says_to_import_captions(tmp_path):
    from storage import open_database as create

    db = tmp_path / "empty.db"
    create(db).dispose()
    out, text = report(db, tmp_path / "r", "md")
    assert "thumb import" in out and "thumb import" in text


@pytest.mark.parametrize("fmt", FORMATS)
def test_one_rated_caption_is_counted_beside_the_project_and_is_neither_best_nor_worst(
        tmp_path, fmt):
    """Issue #44 item 8, the trial: with one caption of the sample's 60 rated, the header
    counted only what was rated ("1 captions · 1 images · 1 system") and Table 3 counted
    the lone caption as both strictly best and strictly worst of its image."""
    db = imported(tmp_path)
    engine = open_database(db)
    session = AnnotationSession(engine, "alice")
    group = session.open_image(0)[0]
    session.set_values(group, {"precision": 4, "recall": 3}, image_index=0, focus=0)
    engine.dispose()
    _, text = report(db, tmp_path / "r", fmt)
    data = json.loads(report(db, tmp_path / "j", "json")[1])
    [system] = data["header"]["rated_systems"]
    if fmt == "json":
        header = data["header"]
        assert (header["captions"], header["images"], len(header["systems"])) == (60, 15, 4)
        assert (header["rated_captions"], header["rated_images"]) == (1, 1)
        assert data["strict"] == [{"system": system, "best": 0, "worst": 0}]
    elif fmt == "html":
        assert "60 captions (1 rated) · 15 images (1 rated) · 4 systems (1 rated)" in text
    else:
        assert "60 captions of 15 images from 4 systems, 1 caption of 1 image rated so far" in text
        table3 = text.split("(THUMB Table 3)")[1]
        assert re.search(rf"\| {system} +\| +0 \| +0 \|", table3)


def test_table_3_compares_a_caption_only_with_others_rated_for_its_image():
    """An image with one rated caption counts for no system; on an image with two, one is
    strictly best and the other strictly worst (P and R both higher / lower)."""
    data = pd.DataFrame({"image_id": ["lone", "pair", "pair"], "system": ["A", "A", "B"],
                         "precision": [3.0, 5.0, 2.0], "recall": [3.0, 4.0, 1.0]})
    counts = {row.system: (row.best, row.worst)
              for row in strict_best_worst(data).itertuples(index=False)}
    assert counts == {"A": (1, 0), "B": (0, 1)}


def test_a_partly_rated_image_counts_for_no_system_in_table_3(tmp_path):
    """The trial after #44 item 8: with two of an image's four captions rated, Table 3
    called one of them strictly best and the other strictly worst, though either may be
    beaten by a caption not rated yet. Only an image whose every caption is rated counts."""
    db = imported(tmp_path)
    engine = open_database(db)
    session = AnnotationSession(engine, "alice")
    groups = session.open_image(0)
    assert sum(len(group.caption_ids) for group in groups) == 4
    for group, values in zip(groups[:2], ({"precision": 5, "recall": 5},
                                          {"precision": 1, "recall": 1}), strict=True):
        session.set_values(group, values, image_index=0, focus=0)
    engine.dispose()
    data = json.loads(report(db, tmp_path / "j", "json")[1])
    assert data["header"]["rated_captions"] == 2
    assert all(row["best"] == row["worst"] == 0 for row in data["strict"])

    image = pd.DataFrame({"image_id": [1, 1], "system": ["A", "B"],
                          "precision": [5.0, 1.0], "recall": [5.0, 1.0]})
    counts = {row.system: (row.best, row.worst)
              for row in strict_best_worst(image, {1: 2}).itertuples(index=False)}
    assert counts == {"A": (1, 0), "B": (0, 1)}  # every caption rated: compared
    counts = {row.system: (row.best, row.worst)
              for row in strict_best_worst(image, {1: 4}).itertuples(index=False)}
    assert counts == {"A": (0, 0), "B": (0, 0)}
