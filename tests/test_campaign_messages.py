"""Issue #26 items 5 and 6: defaults that fit a small project (`match batches` clamps
--negatives-beyond to the depth the models kept; `match propose --scorer clip` loads local
files only unless --allow-download) and messages that lead to the fix (judgment import,
`thumb import` of a file with misnamed columns, a judgment set whose scores are all
undefined, no literal NAME placeholder)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from storage import open_database
from tests.conftest import ROOT, SAMPLE_CSV, database_dump
from tests.match_helpers import toy_scores
from thumb_tui.cli import app

runner = CliRunner()
PAIRS = ROOT / "sample_data" / "judgment_pairs.csv"
SCORES = """image_id,caption,judge,score
1,A dog runs on the grass.,j1,4
1,A dog runs on the grass.,j2,3
1,A cat sleeps.,j1,1
1,A cat sleeps.,j2,2
2,Two people ride bikes.,j1,3
2,Two people ride bikes.,j2,3
"""


def thumb(db: Path, *args: object):
    return runner.invoke(app, ["--db", str(db), *map(str, args)])


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def lines(result) -> list[str]:
    return result.output.strip().splitlines()


# -- item 5: match batches and match propose ------------------------------------------------

def shallow_match_project(folder: Path) -> Path:
    """The 15-image sample with one toy model's proposals, its lists kept to depth 15."""
    db = folder / "match.db"
    engine = open_database(db)
    from storage import import_captions

    import_captions(engine, SAMPLE_CSV, actor="setup", allow_outside_images=True)
    result = thumb(db, "match", "propose", "--model", "m1", "--scores",
                   toy_scores(engine, folder, 1), "--top-k", 2, "--depth", 15)
    assert result.exit_code == 0, result.output
    engine.dispose()
    return db


def test_batches_clamp_the_default_negatives_beyond_to_the_depth_and_say_so(tmp_path):
    """The README's workflow on the sample: the default --negatives-beyond (25) exceeds the
    depth (15) the model kept (and at 15 every image is in the captions' lists): the
    largest value that works is used, in one line that says so."""
    db = shallow_match_project(tmp_path)
    result = thumb(db, "match", "batches", "--size", 20, "--redundancy", 2,
                   "--gold-system", "Human")
    assert result.exit_code == 0, result.output
    note, summary = lines(result)
    used = re.match(r"--negatives-beyond (\d+) \(not the default 25\): model 'm1' kept its "
                    r"ranked lists to depth 15", note)
    assert used is not None, note
    assert 1 <= int(used.group(1)) <= 15
    assert "batches" in summary and "each verified by 2" in summary


def test_batches_say_which_negatives_beyond_to_use_when_set_too_high(tmp_path):
    db = shallow_match_project(tmp_path)
    before = database_dump(open_database(db))
    result = thumb(db, "match", "batches", "--size", 20, "--negatives-beyond", 30,
                   "--gold-system", "Human")
    assert result.exit_code == 2
    assert len(lines(result)) == 1
    assert "model 'm1' kept its ranked lists to depth 15" in result.output
    use = re.search(r"use --negatives-beyond (\d+) or less", result.output)
    assert use is not None, result.output
    assert database_dump(open_database(db)) == before
    result = thumb(db, "match", "batches", "--size", 20, "--negatives-beyond", use.group(1),
                   "--gold-system", "Human")
    assert result.exit_code == 0, result.output  # the value it named works
    assert len(lines(result)) == 1


@pytest.mark.slow
def test_propose_with_clip_takes_allow_download(tmp_path):
    """--allow-download is an option of `match propose` (as of `metrics compute`); a model
    that cannot be loaded is still one line."""
    db = shallow_match_project(tmp_path)
    result = thumb(db, "match", "propose", "--model", "clip", "--scorer", "clip",
                   "--clip-model", tmp_path / "no-such-clip", "--allow-download")
    assert result.exit_code == 2, result.output
    assert "No such option" not in result.output
    assert "no-such-clip" in result.output and len(lines(result)) == 1


@pytest.mark.slow
def test_propose_with_clip_fails_at_once_without_network(tmp_path):
    """Without HF_HUB_OFFLINE and with an empty cache, a hub model name fails at once (local
    files only) and the message names --allow-download."""
    import os
    import subprocess
    import sys
    import time

    pytest.importorskip("transformers")
    db = shallow_match_project(tmp_path)
    env = {key: value for key, value in os.environ.items()
           if key not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env["HF_HOME"] = str(tmp_path / "hf")  # an empty cache
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "thumb_tui", "--db", str(db), "match", "propose", "--model",
         "clip", "--scorer", "clip", "--clip-model", "openai/clip-vit-base-patch32",
         "--device", "cpu"], env=env, capture_output=True, text=True, timeout=300)
    seconds = time.monotonic() - start
    assert result.returncode == 2, result.stderr[-2000:]
    assert "cannot load the CLIP model" in result.stderr
    assert "--allow-download" in result.stderr
    assert "Retrying" not in result.stderr
    assert seconds < 60, seconds


