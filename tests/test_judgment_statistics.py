"""Judgment-set statistics against SciPy (tau-b, tau-c, Spearman, Pearson; flattened and
averaged) and a direct count (pairwise accuracy), the bootstrap of Kendall's tau, Williams'
test, agreement among judges, the command line's worked example, export and escaping."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from typer.testing import CliRunner

from metrics.signature import signature_labels
from metrics.stats.correlation import image_weights, kendall_replicates, williams_test
from metrics.stats.judgments import majority_pairs, pairwise_accuracy
from reports.judgments import build_judgment_report
from reports.thumb.render import judgment_sections
from reports.thumb.text import judgment_text
from storage.imports.judgment_import import Scale, import_judgments
from storage.judgments import judgment_caption_rows, judgment_set
from storage.metric_scores import store_metric_scores
from storage.models import JudgmentMetricScore
from tests.conftest import ROOT
from thumb_tui.cli import app

SAMPLE = ROOT / "sample_data"
SIGNATURES = {"good": "good|impl:test|refs:image", "poor": "poor|impl:test|refs:image"}


def score_set(tmp_path, engine):
    """Eight captions of four images, three judges each (scores 1-5), and two metrics:
    `good` follows the judges' mean with noise, `poor` is noise."""
    rng = np.random.default_rng(7)
    rows, quality = [], {}
    for caption in range(8):
        quality[caption] = rng.uniform(1, 5)
        for judge in ("j1", "j2", "j3"):
            score = int(np.clip(round(quality[caption] + rng.normal(0, 0.8)), 1, 5))
            rows.append({"image_id": f"img{caption // 2}", "caption": f"caption {caption}",
                         "judge": judge, "score": score})
    path = tmp_path / "scores.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    import_judgments(engine, path, name="likert", kind="score", scale=Scale.parse("1-5"),
                     actor="t")
    captions, _ = judgment_caption_rows(engine, judgment_set(engine, "likert").id)
    index = {row.text: row.caption_id for row in captions}
    good = {index[f"caption {c}"]: quality[c] + rng.normal(0, 0.7) for c in quality}
    poor = {index[f"caption {c}"]: rng.normal() for c in quality}
    for name, values in (("good", good), ("poor", poor)):
        store_metric_scores(engine, name, SIGNATURES[name], list(values),
                            list(values.values()), JudgmentMetricScore)
    frame = pd.DataFrame(rows)
    frame["caption_id"] = frame["caption"].map(lambda t: index[t])
    frame["good"], frame["poor"] = frame["caption_id"].map(good), frame["caption_id"].map(poor)
    return frame


SCIPY = {"tau_b": lambda x, y: stats.kendalltau(x, y, variant="b").statistic,
         "tau_c": lambda x, y: stats.kendalltau(x, y, variant="c").statistic,
         "spearman": lambda x, y: stats.spearmanr(x, y).statistic,
         "pearson": lambda x, y: stats.pearsonr(x, y).statistic}


@pytest.mark.parametrize("aggregate", ["flat", "mean"])
def test_score_set_statistics_equal_scipy(engine, tmp_path, aggregate):
    frame = score_set(tmp_path, engine)
    if aggregate == "mean":
        frame = frame.groupby("caption_id").agg(score=("score", "mean"), good=("good", "first"),
                                                poor=("poor", "first")).reset_index()
    report = build_judgment_report(engine, "likert", aggregate=aggregate, bootstrap=200)
    records = report.records
    assert len(records) == 2 * 4
    assert set(records["aggregate"]) == {aggregate}
    assert set(records["judgments"]) == {"likert"}
    assert set(records["signature"]) == set(SIGNATURES.values())
    for record in records.itertuples():
        expected = SCIPY[record.statistic](frame[record.metric], frame["score"])
        assert record.value == pytest.approx(expected, abs=1e-12), record
        assert record.n == len(frame) == (24 if aggregate == "flat" else 8)
        assert record.ci_low <= record.value <= record.ci_high or record.metric == "poor"
    pearson = {m: stats.pearsonr(frame[m], frame["score"]).statistic for m in ("good", "poor")}
    difference = report.differences.set_index("statistic").loc["pearson"]
    assert difference["difference"] == pytest.approx(pearson["good"] - pearson["poor"])
    t, p = williams_test(pearson["good"], pearson["poor"],
                         stats.pearsonr(frame["good"], frame["poor"]).statistic, len(frame))
    assert (difference["williams_t"], difference["williams_p"]) == pytest.approx((t, p))
    assert difference["ci_low"] <= difference["difference"] <= difference["ci_high"]


