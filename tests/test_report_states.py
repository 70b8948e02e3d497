"""`thumb report` (and export and agreement) on every state the app can produce: right after
one P was set, human scores without metrics, metrics without human scores, one system, one
image. Each used to end in a traceback (TypeError from pandas 3, KeyError 'dimension',
ZeroDivisionError, the Williams test on three captions)."""

from __future__ import annotations

import csv
import json
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from storage import open_database
from storage.rating.rating_sessions import AnnotationSession
from tests.conftest import SAMPLE_CSV
from thumb_tui.cli import app

runner = CliRunner()
SAMPLE_RATINGS = SAMPLE_CSV.parent / "example_ratings.csv"


def thumb(db: Path, *args: str) -> str:
    result = runner.invoke(app, ["--db", str(db), *args])
    assert result.exit_code == 0, (args, result.output, result.exception)
    return result.output


def subset(folder: Path, keep) -> tuple[Path, Path]:
    """The sample captions and ratings restricted to the (image_id, system) pairs kept."""
    with SAMPLE_CSV.open(encoding="utf-8", newline="") as handle:
        captions = [row for row in csv.DictReader(handle) if keep(row)]
    with SAMPLE_RATINGS.open(encoding="utf-8", newline="") as handle:
        kept = {(row["image_id"], row["system"]) for row in captions}
        ratings = [row for row in csv.DictReader(handle)
                   if (row["image_id"], row["system"]) in kept]
    paths = []
    for name, rows in (("captions.csv", captions), ("ratings.csv", ratings)):
        if name == "captions.csv":
            for row in rows:
                row["image"] = str(SAMPLE_CSV.parent / row["image"])
        path = folder / name
        with path.open("w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        paths.append(path)
    return paths[0], paths[1]


def project(folder: Path, state: str) -> Path:
    db = folder / f"{state}.db"
    keep = {"one system": lambda row: row["system"] == "Human",
            "one image": lambda row: row["image_id"] == "img01"}.get(state, lambda row: True)
    captions, ratings = subset(folder, keep)
    thumb(db, "import", str(captions), "--allow-outside-images")
    if state in ("human only", "one system", "one image", "human and metrics"):
        thumb(db, "import", str(ratings))
    if state in ("metric only", "one system", "one image", "human and metrics"):
        thumb(db, "metrics", "compute", "--metric", "bleu", "--metric", "rouge-l")
    return db


@pytest.mark.slow
@pytest.mark.parametrize("state", ["human only", "metric only", "one system", "one image",
                                   "human and metrics"])
@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_report_works_on_every_state(tmp_path, state, fmt):
    db = project(tmp_path, state)
    with warnings.catch_warnings():  # an undefined statistic is NaN, never a warning
        warnings.simplefilter("error", RuntimeWarning)
        out = thumb(db, "report", "--format", fmt, "--out", str(tmp_path / "report"),
                    "--bootstrap", "100")
    path = tmp_path / "report" / f"report.{fmt}"
    assert f"report written to {path}" in out
    text = path.read_text(encoding="utf-8")
    if fmt == "json":
        data = json.loads(text)
        assert len(data["systems"]) == (1 if state == "one system" else 4)
        if state == "metric only":
            assert data["header"]["final_scores"] == "none yet: metric means only"
            assert data["correlations"] == [] and data["systems"][0]["bleu"] > 0


def test_an_empty_project_says_what_to_do(tmp_path):
    """Issue #26 item 4: a project without scores reports where it stands (it used to end
    with "nothing to report yet" and exit 2)."""
    db = tmp_path / "empty.db"
    thumb(db, "import", str(SAMPLE_CSV))
    out = thumb(db, "report", "--out", str(tmp_path / "r"))
    assert out.startswith("report written to")
    assert "not computed yet" in out and "thumb annotate" in out


def test_one_p_only_then_export_report_and_agreement(tmp_path):
    """Issue #15 item 3: rating one caption's P and quitting broke export, report and
    agreement with `TypeError: Invalid value '[nan]' for dtype 'float64'` (pandas 3)."""
    db = tmp_path / "early.db"
    thumb(db, "import", str(SAMPLE_CSV))
    engine = open_database(db)
    session = AnnotationSession(engine, "alice")
    session.set_values(session.open_image(0)[0], {"precision": 4}, image_index=0, focus=0)
    engine.dispose()
    assert "1 rating(s) in progress" in thumb(db, "export", "--out", str(tmp_path / "e.csv"))
    assert "No pairs of ratings" in thumb(db, "agreement")
    out = thumb(db, "report", "--out", str(tmp_path / "r"))  # issue #26: exit 0, not 2
    assert "not computed yet" in out


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_a_project_with_only_retrieval_results_reports_them(tmp_path, fmt):
    """Issue #23 item 9: retrieval results without any caption score used to end in
    "nothing to report yet"; the JSON wrote k as 1.0."""
    db = tmp_path / "retrieval.db"
    thumb(db, "import", str(SAMPLE_CSV))
    engine = open_database(db)
    from storage.retrieval import project_captions

    captions = project_captions(engine)
    engine.dispose()
    images, caption_keys = sorted(set(captions["image_key"])), captions["caption_key"].tolist()
    i2t = tmp_path / "i2t.json"
    t2i = tmp_path / "t2i.json"
    i2t.write_text(json.dumps({image: caption_keys[::-1] for image in images}))
    t2i.write_text(json.dumps({caption: images for caption in caption_keys}))
    thumb(db, "retrieval", "evaluate", "--name", "reversed", "--i2t", str(i2t), "--t2i",
          str(t2i), "--positives", "project", "--k", "1,5", "--bootstrap", "0")
    out = thumb(db, "report", "--format", fmt, "--out", str(tmp_path / "report"))
    text = (tmp_path / "report" / f"report.{fmt}").read_text(encoding="utf-8")
    assert "report written to" in out
    if fmt == "json":
        data = json.loads(text)
        assert data["systems"] == [] and data["correlations"] == []
        ks = {record["k"] for record in data["retrieval"] if record["k"] is not None}
        assert ks == {1, 5} and all(type(k) is int for k in ks)
        recall = [record for record in data["retrieval"] if record["metric"] == "recall@k"
                  and record["direction"] == "t2i"]
        assert len(recall) == 2 and all(record["value"] is not None for record in recall)
    else:
        assert "Retrieval" in text and "reversed" in text
        assert "THUMB Table 2" not in text  # no empty caption tables