# -- item 6: judgment import ----------------------------------------------------------------

def test_an_empty_judgment_file_is_one_line_naming_the_columns(tmp_path):
    empty = write(tmp_path / "empty.csv", "")
    result = thumb(tmp_path / "j.db", "judgments", "import", empty, "--name", "e",
                   "--scale", "1-5")
    assert result.exit_code == 2
    problems = [line for line in lines(result) if line.startswith(str(empty))]
    assert len(problems) == 1, result.output
    assert "empty file: expected a header with the columns" in problems[0]
    for column in ("image_id", "caption", "judge", "score"):
        assert column in problems[0]
    assert "missing column" not in result.output


@pytest.mark.slow
def test_an_empty_jsonl_judgment_file_says_what_each_line_should_hold(tmp_path):
    empty = write(tmp_path / "empty.jsonl", "")
    result = thumb(tmp_path / "j.db", "judgments", "import", empty, "--name", "e",
                   "--scale", "1-5")
    assert result.exit_code == 2
    problems = [line for line in lines(result) if line.startswith(str(empty))]
    assert len(problems) == 1, result.output
    assert "empty file: expected one JSON object per line with the keys" in problems[0]
    assert "image_id" in problems[0] and "no records found" not in result.output


def test_a_pairwise_file_without_kind_is_told_to_use_kind_pairwise(tmp_path):
    result = thumb(tmp_path / "j.db", "judgments", "import", PAIRS, "--name", "p")
    assert result.exit_code == 2
    assert len(lines(result)) == 1, result.output
    assert "--kind pairwise" in result.output
    assert "needs --scale" not in result.output


def test_a_pairwise_file_with_a_scale_but_no_kind_is_one_line_too(tmp_path):
    result = thumb(tmp_path / "j.db", "judgments", "import", PAIRS, "--name", "p",
                   "--scale", "1-5")
    assert result.exit_code == 2
    problems = [line for line in lines(result) if line.startswith(str(PAIRS))]
    assert len(problems) == 1, result.output
    assert "--kind pairwise" in problems[0] and "leave out --scale" in problems[0]


def test_a_score_file_imported_as_pairwise_is_told_to_use_kind_score(tmp_path):
    scores = write(tmp_path / "s.csv", SCORES)
    result = thumb(tmp_path / "j.db", "judgments", "import", scores, "--name", "s",
                   "--kind", "pairwise")
    assert result.exit_code == 2
    problems = [line for line in lines(result) if line.startswith(str(scores))]
    assert len(problems) == 1, result.output
    assert "--kind score" in problems[0] and "--scale" in problems[0]


def test_a_bad_score_and_a_duplicate_judge_are_reported_in_one_pass(tmp_path):
    bad = write(tmp_path / "bad.csv", "image_id,caption,judge,score\n"
                                      "1,A dog.,j1,3\n"
                                      "1,A dog.,j1,9\n"
                                      "1,A cat.,j2,x\n"
                                      "1,A cat.,j2,2\n")
    db = tmp_path / "j.db"
    result = thumb(db, "judgments", "import", bad, "--name", "d", "--scale", "1-5")
    assert result.exit_code == 2
    out = result.output
    assert f"{bad}:3: score must be on the scale 1-5" in out
    assert f"{bad}:3: judge 'j1' already judged this caption at line 2" in out
    assert f"{bad}:4: score must be a number" in out
    assert f"{bad}:5: judge 'j2' already judged this caption at line 4" in out


def test_a_duplicate_pairwise_judge_with_a_bad_choice_is_reported_too(tmp_path):
    bad = write(tmp_path / "bad.csv", "image_id,caption_a,caption_b,judge,choice\n"
                                      "1,A dog.,A cat.,j1,a\n"
                                      "1,A cat.,A dog.,j1,c\n")
    result = thumb(tmp_path / "j.db", "judgments", "import", bad, "--name", "d", "--kind",
                   "pairwise")
    assert result.exit_code == 2
    assert f"{bad}:3: choice must be" in result.output
    assert f"{bad}:3: judge 'j1' already judged this pair at line 2" in result.output


