"""`thumb retrieval …` on the sample project: evaluate, caching, bad input, relevance,
compare."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from metrics.retrieval.positives import eccv_caption_available, shipped_positive_set
from tests.conftest import SAMPLE_CSV, database_dump
from thumb_tui.cli import app

runner = CliRunner()


@pytest.fixture
def project(tmp_path: Path) -> tuple[str, Path]:
    db = str(tmp_path / "r.db")
    imported = runner.invoke(app, ["--db", db, "import", str(SAMPLE_CSV), "--allow-outside-images"])
    assert imported.exit_code == 0, imported.output
    return db, tmp_path


def _keys(db: str) -> tuple[list[str], list[str]]:
    from storage import open_database
    from storage.retrieval import project_captions

    captions = project_captions(open_database(db))
    return sorted(set(captions["image_key"])), captions["caption_key"].tolist()


def _lists(db: str, folder: Path, seed: int) -> tuple[Path, Path]:
    """Random ranked lists over the project's images and captions."""
    images, captions = _keys(db)
    rng = np.random.default_rng(seed)
    i2t = {i: [captions[j] for j in rng.permutation(len(captions))] for i in images}
    t2i = {c: [images[j] for j in rng.permutation(len(images))] for c in captions}
    paths = folder / f"i2t-{seed}.json", folder / f"t2i-{seed}.json"
    for path, lists in zip(paths, (i2t, t2i), strict=True):
        path.write_text(json.dumps(lists), encoding="utf-8")
    return paths


def _evaluate(db: str, *args: str):
    return runner.invoke(app, ["--db", db, "retrieval", "evaluate", *args])


def test_evaluate_writes_tidy_records_and_never_computes_twice(project, monkeypatch):
    db, folder = project
    i2t, t2i = _lists(db, folder, 0)
    out = folder / "r.json"
    args = ["--name", "random", "--i2t", str(i2t), "--t2i", str(t2i), "--positives",
            "project", "--bootstrap", "100", "--format", "json", "--out", str(out)]
    first = _evaluate(db, *args)
    assert first.exit_code == 0, first.output
    records = json.loads(out.read_text())
    assert {tuple(sorted(r)) for r in records} == {tuple(sorted(
        ["model", "positives", "metric", "direction", "k", "m", "value", "ci_low", "ci_high",
         "n", "signature", "ci_warning"]))}
    keyed = {(r["metric"], r["direction"], r["k"]): r for r in records}
    assert keyed[("recall@k", "i2t", 5)]["n"] == 15 and keyed[("recall@k", "t2i", 5)]["n"] == 60
    assert keyed[("rsum", "both", None)]["value"] == pytest.approx(sum(
        keyed[("recall@k", d, k)]["value"] for d in ("i2t", "t2i") for k in (1, 5, 10)))
    assert "1 set(s) computed" in first.output

    import reports.retrieval

    def no_computing(*_args, **_kwargs):
        raise AssertionError("computed again")

    monkeypatch.setattr(reports.retrieval, "_compute", no_computing)
    second = _evaluate(db, *args, "--force")  # the same --out again: replaced
    assert second.exit_code == 0, second.output
    assert "0 set(s) computed, 1 read back" in second.output
    assert json.loads(out.read_text()) == records
    # the table and Markdown name the settings of their values too, as the JSON does
    signature = records[0]["signature"]
    for fmt in ("table", "md"):
        shown = _evaluate(db, *args[:-4], "--format", fmt).output
        assert "ignatures:" in shown
        assert "".join(signature.split()) in "".join(shown.split()).replace("\\|", "|")