def test_kendall_bootstrap_equals_scipy_on_each_resample():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 6, 40).astype(float)
    y = np.round(x + rng.normal(0, 2, 40))
    weights = image_weights(np.arange(40) // 4, 25, seed=1)
    replicates = kendall_replicates(x, y, weights)
    for row, b, c in zip(weights.astype(int), replicates["b"], replicates["c"], strict=True):
        xs, ys = np.repeat(x, row), np.repeat(y, row)
        assert b == pytest.approx(stats.kendalltau(xs, ys, variant="b").statistic, abs=1e-12)
        assert c == pytest.approx(stats.kendalltau(xs, ys, variant="c").statistic, abs=1e-12)


def test_pairwise_accuracy_equals_a_direct_count():
    # image, caption_a_id, caption_b_id, judge, choice, category
    rows = [("i1", 1, 2, "j1", "a", "hm"), ("i1", 1, 2, "j2", "a", "hm"),
            ("i1", 2, 1, "j3", "a", "hm"),  # reversed: a vote for caption 2
            ("i1", 1, 3, "j1", "b", "mm"), ("i1", 3, 1, "j2", "a", "mm"),
            ("i2", 4, 5, "j1", "a", "hm"), ("i2", 4, 5, "j2", "b", "hm"),  # no majority
            ("i2", 4, 6, "j1", "tie", "mm"), ("i2", 4, 6, "j2", "b", "mm"),
            ("i2", 5, 6, "j1", "a", "mm")]
    pairs = pd.DataFrame(rows, columns=["image", "caption_a_id", "caption_b_id", "judge",
                                        "choice", "category"])
    values = pd.DataFrame({"m": [0.9, 0.5, 0.7, 0.2, 0.2, 0.6]}, index=[1, 2, 3, 4, 5, 6])
    # humans: 1>2 (2 of 3), 3>1, 4~5 (left out), 6>4, 5>6; metric: 1>2 yes, 3>1 no,
    # 6>4 yes, 5>6 no -> 2 of 4 overall; hm: 1 of 1; mm: 1 of 3
    majority = majority_pairs(pairs)
    assert (majority["human"] == 0).sum() == 1
    table = pairwise_accuracy(pairs, values, ["m"], bootstrap=0).set_index("category")
    assert table.loc["all", "value"] == 2 / 4 and table.loc["all", "n"] == 4
    assert table.loc["hm", "value"] == 1 and table.loc["hm", "no_majority"] == 1
    assert table.loc["mm", "value"] == pytest.approx(1 / 3)
    tied = pd.DataFrame({"m": [0.5, 0.5, 0.7, 0.2, 0.2, 0.6]}, index=[1, 2, 3, 4, 5, 6])
    assert pairwise_accuracy(pairs, tied, ["m"], bootstrap=0).set_index(
        "category").loc["hm", ["value", "metric_ties"]].tolist() == [0.5, 1]


def test_pairwise_set_report_and_agreement(engine):
    import_judgments(engine, SAMPLE / "judgment_pairs.csv", name="pairs", kind="pairwise",
                     actor="t")
    report = build_judgment_report(engine, "pairs", bootstrap=50)
    assert report.records.empty  # no metric scores yet
    alpha = report.agreement.set_index("statistic").loc["alpha_nominal"]
    assert alpha["n"] == 84 and alpha["raters"] == 3 and 0 < alpha["value"] < 1
    assert "metric tie scores 1/2" in report.header["tie_rule"]


def test_judges_agreement_uses_krippendorff(engine, tmp_path):
    import krippendorff

    frame = score_set(tmp_path, engine)
    report = build_judgment_report(engine, "likert", bootstrap=100)
    matrix = frame.pivot_table(index="judge", columns="caption_id", values="score").to_numpy()
    for level in ("ordinal", "interval"):
        row = report.agreement.set_index("statistic").loc[f"alpha_{level}"]
        assert row["value"] == pytest.approx(krippendorff.alpha(
            reliability_data=matrix, level_of_measurement=level))
        assert row["ci_low"] <= row["value"] <= row["ci_high"]


def test_signature_labels_name_what_distinguishes_signatures():
    labels = signature_labels([
        "cider-d|tok:ptb-java|corpus:pooled#a1|refs:image",
        "cider-d|tok:ptb-java|corpus:per-system#b2|refs:image",
        "bleu|impl:x|self:kept", "bleu|impl:x|self:excluded", "rouge-l|impl:y",
        "spice|corpus:pooled#a1", "spice|corpus:pooled#c3"])
    assert set(labels.values()) == {"cider-d (pooled)", "cider-d (per-system)",
                                    "bleu (self:kept)", "bleu (self:excluded)",
                                    "rouge-l", "spice (pooled#a1)", "spice (pooled#c3)"}
    assert not any("#2" in label for label in labels.values())


def test_stored_text_is_escaped_in_markdown_and_terminal(engine, tmp_path):
    path = tmp_path / "evil.csv"
    path.write_text("image_id,caption_a,caption_b,judge,choice,category\n"
                    "1,A,B,j,a,<script>*x*</script>\n1,A,B,k,a,<script>*x*</script>\n",
                    encoding="utf-8")
    import_judgments(engine, path, name="<b>set", kind="pairwise", actor="t")
    captions, _ = judgment_caption_rows(engine, judgment_set(engine, "<b>set").id)
    store_metric_scores(engine, "m", "m|impl:t", [row.caption_id for row in captions],
                        [1.0, 0.0], JudgmentMetricScore)
    report = build_judgment_report(engine, "<b>set", bootstrap=0)
    markdown = "\n".join(title + body for title, body in judgment_sections(report))
    assert "<script>" not in markdown and "<b>" not in markdown
    assert "&lt;script>\\*x\\*&lt;/script>" in markdown
    import markdown_it

    html = markdown_it.MarkdownIt("commonmark").enable("table").render(markdown)
    assert "<script>" not in html and "&lt;script&gt;" in html
    report.info = report.info.__class__(**{**vars(report.info), "name": "x\x1b[31mred"})
    assert "\x1b" not in judgment_text(report)


runner = CliRunner()


@pytest.mark.slow
def test_the_readme_worked_example(tmp_path):
    """A tidy CSV of judgments to the correlation table in four commands."""
    db = ["--db", str(tmp_path / "j.db")]
    steps = [
        ["judgments", "import", str(SAMPLE / "judgments.csv"), "--name", "sample",
         "--scale", "1-4", "--references", str(SAMPLE / "references.csv")],
        ["metrics", "compute", "--judgments", "sample", "--metric", "coco-bleu-4",
         "--metric", "cider-d", "--tokenizer", "ptb-python"],
        ["judgments", "report", "sample", "--bootstrap", "100"],
        ["judgments", "report", "sample", "--format", "json", "--bootstrap", "0",
         "--aggregate", "mean"],
    ]
    results = [runner.invoke(app, [*db, *step]) for step in steps]
    for result in results:
        assert result.exit_code == 0, result.output
    assert "corpus:pooled#" in results[1].output
    assert "tau_b" in results[2].output and "cider-d" in results[2].output
    records = json.loads(results[3].output)["records"]
    assert {r["statistic"] for r in records} == {"tau_b", "tau_c", "spearman", "pearson"}
    assert set(records[0]) >= {"judgments", "metric", "signature", "statistic", "aggregate",
                               "category", "value", "ci_low", "ci_high", "n"}
    assert {r["n"] for r in records} == {60}


def test_cli_refuses_bad_rows_with_file_and_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("image_id,caption,judge,score\n1,A dog.,j1,7\n", encoding="utf-8")
    result = runner.invoke(app, ["--db", str(tmp_path / "x.db"), "judgments", "import",
                                 str(bad), "--name", "n", "--scale", "1-5"])
    assert result.exit_code == 2
    assert f"{bad}:2: score must be on the scale 1-5 (whole numbers), not '7'" in result.output
    assert not (tmp_path / "x.db").exists()
    no_scale = runner.invoke(app, ["--db", str(tmp_path / "x.db"), "judgments", "import",
                                   str(bad), "--name", "n"])
    assert no_scale.exit_code == 2 and "needs --scale" in no_scale.output


@pytest.mark.slow
def test_export_carries_metric_scores_and_imports_again(engine, tmp_path):
    frame = score_set(tmp_path, engine)
    from reports.exports import export_judgment_set

    out = tmp_path / "likert.jsonl"
    rows, signatures = export_judgment_set(engine, "likert", out, "jsonl")
    assert rows == len(frame)
    assert json.loads(signatures.read_text()) == {f"metric:{k}": v
                                                  for k, v in SIGNATURES.items()}
    first = json.loads(out.read_text().splitlines()[0])
    assert first["metric:good"] == pytest.approx(frame.loc[0, "good"])
    again = import_judgments(engine, out, name="again", kind="score",
                             scale=Scale.parse("1-5"), actor="t")
    assert again.judgments == len(frame)


@pytest.mark.slow
def test_project_export_carries_metric_columns_and_report_has_judgment_sections(tmp_path):
    from tests.conftest import SAMPLE_CSV

    db = ["--db", str(tmp_path / "p.db")]
    for step in (["import", str(SAMPLE_CSV)],
                 ["import", str(SAMPLE / "example_ratings.csv")],
                 ["metrics", "compute", "--metric", "bleu", "--metric", "cider-d",
                  "--cider-corpus", "pooled", "--tokenizer", "ptb-python"],
                 ["metrics", "compute", "--metric", "cider-d", "--tokenizer", "ptb-python"],
                 ["judgments", "import", str(SAMPLE / "judgments.csv"), "--name", "likert",
                  "--scale", "1-4", "--references", str(SAMPLE / "references.csv")],
                 ["metrics", "compute", "--judgments", "likert", "--metric", "bleu"]):
        result = runner.invoke(app, [*db, *step])
        assert result.exit_code == 0, result.output
    out = tmp_path / "project.csv"
    result = runner.invoke(app, [*db, "export", "--format", "csv", "--out", str(out)])
    assert result.exit_code == 0 and "metric signatures in" in result.output
    header = out.read_text(encoding="utf-8").splitlines()[0].split(",")
    assert {"metric:bleu", "metric:cider-d (pooled)", "metric:cider-d (per-system)"} <= set(
        header)
    signatures = json.loads((tmp_path / "project.csv.signatures.json").read_text())
    assert signatures["metric:cider-d (pooled)"].startswith("cider-d|")
    again = runner.invoke(app, ["--db", str(tmp_path / "again.db"), "import", str(out),
                                "--allow-outside-images"])
    assert again.exit_code == 0, again.output
    report = runner.invoke(app, [*db, "report", "--format", "md", "--out",
                                 str(tmp_path / "r"), "--bootstrap", "100"])
    assert report.exit_code == 0, report.output
    text = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    assert "## Judgment set likert" in text and "likert: metric-human correlation" in text
    assert "cider-d (pooled)" in text and "#2" not in text


@pytest.mark.slow
def test_metrics_say_what_a_judgment_set_lacks(tmp_path):
    """Without images clip-s says it needs them (before loading any model); without
    references a reference metric's scores are stored as undefined ('no references')."""
    db = ["--db", str(tmp_path / "n.db")]
    result = runner.invoke(app, [*db, "judgments", "import", str(SAMPLE / "judgments.csv"),
                                 "--name", "bare", "--scale", "1-4"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, [*db, "metrics", "compute", "--judgments", "bare",
                                 "--metric", "clip-s", "--clip-model", "/nonexistent"])
    assert result.exit_code == 2 and "clip-s needs the image files: 60 caption(s)" in (
        result.output), result.output
    status = runner.invoke(app, [*db, "status"])
    assert "judgment set bare (score, scale 1-4 (whole numbers))" in status.output
    assert "180 judgments" in status.output
    listed = runner.invoke(app, [*db, "metrics", "list", "--judgments", "bare"])
    assert "run `thumb metrics compute --judgments bare`" in listed.output
    result = runner.invoke(app, [*db, "metrics", "compute", "--judgments", "bare",
                                 "--metric", "coco-bleu-4", "--tokenizer", "ptb-python"])
    assert result.exit_code == 0, result.output
    listed = runner.invoke(app, [*db, "metrics", "list", "--judgments", "bare"])
    assert "(60 undefined)" in listed.output, listed.output
    unknown = runner.invoke(app, [*db, "judgments", "report", "nope"])
    assert unknown.exit_code == 2 and "no judgment set named 'nope'; known: 'bare'" in (
        unknown.output)


def test_report_metric_filter_by_name_or_label(engine, tmp_path):
    score_set(tmp_path, engine)
    only = build_judgment_report(engine, "likert", metrics=["good"], bootstrap=0)
    assert set(only.records["metric"]) == {"good"} and only.differences.empty
    with pytest.raises(ValueError, match="no stored scores of 'bleu'"):
        build_judgment_report(engine, "likert", metrics=["bleu"], bootstrap=0)


@pytest.mark.slow
@pytest.mark.skipif(not (ROOT.parent / "shared" / "anchors").exists()
                    and not __import__("os").environ.get("THUMB_ANCHORS"),
                    reason="published THUMB 1.0 data not found")
def test_thumb_release_as_a_judgment_set_reproduces_table_4(tmp_path):
    """The published THUMB 1.0 precision scores, imported as a tidy score set (one judge,
    with systems), give THUMB's Table 4 Pearson r of P through the judgment pipeline
    (with THUMB's clean-up, as the paper computed them)."""
    from tests.conftest import THUMB_JSONL, THUMB_REFS
    from tests.test_metrics_text import TABLE_4

    if not THUMB_JSONL.is_file():
        pytest.skip("published THUMB 1.0 data not found")
    rows = [json.loads(line) for line in THUMB_JSONL.read_text().splitlines() if line]
    pd.DataFrame({"image_id": [r["seg_id"] for r in rows],
                  "caption_id": [f"{r['SYS']}-{r['seg_id']}" for r in rows],
                  "caption": [r["hyp"] for r in rows], "system": [r["SYS"] for r in rows],
                  "judge": "thumb-1.0", "score": [r["P"] for r in rows]}).to_csv(
        tmp_path / "thumb.csv", index=False)
    references = [json.loads(line) for line in THUMB_REFS.read_text().splitlines() if line]
    pd.DataFrame([{"image_id": r["seg_id"], "reference": ref} for r in references
                  for ref in r["refs"]]).to_csv(tmp_path / "refs.csv", index=False)
    db = ["--db", str(tmp_path / "t.db")]
    steps = [["judgments", "import", str(tmp_path / "thumb.csv"), "--name", "thumb-p",
              "--scale", "1-5", "--references", str(tmp_path / "refs.csv")],
             ["metrics", "compute", "--judgments", "thumb-p", "--keep-self-references",
              "--clean", "thumb",
              *[option for metric in TABLE_4 for option in ("--metric", metric)]],
             ["judgments", "report", "thumb-p", "--format", "json", "--bootstrap", "0"]]
    results = [runner.invoke(app, [*db, *step]) for step in steps]
    for result in results:
        assert result.exit_code == 0, result.output
    assert "corpus:per-system#" in results[1].output  # every caption has a system
    assert "|clean:thumb|" in results[1].output
    records = json.loads(results[2].output)["records"]
    pearson = {r["metric"]: r["value"] for r in records if r["statistic"] == "pearson"}
    assert {r["n"] for r in records} == {2500}
    for metric, expected in TABLE_4.items():
        assert pearson[metric] == pytest.approx(expected[0], abs=0.01), metric
    agreement = json.loads(results[2].output)["agreement"]
    assert {a["note"] for a in agreement} == {"undefined: no item has values from two raters"}


WORDS = ["a", "dog", "cat", "man", "woman", "child", "ball", "red", "blue", "green", "runs",
         "sits", "plays", "on", "in", "near", "the", "grass", "beach", "street", "table",
         "with", "two", "small", "big"]


def pair_dataset(tmp_path, reference_ids: bool = True):
    """A crowd-sourced pair dataset: 30 candidate sentences, each one of the references of
    its own image (its caption_id is that reference's id), each judged against its own
    image and two others by three judges (1-4). Image im0 has another reference with the
    text of im0#0, and im5 a reference with the text of im1#0 under another id."""
    rng = np.random.default_rng(5)
    images = [f"im{i}" for i in range(10)]
    refs = {image: [(f"{image}#{k}", " ".join(rng.choice(WORDS, int(rng.integers(5, 10)))))
                    for k in range(5)] for image in images}
    refs["im0"][4] = ("im0#4", refs["im0"][0][1])
    refs["im5"][3] = ("im5#3", refs["im1"][0][1])
    rows = []
    for j in range(30):
        own = j % 10
        caption_id, text = refs[images[own]][j // 10]
        for offset in (0, 4, 7):
            image = images[(own + offset) % 10]
            quality = 3.5 if offset == 0 else 1.5
            for judge in ("j1", "j2", "j3"):
                score = int(np.clip(round(quality + rng.normal(0, 0.9)), 1, 4))
                rows.append({"image_id": image, "caption_id": caption_id, "caption": text,
                             "judge": judge, "score": score})
    pd.DataFrame(rows).to_csv(tmp_path / "pairs.csv", index=False)
    pd.DataFrame([{"image_id": image, "reference": text,
                   **({"reference_id": ref_id} if reference_ids else {})}
                  for image in images for ref_id, text in refs[image]]).to_csv(
        tmp_path / "pair_refs.csv", index=False)
    return pd.DataFrame(rows), refs


def stored_by_pair(engine, name):
    """(image key, caption id) -> {metric: stored score}, and the signatures."""
    set_id = judgment_set(engine, name).id
    captions, _ = judgment_caption_rows(engine, set_id)
    pair = {row.caption_id: (row.image_key, row.external_id) for row in captions}
    values: dict[tuple[str, str], dict[str, float]] = {}
    from storage.judgments import judgment_metric_scores

    scores = judgment_metric_scores(engine, set_id)
    for row in scores.itertuples():
        values.setdefault(pair[row.caption_id], {})[row.metric] = row.value
    return values, dict(zip(scores["metric"], scores["signature"], strict=False))


def direct_bleu(pairs, references) -> np.ndarray:
    """pycocoevalcap's Bleu(4) straight on the texts (lower-case words only: their PTB
    tokens are the texts themselves), all pairs in one call."""
    from pycocoevalcap.bleu.bleu import Bleu

    _, scores = Bleu(4).compute_score({i: list(refs) for i, refs in enumerate(references)},
                                      {i: [text] for i, text in enumerate(pairs)}, verbose=0)
    return np.asarray(scores[3], dtype=float)


@pytest.mark.slow
def test_judgments_of_pairs_import_score_and_report_kendall_tau_b(tmp_path):
    """One caption id judged under three images: imported natively, its own reference (the
    one with its id) left out at its own image only, and the report's tau-b equal to
    scipy's on the same numbers."""
    frame, refs = pair_dataset(tmp_path)
    db = ["--db", str(tmp_path / "pairs.db")]
    steps = [["judgments", "import", str(tmp_path / "pairs.csv"), "--name", "pairs",
              "--scale", "1-4", "--references", str(tmp_path / "pair_refs.csv")],
             ["metrics", "compute", "--judgments", "pairs", "--metric", "coco-bleu-4",
              "--metric", "cider-d", "--tokenizer", "ptb-python"],
             ["judgments", "report", "pairs", "--format", "json", "--bootstrap", "0"],
             ["judgments", "report", "pairs", "--format", "json", "--bootstrap", "0",
              "--aggregate", "mean"]]
    results = [runner.invoke(app, [*db, *step]) for step in steps]
    for result in results:
        assert result.exit_code == 0, result.output
    assert "10 images, 90 captions, 50 references, 3 judges, 270 judgments" in (
        results[0].output)
    from storage import open_database

    engine = open_database(tmp_path / "pairs.db")
    values, signatures = stored_by_pair(engine, "pairs")
    engine.dispose()
    assert len(values) == 90
    for signature in signatures.values():
        assert "|self:excluded-by-id|clean:none|" in signature
    # how many were left out, beside the signatures (never in them): the (image, caption)
    # pairs judged whose image has a reference with the caption's id
    own = sum(any(ref_id == caption_id for ref_id, _ in refs[image])
              for image, caption_id in set(zip(frame["image_id"], frame["caption_id"],
                                               strict=True)))
    assert results[1].output.count(f"\n  {own} self-references excluded\n") == 2
    assert set(json.loads(results[2].output)["self_references"].values()) == {
        f"{own} self-references excluded"}
    # the references each pair was scored against, by the definition: its image's
    # references but the one whose id is the caption's own
    keys = list(values)
    texts = dict(zip(zip(frame["image_id"], frame["caption_id"], strict=True),
                     frame["caption"], strict=True))
    expected = direct_bleu([texts[key] for key in keys],
                           [[text for ref_id, text in refs[image] if ref_id != caption_id]
                            for image, caption_id in keys])
    ours = np.array([values[key]["coco-bleu-4"] for key in keys])
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-12)
    # same text, other id: kept (text equality would have left these out)
    assert values[("im0", "im0#0")]["coco-bleu-4"] == pytest.approx(1.0)
    assert values[("im5", "im1#0")]["coco-bleu-4"] == pytest.approx(1.0)
    for result, aggregate in ((results[2], "flat"), (results[3], "mean")):
        data = frame.assign(pair=list(zip(frame["image_id"], frame["caption_id"],
                                          strict=True)))
        if aggregate == "mean":
            data = data.groupby("pair", sort=False)["score"].mean().reset_index()
        records = json.loads(result.output)["records"]
        for metric in ("coco-bleu-4", "cider-d"):
            x = data["pair"].map(lambda key, m=metric: values[key][m]).to_numpy()
            tau = stats.kendalltau(x, data["score"].to_numpy(), variant="b").statistic
            (record,) = [r for r in records
                         if r["metric"] == metric and r["statistic"] == "tau_b"]
            assert record["n"] == len(data) == (270 if aggregate == "flat" else 90)
            assert record["value"] == pytest.approx(tau, abs=1e-12), (metric, aggregate)
    # the export, one row per judgment with the pair's image and caption id, imports again
    exported = runner.invoke(app, [*db, "judgments", "export", "pairs", "--out",
                                   str(tmp_path / "out.csv")])
    assert exported.exit_code == 0, exported.output
    again = runner.invoke(app, [*db, "judgments", "import", str(tmp_path / "out.csv"),
                                "--name", "again", "--scale", "1-4"])
    assert again.exit_code == 0 and "90 captions" in again.output, again.output


def test_without_reference_ids_a_caption_is_its_reference_by_text(tmp_path):
    frame, refs = pair_dataset(tmp_path, reference_ids=False)
    db = ["--db", str(tmp_path / "text.db")]
    for step in (["judgments", "import", str(tmp_path / "pairs.csv"), "--name", "text",
                  "--scale", "1-4", "--references", str(tmp_path / "pair_refs.csv")],
                 ["metrics", "compute", "--judgments", "text", "--metric", "coco-bleu-4",
                  "--tokenizer", "ptb-python"]):
        result = runner.invoke(app, [*db, *step])
        assert result.exit_code == 0, result.output
    from storage import open_database

    engine = open_database(tmp_path / "text.db")
    values, signatures = stored_by_pair(engine, "text")
    engine.dispose()
    keys = list(values)
    texts = dict(zip(zip(frame["image_id"], frame["caption_id"], strict=True),
                     frame["caption"], strict=True))
    kept = [[text for _, text in refs[image] if text != texts[(image, caption_id)]]
            for image, caption_id in keys]
    excluded = sum(len(refs[image]) - len(k) for (image, _), k in zip(keys, kept,
                                                                      strict=True))
    assert excluded == 30 + 1 + 1  # im0#0 twice at im0, im1#0 also at im5
    assert "|self:excluded-exact|clean:none|" in signatures["coco-bleu-4"]
    expected = direct_bleu([texts[key] for key in keys], kept)
    ours = np.array([values[key]["coco-bleu-4"] for key in keys])
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-12)


def test_a_continuous_set_reports_interval_alpha_only(engine, tmp_path):
    """Averaged scores of several judges on 0-1: interval data. Krippendorff's alpha is the
    interval one (equal to the krippendorff package's); ordinal alpha is not reported, and
    the report says why. The correlations are scipy's on the real-valued scores."""
    import krippendorff

    rng = np.random.default_rng(11)
    rows = []
    for caption in range(12):
        quality = rng.uniform(0, 1)
        for judge in ("j1", "j2", "j3"):
            rows.append({"image_id": f"img{caption // 3}", "caption": f"caption {caption}",
                         "judge": judge,
                         "score": float(np.clip(quality + rng.normal(0, 0.15), 0, 1))})
    pd.DataFrame(rows).to_csv(tmp_path / "crowd.csv", index=False)
    import_judgments(engine, tmp_path / "crowd.csv", name="crowd", kind="score",
                     scale=Scale.parse("0-1", step=0), actor="t")
    captions, _ = judgment_caption_rows(engine, judgment_set(engine, "crowd").id)
    index = {row.text: row.caption_id for row in captions}
    metric = {caption_id: rng.normal() for caption_id in index.values()}
    store_metric_scores(engine, "good", SIGNATURES["good"], list(metric),
                        list(metric.values()), JudgmentMetricScore)
    report = build_judgment_report(engine, "crowd", bootstrap=50)
    frame = pd.DataFrame(rows)
    assert len(set(frame["score"])) > 30  # real numbers, nearly all of them different
    matrix = frame.assign(caption_id=frame["caption"].map(index)).pivot_table(
        index="judge", columns="caption_id", values="score").to_numpy()
    assert list(report.agreement["statistic"]) == ["alpha_interval"]
    assert report.agreement["value"].iloc[0] == pytest.approx(krippendorff.alpha(
        reliability_data=matrix, level_of_measurement="interval"))
    assert "ordinal alpha (ranked categories) is not reported" in report.header["agreement"]
    assert "interval Krippendorff's alpha only" in judgment_text(report)
    assert report.header["scale"] == "0-1 (continuous)"
    x = frame["caption"].map(index).map(metric).to_numpy()
    tau_b = report.records.set_index("statistic").loc["tau_b", "value"]
    assert tau_b == pytest.approx(stats.kendalltau(x, frame["score"], variant="b").statistic,
                                  abs=1e-12)