@pytest.mark.parametrize("choice", ["A", "B", "Tie", "TIE"])
def test_a_choice_in_another_case_is_refused_with_the_allowed_values(tmp_path, choice):
    bad = write(tmp_path / "upper.csv", "image_id,caption_a,caption_b,judge,choice\n"
                                        f"1,A dog.,A cat.,j1,{choice}\n")
    db = tmp_path / "j.db"
    result = thumb(db, "judgments", "import", bad, "--name", "u", "--kind", "pairwise")
    assert result.exit_code == 2, result.output
    assert f"{bad}:2: choice must be a, b or tie" in result.output
    assert f"not {choice!r}" in result.output


# -- item 6: thumb import ---------------------------------------------------------------------

def test_import_names_the_missing_columns_and_suggests_the_close_ones(tmp_path):
    (tmp_path / "images").mkdir()
    bad = write(tmp_path / "bad.csv", "img,sys,text\nimages/a.png,S,A dog.\n")
    db = tmp_path / "p.db"
    result = thumb(db, "import", bad)
    assert result.exit_code == 2
    out = result.output
    assert "unknown column(s): img, text" in out
    assert "missing column 'caption'" in out and "missing column 'image'" in out
    assert "'img'" in out and "'text'" in out  # the close matches are suggested
    caption_line = next(line for line in lines(result) if "missing column 'caption'" in line)
    assert "'text'" in caption_line
    image_line = next(line for line in lines(result) if "missing column 'image'" in line)
    assert "'img'" in image_line
    assert "missing column 'system'" not in out  # sys is system's alias


def test_import_of_a_jsonl_with_misnamed_columns_names_the_missing_ones(tmp_path):
    bad = write(tmp_path / "bad.jsonl", '{"image_id": "a", "model": "S", "caption": "A."}\n')
    result = thumb(tmp_path / "p.db", "import", bad)
    assert result.exit_code == 2
    assert "missing column 'system'" in result.output and "'model'" in result.output


# -- item 6: every score undefined; no NAME placeholder --------------------------------------

@pytest.fixture
def set_without_references(tmp_path) -> Path:
    db = tmp_path / "j.db"
    result = thumb(db, "judgments", "import", write(tmp_path / "s.csv", SCORES), "--name",
                   "crowd-1", "--scale", "1-4")
    assert result.exit_code == 0, result.output
    return db


def test_metrics_compute_says_when_every_score_of_a_set_is_undefined(set_without_references):
    result = thumb(set_without_references, "metrics", "compute", "--judgments", "crowd-1",
                   "--metric", "bleu")
    assert result.exit_code == 0, result.output
    assert "bleu: 3 captions, all undefined (no references)" in result.output
    assert "computed 3" not in result.output


def test_metrics_compute_counts_the_undefined_among_the_computed(tmp_path):
    """Image 2's one reference is its caption, left out of its own references: that
    caption's score is undefined, the others' are not."""
    db = tmp_path / "j.db"
    refs = write(tmp_path / "refs.csv", "image_id,reference\n1,A dog on grass.\n"
                                        "2,Two people ride bikes.\n")
    assert thumb(db, "judgments", "import", write(tmp_path / "s.csv", SCORES), "--name", "s",
                 "--scale", "1-4", "--references", refs).exit_code == 0
    result = thumb(db, "metrics", "compute", "--judgments", "s", "--metric", "bleu")
    assert result.exit_code == 0, result.output
    assert "bleu: computed 3 (1 undefined: no references), reused 0" in result.output


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["table", "md"])
def test_judgments_report_hints_with_the_set_name(set_without_references, fmt):
    result = thumb(set_without_references, "judgments", "report", "crowd-1", "--format", fmt)
    assert result.exit_code == 0, result.output
    assert "NAME" not in result.output
    assert "thumb metrics compute --judgments crowd-1" in result.output


@pytest.mark.parametrize("fmt", ["table", "md"])
def test_judgments_report_says_why_every_score_is_undefined(set_without_references, fmt):
    assert thumb(set_without_references, "metrics", "compute", "--judgments", "crowd-1",
                 "--metric", "bleu").exit_code == 0
    result = thumb(set_without_references, "judgments", "report", "crowd-1", "--format", fmt)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "NAME" not in out and "not computed for every caption" not in out
    assert "undefined for every caption" in out and "no references" in out
    assert "--references" in out


def test_a_failed_judgment_import_changes_nothing(tmp_path):
    db = tmp_path / "j.db"
    engine = open_database(db)
    before = database_dump(engine)
    thumb(db, "judgments", "import", write(tmp_path / "e.csv", ""), "--name", "e",
          "--scale", "1-5")
    assert database_dump(engine) == before
    engine.dispose()