@pytest.mark.slow
def test_the_same_name_with_other_files_needs_replace(project):
    db, folder = project
    first, second = _lists(db, folder, 1), _lists(db, folder, 2)
    base = ["--name", "m", "--positives", "project", "--bootstrap", "0"]
    assert _evaluate(db, *base, "--i2t", str(first[0]), "--t2i", str(first[1])).exit_code == 0
    refused = _evaluate(db, *base, "--i2t", str(second[0]), "--t2i", str(second[1]))
    assert refused.exit_code == 2 and "--replace" in refused.output
    replaced = _evaluate(db, *base, "--i2t", str(second[0]), "--t2i", str(second[1]),
                         "--replace", "--format", "json")
    assert replaced.exit_code == 0, replaced.output


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda lists: lists["img01"].append("nope/none"),
         "query 'img01': caption id 'nope/none' is not one of the captions of project"),
        (lambda lists: lists["img01"].__setitem__(1, lists["img01"][0]), "appears twice"),
        (lambda lists: lists.pop("img02"),
         "i2t-3.json: the i2t rankings have no list for 1 of the 15 queries of project"),
    ],
)
def test_bad_rankings_end_in_one_line_and_change_nothing(project, mutate, message):
    from storage import open_database

    db, folder = project
    i2t, t2i = _lists(db, folder, 3)
    lists = json.loads(i2t.read_text())
    mutate(lists)
    i2t.write_text(json.dumps(lists), encoding="utf-8")
    before = database_dump(open_database(db))
    result = _evaluate(db, "--name", "bad", "--i2t", str(i2t), "--t2i", str(t2i),
                       "--positives", "project")
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and message in result.output, result.output
    assert database_dump(open_database(db)) == before


@pytest.mark.slow
@pytest.mark.parametrize(
    ("i2t_bytes", "message"),
    [
        (b'{\n"1": [10, 11],\n"2": [11, 11]\n}', "i2t.json:3: query 2: item 11 appears twice"),
        (b'{\n"1": [10, 11],\n"2": [11 10]\n}', "i2t.json:3: not valid JSON"),
        (b'{\n"1": [10, 11],\n"2": [11, 1\xff0]\n}',
         "i2t.json:3: invalid UTF-8 (byte 0xff at column 12)"),
        (b'{\n"1": [10, 11],\n"1": [11, 10]\n}', "i2t.json:2: query '1' appears twice"),
        (b'{\n"1": [10, 11],\n"2": []\n}', "i2t.json:3: query 2: the ranked list is empty"),
    ],
)
def test_bad_integer_rankings_end_in_one_line(tmp_path, i2t_bytes, message):
    """Integer rankings take the vectorised reader; its refusals still name file and
    line, exit 2 and leave the database as it was."""
    from storage import open_database

    positives = tmp_path / "gt"
    positives.mkdir()
    (positives / "gt_image_to_caption.json").write_text('{"1": [10], "2": [11]}')
    (positives / "gt_caption_to_image.json").write_text('{"10": [1], "11": [2]}')
    i2t, t2i = tmp_path / "i2t.json", tmp_path / "t2i.json"
    t2i.write_text('{"10": [1, 2], "11": [2, 1]}')
    db = str(tmp_path / "ints.db")
    i2t.write_text('{"1": [10, 11], "2": [11, 10]}')
    good = _evaluate(db, "--name", "good", "--i2t", str(i2t), "--t2i", str(t2i),
                     "--positives", str(positives), "--bootstrap", "0", "--format", "json")
    assert good.exit_code == 0, good.output
    i2t.write_bytes(i2t_bytes)
    before = database_dump(open_database(db))
    result = _evaluate(db, "--name", "bad", "--i2t", str(i2t), "--t2i", str(t2i),
                       "--positives", str(positives))
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and message in result.output, result.output
    assert database_dump(open_database(db)) == before


def test_a_matrix_of_the_wrong_shape_is_refused(project):
    db, folder = project
    path = folder / "m.npz"
    images, captions = _keys(db)
    np.savez(path, scores=np.zeros((len(images), len(captions) - 1)),
             image_ids=np.array(images), caption_ids=np.array(captions))
    result = _evaluate(db, "--name", "m", "--scores", str(path), "--positives", "project")
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {path}: scores has shape (15, 59), expected "
                                    "(15, 60)")


@pytest.mark.slow
def test_relevance_then_semantic_metrics_then_compare(project):
    db, folder = project
    relevance = folder / "rel.npz"
    built = runner.invoke(app, ["--db", db, "retrieval", "relevance", "--out", str(relevance),
                                "--tokenizer", "ptb-python"])
    assert built.exit_code == 0, built.output
    assert built.output.startswith("wrote") and "15 images x 60 captions" in built.output
    again = runner.invoke(app, ["--db", db, "retrieval", "relevance", "--out", str(relevance),
                                "--tokenizer", "ptb-python"])
    assert "kept (same signature)" in again.output
    phi = np.load(relevance)
    for seed, name in ((4, "noise"), (5, "[red]tricky[/red] | name")):
        rng = np.random.default_rng(seed)
        scores = rng.random(phi["values"].shape) + (phi["values"] if seed == 4 else 0)
        path = folder / f"{seed}.npz"
        np.savez(path, scores=scores, image_ids=phi["image_ids"],
                 caption_ids=phi["caption_ids"])
        result = _evaluate(db, "--name", name, "--scores", str(path), "--positives",
                           "project", "--relevance", str(relevance), "--bootstrap", "100")
        assert result.exit_code == 0, result.output
    table = runner.invoke(app, ["--db", db, "retrieval", "compare"])
    assert table.exit_code == 0, table.output
    assert "[red]tricky[/red] | name" in table.output  # printed literally, not as markup
    assert "only 2 models are compared, so every Kendall τ-b is +1 or -1" in table.stderr
    markdown = runner.invoke(app, ["--db", db, "retrieval", "compare", "--format", "md"])
    assert "[red]tricky[/red] \\| name" in markdown.output  # the | cannot end the cell
    compared = runner.invoke(app, ["--db", db, "retrieval", "compare", "--format", "json"])
    payload = json.loads(compared.stdout)  # the warning is on stderr
    ranks = {(r["model"], r["metric"]): r["rank"] for r in payload["ranks"]}
    assert ranks[("noise", "cider-d ncs@5")] == 1.0  # the model that follows φ wins
    assert {"metric", "project map@r", "cider-d/no-gt ncs@10"} <= set(
        payload["kendall_tau_b"][0])
    assert payload["unranked"] == []
    # a third model with Eq. 5 NCS: its NCS rows have no partner, and are said so
    third = _evaluate(db, "--name", "eq5-model", "--scores", str(folder / "4.npz"),
                      "--positives", "project", "--relevance", str(relevance),
                      "--bootstrap", "0", "--ncs-averaging", "eq5")
    assert third.exit_code == 0, third.output
    table = runner.invoke(app, ["--db", db, "retrieval", "compare"])
    assert "not ranked, scored for one model only: cider-d ncs@1 (eq5) (only " \
        "eq5-model)" in " ".join(table.stderr.split())
    payload = json.loads(runner.invoke(app, ["--db", db, "retrieval", "compare", "--format",
                                             "json"]).stdout)
    assert {"metric": "cider-d ncs@5 (eq5)", "model": "eq5-model"} in payload["unranked"]


def test_ncs_averaging_is_part_of_the_signature():
    from metrics.retrieval.evaluation import ncs_label_suffix
    from reports.retrieval import Settings, Target

    semantic = Target("semantic", "cider-d", "abc")
    positives = Target("positives", "project", "abc")
    authors, eq5, ratio = Settings(), Settings(ncs_averaging="eq5"), Settings(
        ncs_averaging="ratio")
    assert "|ncs:authors|" in authors.signature(semantic)
    assert "|ncs:eq5|" in eq5.signature(semantic)
    assert "|ncs:ratio|" in ratio.signature(semantic)
    # Eq. 5's earlier name is stored under the current one
    assert Settings(ncs_averaging="per-query").signature(semantic) == eq5.signature(semantic)
    assert authors.signature(positives) == eq5.signature(positives)  # no NCS there
    with pytest.raises(ValueError, match="NCS averaging"):
        Settings(ncs_averaging="mean")
    # stored signatures: the default has no label, an earlier name reads as the current
    # one, and one stored before the choice existed was a ratio of sums
    assert ncs_label_suffix("ncs@k", authors.signature(semantic)) == ""
    assert ncs_label_suffix("ncs@k", "retrieval|positives:x#1|k:5|m:1|ncs:per-query") == "eq5"
    assert ncs_label_suffix("ncs@k", "retrieval|positives:x#1|k:5|m:1") == "ratio"
    assert ncs_label_suffix("sr@k", "retrieval|positives:x#1|k:5|m:1|ncs:eq5") == ""


def test_ncs_averaging_option_stores_and_labels_each_averaging(project):
    db, folder = project
    relevance = folder / "rel.npz"
    built = runner.invoke(app, ["--db", db, "retrieval", "relevance", "--out", str(relevance),
                                "--tokenizer", "ptb-python"])
    assert built.exit_code == 0, built.output
    i2t, t2i = _lists(db, folder, 8)
    base = ["--name", "m", "--i2t", str(i2t), "--t2i", str(t2i), "--relevance",
            str(relevance), "--k", "5", "--sr-m", "1", "--bootstrap", "100"]
    results = {}
    for averaging in (None, "eq5", "authors", "per-query", "ratio"):
        out = folder / f"{averaging}.json"
        extra = [] if averaging is None else ["--ncs-averaging", averaging]
        result = _evaluate(db, *base, *extra, "--format", "json", "--out", str(out),
                           "--force")
        assert result.exit_code == 0, result.output
        computed = result.output.split(":")[1].strip().split()[0]
        results[averaging] = (computed, json.loads(out.read_text()))
    # the default is the authors' code (read back as such); eq5 and ratio are stored
    # apart; per-query is eq5's earlier name, read back from eq5's results
    assert {a: c for a, (c, _) in results.items()} == {
        None: "1", "eq5": "1", "authors": "0", "per-query": "0", "ratio": "1"}
    ncs = {a: {(r["direction"], r["k"]): r for r in results[a][1] if r["metric"] == "ncs@k"}
           for a in ("authors", "eq5", "ratio")}
    for averaging, records in ncs.items():
        assert all(f"|ncs:{averaging}|" in r["signature"] for r in records.values())
    assert len({ncs[a][("t2i", 5)]["value"] for a in ncs}) == 3
    table = _evaluate(db, *base, "--ncs-averaging", "eq5", "--format", "md")
    assert "| ncs@5 eq5 |" in table.output and "| sr@5 m=1 |" in table.output
    from reports.retrieval import metric_label  # `compare`'s labels tell them apart
    from storage import open_database
    from storage.retrieval import results_frame

    labels = {metric_label(r) for r in results_frame(open_database(db)).itertuples()}
    assert {"cider-d ncs@5", "cider-d ncs@5 (eq5)", "cider-d ncs@5 (ratio)"} <= labels
    refused = _evaluate(db, *base, "--ncs-averaging", "mean")
    assert refused.exit_code == 2
    assert "--ncs-averaging: NCS averaging must be authors, eq5 or ratio, not 'mean'" in \
        " ".join(refused.output.split())
    helped = runner.invoke(app, ["retrieval", "evaluate", "--help"], env={"COLUMNS": "200"})
    text = " ".join(helped.output.replace("│", " ").split())
    assert "--ncs-averaging" in text and "authors (the default; as the authors' public " \
        "code" in text and "eq5 (the paper's Eq. 5" in text


@pytest.mark.slow
@pytest.mark.skipif(not eccv_caption_available(), reason="eccv-caption is not installed")
def test_shipped_sets_work_on_ids_alone(tmp_path):
    coco = shipped_positive_set("coco-5k")
    images, captions = list(coco.image_to_captions), list(coco.caption_to_images)
    rng = np.random.default_rng(0)
    i2t = {i: [captions[j] for j in rng.choice(len(captions), 30, replace=False)]
           for i in images}
    t2i = {c: [images[j] for j in rng.choice(len(images), 30, replace=False)] for c in captions}
    paths = tmp_path / "i2t.json", tmp_path / "t2i.json"
    for path, lists in zip(paths, (i2t, t2i), strict=True):
        path.write_text(json.dumps(lists))
    result = _evaluate(str(tmp_path / "ids.db"), "--name", "ids", "--i2t", str(paths[0]),
                       "--t2i", str(paths[1]), "--positives", "eccv", "--positives", "cxc",
                       "--bootstrap", "0", "--format", "json")
    assert result.exit_code == 0, result.output
    records = json.loads(result.output)
    assert {r["positives"] for r in records} == {"eccv", "cxc"}
    eccv = {(r["metric"], r["direction"], r["k"]): r for r in records if r["positives"] == "eccv"}
    assert eccv[("map@r", "i2t", None)]["n"] == 1261 and eccv[("map@r", "t2i", None)]["n"] == 1332
    bad = dict(i2t)
    bad[images[0]] = [*bad[images[0]][:-1], 123456789]
    paths[0].write_text(json.dumps(bad))
    refused = _evaluate(str(tmp_path / "ids.db"), "--name", "ids2", "--i2t", str(paths[0]),
                        "--t2i", str(paths[1]), "--positives", "eccv")
    assert refused.exit_code == 2 and (f"i2t.json:1: query {images[0]}: caption id 123456789 "
                                       "is not one of the captions of eccv") in refused.output


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_the_report_has_a_retrieval_section(tmp_path, fmt):
    from metrics.registry import MetricOptions
    from reports.scoring import compute_metrics
    from reports.thumb.render import write_report
    from reports.thumb.tables import build_report
    from storage import import_captions, open_database

    db = str(tmp_path / "rep.db")
    engine = open_database(db)
    import_captions(engine, SAMPLE_CSV, actor="t", allow_outside_images=True)
    import_captions(engine, SAMPLE_CSV.parent / "example_ratings.csv", actor="t",
                    allow_outside_images=True)
    compute_metrics(engine, ["bleu"], MetricOptions(tokenizer="ptb-python"))
    i2t, t2i = _lists(db, tmp_path, 6)
    result = _evaluate(db, "--name", "<b>bold</b>", "--i2t", str(i2t), "--t2i", str(t2i),
                       "--positives", "project", "--bootstrap", "100")
    assert result.exit_code == 0, result.output
    text = write_report(build_report(engine, bootstrap=20), tmp_path / "out", fmt).read_text()
    if fmt == "json":
        records = json.loads(text)["retrieval"]
        assert {"model", "positives", "metric", "direction", "k", "value", "ci_low",
                "ci_high", "n"} <= set(records[0])
        assert {r["metric"] for r in records} >= {"recall@k", "map@r", "rsum"}
    else:
        assert "Retrieval" in text and "retrieval|positives:project#" in text
        assert "<b>bold</b>" not in text  # escaped for Markdown and HTML


def test_agreement_of_binary_and_graded_relevance_with_human_grades(project):
    from scipy import stats

    db, folder = project
    relevance = folder / "rel.npz"
    assert runner.invoke(app, ["--db", db, "retrieval", "relevance", "--out", str(relevance),
                               "--tokenizer", "ptb-python"]).exit_code == 0
    phi = np.load(relevance)
    images, captions = phi["image_ids"].tolist(), phi["caption_ids"].tolist()
    truth = {(str(i), str(c)) for i, c in phi["ground_truth"]}
    rng = np.random.default_rng(0)
    rows, graded, binary, grades = [], [], [], []
    for pair in rng.choice(len(images) * len(captions), 150, replace=False):  # one grade
        i, c = divmod(int(pair), len(captions))  # per pair
        grade = round(float(phi["values"][i, c]) + rng.normal(0, 0.5), 3)
        rows.append(f"{images[i]},{captions[c]},{grade}")
        graded.append(phi["values"][i, c])
        binary.append(float((images[i], captions[c]) in truth))
        grades.append(grade)
    judgments = folder / "judgments.csv"
    judgments.write_text("image_id,caption_id,grade\n" + "\n".join(rows) + "\n")
    result = runner.invoke(app, ["--db", db, "retrieval", "agreement", "--judgments",
                                 str(judgments), "--positives", "project", "--relevance",
                                 str(relevance), "--bootstrap", "200", "--format", "json"])
    assert result.exit_code == 0, result.output
    table = {(r["scorer"], r["method"]): r for r in json.loads(result.output)}
    pearson = table[("cider-d (graded)", "pearson")]
    assert pearson["r"] == pytest.approx(stats.pearsonr(graded, grades).statistic, abs=1e-6)
    assert pearson["ci_low"] < pearson["r"] < pearson["ci_high"] and pearson["n"] == 150
    assert table[("project (binary)", "kendall-b")]["r"] == pytest.approx(
        stats.kendalltau(binary, grades).statistic, abs=1e-9)
    for scorer in ("project (binary)", "cider-d (graded)"):  # Kendall's tau has a BCa CI
        tau = table[(scorer, "kendall-b")]
        assert tau["ci_low"] <= tau["r"] <= tau["ci_high"] and tau["ci_warning"] is None
    shown = runner.invoke(app, ["--db", db, "retrieval", "agreement", "--judgments",
                                str(judgments), "--relevance", str(relevance),
                                "--bootstrap", "100", "--format", "md"]).output
    assert "BCa" in shown and shown.count("| kendall-b | ") == 1
    assert all("[" in line for line in shown.splitlines() if line.startswith("| cider-d"))
    judgments.write_text("image_id,caption_id,grade\nimg01,img01/Human,high\n")
    bad = runner.invoke(app, ["--db", db, "retrieval", "agreement", "--judgments",
                              str(judgments), "--relevance", str(relevance)])
    assert bad.exit_code == 2 and f"{judgments}:2:" in bad.output


def test_pmrp_from_instances_equals_pmrp_from_the_same_labels_in_a_directory(tmp_path):
    from metrics.retrieval.positives import (
        plausible_matches,
        positive_set_from_pairs,
        read_coco_presence,
        write_positive_dir,
    )

    rng = np.random.default_rng(0)
    images = list(range(100, 160))
    captions = list(range(1000, 1300))
    pairs = [(images[j // 5], c) for j, c in enumerate(captions)]
    write_positive_dir(positive_set_from_pairs("own", pairs), tmp_path / "own")
    labels = {i: [int(c) for c in rng.choice(range(1, 81), 2, replace=False)] if i % 3
              else [1] for i in images}
    instances = tmp_path / "instances.json"
    instances.write_text(json.dumps({
        "images": [{"id": i} for i in images],
        "categories": [{"id": c} for c in range(1, 81)],
        "annotations": [{"image_id": i, "category_id": c} for i, cs in labels.items()
                        for c in cs]}))
    derived = plausible_matches(read_coco_presence(instances),
                                positive_set_from_pairs("own", pairs).caption_to_images, 1)
    write_positive_dir(derived, tmp_path / "pm", prefix="pm")
    i2t = {i: [int(c) for c in rng.permutation(captions)] for i in images}
    t2i = {c: [int(i) for i in rng.permutation(images)] for c in captions}
    for name, lists in (("i2t", i2t), ("t2i", t2i)):
        (tmp_path / f"{name}.json").write_text(json.dumps(lists))
    db = str(tmp_path / "pm.db")
    common = ["--i2t", str(tmp_path / "i2t.json"), "--t2i", str(tmp_path / "t2i.json"),
              "--bootstrap", "0", "--format", "json", "--pmrp-cap", "5"]
    from_instances = _evaluate(db, "--name", "x", *common, "--positives",
                               str(tmp_path / "own"), "--pm-from", str(instances),
                               "--zeta", "0,1")
    assert from_instances.exit_code == 0, from_instances.output
    from_dir = _evaluate(db, "--name", "y", *common, "--pm", str(tmp_path / "pm"))
    assert from_dir.exit_code == 0, from_dir.output
    pmrp = {(r["positives"], r["direction"]): r["value"]
            for r in json.loads(from_instances.output) if r["metric"] == "pmrp"}
    assert {p for p, _ in pmrp} == {"pm-zeta0", "pm-zeta1"}
    for record in json.loads(from_dir.output):
        assert record["value"] == pytest.approx(pmrp[("pm-zeta1", record["direction"])])


def test_a_positive_set_stored_by_thumb_match_is_evaluated_by_name(project):
    from storage import open_database
    from storage.match import pair_maps, store_positive_set

    db, folder = project
    images, captions = _keys(db)
    extra = [(image, caption) for image in images[:5] for caption in captions[:8]]
    store_positive_set(open_database(db), "verified", pair_maps(extra), source="test",
                       actor="t")
    i2t, t2i = _lists(db, folder, 7)
    result = _evaluate(db, "--name", "m", "--i2t", str(i2t), "--t2i", str(t2i),
                       "--positives", "verified", "--bootstrap", "0", "--format", "json")
    assert result.exit_code == 0, result.output
    records = {(r["metric"], r["direction"], r["k"]): r for r in json.loads(result.output)}
    assert records[("map@r", "i2t", None)]["n"] == 5
    assert records[("map@r", "t2i", None)]["n"] == 8


def _strict_json(text: str) -> object:
    """JSON as every parser reads it: `NaN` or `Infinity` (Python's extension) fail."""
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_compare_ranks_only_results_on_the_same_contents_of_a_set(project):
    db, folder = project
    old = {seed: _lists(db, folder, seed) for seed in (10, 11)}
    for name, seed in (("A", 10), ("B", 11)):
        i2t, t2i = old[seed]
        assert _evaluate(db, "--name", name, "--i2t", str(i2t), "--t2i", str(t2i),
                         "--positives", "project", "--bootstrap", "0").exit_code == 0
    more = folder / "more.csv"
    more.write_text("image_id,system,caption\nimg01,NewSys,A new caption.\n")
    assert runner.invoke(app, ["--db", db, "import", str(more)]).exit_code == 0
    i2t, t2i = _lists(db, folder, 12)  # over the 61 captions the project has now
    for name in ("C", "D"):
        assert _evaluate(db, "--name", name, "--i2t", str(i2t), "--t2i", str(t2i),
                         "--positives", "project", "--bootstrap", "0").exit_code == 0
    compared = runner.invoke(app, ["--db", db, "retrieval", "compare", "--format", "json"])
    assert compared.exit_code == 0, compared.output
    payload = _strict_json(compared.stdout)
    models_of: dict[str, set[str]] = {}
    for record in payload["ranks"]:
        models_of.setdefault(record["metric"], set()).add(record["model"])
    assert {frozenset(models) for models in models_of.values()} == {
        frozenset("AB"), frozenset("CD")}  # never A or B beside C or D
    versions = payload["versions"]["project"]
    assert [v["models"] for v in versions] == [["A", "B"], ["C", "D"]]
    assert all(v["label"].startswith("project (content:") for v in versions)
    labels = [v["label"] for v in versions]
    assert all(sum(m.startswith(f"{label} ") for label in labels) == 1 for m in models_of)
    assert "ranked apart" in compared.stderr and "C, D" in compared.stderr
    ranked = runner.invoke(app, ["--db", db, "retrieval", "compare", "--direction", "i2t"])
    assert "project recall@1 " not in ranked.stdout  # no row without its version


def test_a_model_not_scored_under_a_metric_is_a_dash_and_json_null_never_nan(project):
    db, folder = project
    # A and B rank alike: recall@10 ties them, so its τ with every metric is undefined
    for name, seed, ks in (("A", 20, "1,5,10"), ("B", 20, "1,5,10"), ("C", 22, "1,5")):
        i2t, t2i = _lists(db, folder, seed)
        assert _evaluate(db, "--name", name, "--i2t", str(i2t), "--t2i", str(t2i),
                         "--positives", "project", "--k", ks, "--bootstrap", "0"
                         ).exit_code == 0
    compared = runner.invoke(app, ["--db", db, "retrieval", "compare", "--format", "json"])
    payload = _strict_json(compared.stdout)
    ranked = {(r["model"], r["metric"]) for r in payload["ranks"]}
    assert ("A", "project recall@10") in ranked and ("C", "project recall@10") not in ranked
    assert all(r["value"] is not None and r["rank"] is not None for r in payload["ranks"])
    tau = {row["metric"]: row for row in payload["kendall_tau_b"]}
    assert tau["project recall@10"]["project recall@1"] is None
    for fmt in ("table", "md", "latex"):
        shown = runner.invoke(app, ["--db", db, "retrieval", "compare", "--format", fmt])
        assert shown.exit_code == 0, shown.output
        assert "nan" not in shown.stdout.lower()
        row = next(line for line in shown.stdout.splitlines() if "recall@10" in line)
        assert row.rstrip(" |\\").endswith("—"), row  # C's cell: a dash alone


def test_agreement_reports_every_problem_of_the_judgments_at_its_line(project):
    db, folder = project
    judgments = folder / "p.csv"
    judgments.write_text("image_id,caption_id,grade\n"
                         "img01,img01/Human,5\n"
                         "img01,img01/Human,4\n"  # the same pair again
                         "imgXX,img01/Human,3\n"  # no such image
                         "img02,img02/Nobody,3\n"  # no such caption
                         "img02,img02/Human,high\n"
                         "img03,img03/Human,\n"
                         ",img04/Human,1\n")
    result = runner.invoke(app, ["--db", db, "retrieval", "agreement", "--judgments",
                                 str(judgments), "--positives", "project"])
    assert result.exit_code == 2
    assert "nothing was computed" in result.output
    for line, message in ((3, "the pair ('img01', 'img01/Human') is graded already at "
                              "line 2"),
                          (4, "image 'imgXX' is not in project"),
                          (5, "caption 'img02/Nobody' is not in project"),
                          (6, "grade must be a number, not 'high'"),
                          (7, "grade is missing"),
                          (8, "image_id is missing")):
        assert f"{judgments}:{line}: {message}" in result.output, result.output
    assert f"{judgments}:2:" not in result.output
    judgments.write_text("image_id,caption_id,grade\nimg01,img01/Human,5\n"
                         "img02,img02/Human,2\nimg02,img01/Human,1\n")
    good = runner.invoke(app, ["--db", db, "retrieval", "agreement", "--judgments",
                               str(judgments), "--positives", "project", "--bootstrap", "0",
                               "--format", "json"])
    assert good.exit_code == 0, good.output
    assert {r["n"] for r in _strict_json(good.stdout)} == {3}


def test_judged_ids_must_be_known_to_a_positives_folder_too(tmp_path):
    from metrics.retrieval.positives import positive_set, write_positive_dir
    from reports.retrieval import read_judgments, resolve_positives
    from storage.errors import InputError

    write_positive_dir(positive_set("mine", {1: [10, 11]}, {10: [1], 11: [1]}),
                       tmp_path / "p")
    targets = resolve_positives(None, [str(tmp_path / "p")])
    judgments = tmp_path / "j.csv"
    judgments.write_text("image_id,caption_id,grade\n1,10,3\n2,10,1\n1,12,0\n")
    with pytest.raises(InputError) as refused:
        read_judgments(judgments, targets)
    assert [(p.line, p.message) for p in refused.value.problems] == [
        (3, "image 2 is not in mine"), (4, "caption 12 is not in mine")]
    assert read_judgments(judgments).shape == (3, 3)  # no target: any id
