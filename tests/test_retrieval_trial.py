"""`thumb retrieval` defects found by a new-user trial: plausible matches over the whole
COCO 5K test split, content digests that tell shipped sets apart, ranking-file errors
that name the file and line, the terminal table, `compare` and its plot, negative
relevance."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from metrics.retrieval.positives import eccv_caption_available
from tests.conftest import SAMPLE_CSV
from thumb_tui.cli import app

runner = CliRunner()
needs_eccv_caption = pytest.mark.skipif(not eccv_caption_available(),
                                        reason="the eccv-caption package is not installed")


def _evaluate(db: Path, *args: object):
    return runner.invoke(app, ["--db", str(db), "retrieval", "evaluate",
                               *map(str, args)])


# --- plausible matches (PMRP, Chun et al. 2022) ----------------------------------------

def _coco_5k_captions() -> dict[int, int]:
    """Each COCO 5K test caption with its own image, read from the package's file."""
    import eccv_caption

    data = Path(eccv_caption.__file__).parent / "data" / "original_caption_to_image.json"
    return {int(c): images[0] for c, images in json.loads(data.read_text()).items()}


@pytest.mark.slow  # the whole COCO 5K split: 9 s
@needs_eccv_caption
def test_pmrp_from_instances_counts_every_coco_5k_caption_whatever_the_sets_order(
        tmp_path: Path):
    """PMRP (ECCV Caption, Sec. 4): an image and a caption are plausible matches when
    the caption's own image and the image have 80-class presence vectors that differ in
    at most ζ classes; R-Precision over those matches, here with R = |matches| (no cap),
    as the eccv-caption package computes it (a list shorter than R: over its length).
    Every one of the 25,000 test captions is a candidate: the matches must not depend on
    which positive sets are asked for, nor on their order."""
    caption_image = _coco_5k_captions()
    images = sorted(set(caption_image.values()))
    rng = np.random.default_rng(1)
    labels = {image: rng.choice(12, size=3, replace=False) + 1 for image in images}
    instances = tmp_path / "instances.json"
    instances.write_text(json.dumps({
        "images": [{"id": i} for i in images],
        "categories": [{"id": c} for c in range(1, 81)],
        "annotations": [{"image_id": i, "category_id": int(c)} for i, cs in labels.items()
                        for c in cs]}))
    vector = {image: frozenset(cs.tolist()) for image, cs in labels.items()}
    captions_of: dict[int, list[int]] = {}
    for caption, image in caption_image.items():
        captions_of.setdefault(image, []).append(caption)
    # each image ranks its own five captions, then five of another image; each caption
    # its own image, then four others
    i2t = {i: captions_of[i] + captions_of[images[(n + 1) % len(images)]]
           for n, i in enumerate(images)}
    t2i = {c: [i, *(images[(images.index(i) + k) % len(images)] for k in range(1, 5))]
           for c, i in list(caption_image.items())}
    (tmp_path / "i2t.json").write_text(json.dumps(i2t))
    (tmp_path / "t2i.json").write_text(json.dumps(t2i))

    same_vector: dict[frozenset, list[int]] = {}
    for image in images:
        same_vector.setdefault(vector[image], []).append(image)

    from eccv_caption._metrics import rprecision as precision  # the package's PMRP step

    expected_i2t = np.mean([precision(i2t[i], {c for j in same_vector[vector[i]]
                                               for c in captions_of[j]}) for i in images])
    expected_t2i = np.mean([precision(t2i[c], set(same_vector[vector[i]]))
                            for c, i in caption_image.items()])

    found = {}
    for order in (("eccv", "coco-5k"), ("coco-5k", "eccv")):
        db = tmp_path / f"{order[0]}.db"
        result = _evaluate(db, "--name", "m", "--i2t", tmp_path / "i2t.json", "--t2i",
                           tmp_path / "t2i.json", "--positives", order[0], "--positives",
                           order[1], "--pm-from", instances, "--zeta", "0", "--pmrp-cap",
                           "none", "--bootstrap", "0", "--format", "json")
        assert result.exit_code == 0, result.output
        found[order] = {r["direction"]: r for r in json.loads(result.output)
                        if r["metric"] == "pmrp"}
    for records in found.values():
        assert records["i2t"]["n"] == 5000 and records["t2i"]["n"] == 25000
        assert records["i2t"]["value"] == pytest.approx(expected_i2t, abs=1e-12)
        assert records["t2i"]["value"] == pytest.approx(expected_t2i, abs=1e-12)
    first, second = found.values()
    assert first["i2t"]["signature"] == second["i2t"]["signature"]


@needs_eccv_caption
def test_shipped_sets_have_content_digests_of_their_own():
    """Two sets that hold different pairs never share a signature (a stored result is
    read back by its signature)."""
    from reports.retrieval import Settings, resolve_positives

    targets = resolve_positives(None, ["eccv", "cxc", "coco-5k", "coco-1k"])
    signatures = [Settings().signature(target) for target in targets]
    digests = {s.split("|")[1].rpartition("#")[2] for s in signatures}
    assert len(digests) == 4, signatures


# --- the sample project ---------------------------------------------------------------

@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The sample project's database; the folder holds it."""
    db = tmp_path / "p.db"
    imported = runner.invoke(app, ["--db", str(db), "import", str(SAMPLE_CSV),
                                   "--allow-outside-images"])
    assert imported.exit_code == 0, imported.output
    return db


def _ids() -> tuple[list[str], list[str]]:
    """The sample project's image ids and caption ids (`IMAGE/SYSTEM`), from its CSV."""
    import csv

    with open(SAMPLE_CSV, encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return (sorted({r["image_id"] for r in rows}),
            [f"{r['image_id']}/{r['system']}" for r in rows])


def _write_lists(folder: Path, seed: int = 0) -> tuple[dict, dict]:
    """Random ranked lists over the sample project, one query per line of i2t.json and
    t2i.json (line n + 2 holds the n-th query: line 1 is `{`)."""
    images, captions = _ids()
    rng = np.random.default_rng(seed)
    i2t = {i: [captions[j] for j in rng.permutation(len(captions))] for i in images}
    t2i = {c: [images[j] for j in rng.permutation(len(images))] for c in captions}
    for name, lists in (("i2t", i2t), ("t2i", t2i)):
        rows = ",\n".join(f"{json.dumps(q)}: {json.dumps(items)}" for q, items in lists.items())
        (folder / f"{name}.json").write_text("{\n" + rows + "\n}\n", encoding="utf-8")
    return i2t, t2i


def _error(result) -> str:
    assert result.exit_code == 2, result.output
    return result.output.strip().splitlines()[-1]


def test_an_unknown_item_names_the_file_the_query_and_its_line(project: Path):
    folder = project.parent
    i2t, _ = _write_lists(folder)
    images = list(i2t)
    i2t[images[6]][3] = f"{images[6]}/NoSuchSystem"
    rows = ",\n".join(f"{json.dumps(q)}: {json.dumps(items)}" for q, items in i2t.items())
    (folder / "i2t.json").write_text("{\n" + rows + "\n}\n", encoding="utf-8")
    message = _error(_evaluate(project, "--name", "m", "--i2t", folder / "i2t.json", "--t2i",
                               folder / "t2i.json", "--positives", "project",
                               "--bootstrap", "0"))
    assert message.startswith(f"error: {folder / 'i2t.json'}:8: query {images[6]!r}: "
                              f"caption id '{images[6]}/NoSuchSystem'"), message


def test_swapped_ranking_files_are_named_as_such(project: Path):
    folder = project.parent
    _write_lists(folder)
    message = _error(_evaluate(project, "--name", "m", "--i2t", folder / "t2i.json",
                               "--t2i", folder / "i2t.json", "--positives", "project",
                               "--bootstrap", "0"))
    first_caption = _ids()[1][0]
    assert message.startswith(f"error: {folder / 't2i.json'}:2: query {first_caption!r}"), \
        message
    assert "swapped" in message


def test_broken_utf8_in_a_ranking_file_gives_its_line_and_column(project: Path):
    folder = project.parent
    _write_lists(folder)
    lines = (folder / "i2t.json").read_bytes().split(b"\n")
    lines[4] = lines[4][:7] + b"\xff" + lines[4][7:]  # line 5, column 8
    (folder / "i2t.json").write_bytes(b"\n".join(lines))
    message = _error(_evaluate(project, "--name", "m", "--i2t", folder / "i2t.json", "--t2i",
                               folder / "t2i.json", "--positives", "project"))
    assert message == (f"error: {folder / 'i2t.json'}:5: invalid UTF-8 (byte 0xff at "
                       "column 8)")


def _matrix(path: Path, image_ids: np.ndarray, caption_ids: np.ndarray) -> Path:
    scores = np.random.default_rng(0).random((len(image_ids), len(caption_ids)))
    np.savez(path, scores=scores, image_ids=image_ids, caption_ids=caption_ids)
    return path


def test_a_repeated_id_of_a_score_matrix_is_named(project: Path):
    images, captions = _ids()
    repeated = np.array(images[:3] + images[1:2] + images[4:])
    path = _matrix(project.parent / "s.npz", repeated, np.array(captions))
    message = _error(_evaluate(project, "--name", "m", "--scores", path, "--positives",
                               "project", "--bootstrap", "0"))
    assert message == (f"error: {path}: image_ids repeats the id {images[1]!r} (at "
                       "positions 1 and 3, from 0)")


def test_object_dtype_ids_say_how_to_save_them(project: Path):
    images, captions = _ids()
    path = _matrix(project.parent / "s.npz", np.array(images, dtype=object),
                   np.array(captions))
    message = _error(_evaluate(project, "--name", "m", "--scores", path, "--positives",
                               "project", "--bootstrap", "0"))
    assert message.startswith(f"error: {path}: image_ids: an array of Python objects")
    assert "save ids as str or int arrays" in message


# --- the terminal table ----------------------------------------------------------------

@pytest.mark.parametrize(("bootstrap", "announced"), [("0", False), ("100", True)])
def test_the_table_keeps_each_signature_on_one_line_and_names_a_ci_only_when_computed(
        project: Path, bootstrap: str, announced: bool):
    folder = project.parent
    _write_lists(folder)
    common = ["--name", "m", "--i2t", folder / "i2t.json", "--t2i", folder / "t2i.json",
              "--positives", "project", "--bootstrap", bootstrap]
    table = folder / "table.txt"
    assert _evaluate(project, *common, "--out", table).exit_code == 0
    signatures = {r["signature"] for r in json.loads(
        _evaluate(project, *common, "--format", "json").output)}
    lines = [line.strip() for line in table.read_text(encoding="utf-8").splitlines()]
    assert len(signatures) == 1 and signatures <= set(lines), lines
    assert ("BCa bootstrap CI over queries" in lines[0]) is announced, lines[0]


# --- compare ---------------------------------------------------------------------------

@pytest.fixture
def five_models(project: Path) -> Path:
    folder = project.parent
    for seed in range(5):
        _write_lists(folder, seed)
        evaluated = _evaluate(project, "--name", f"m{seed}", "--i2t", folder / "i2t.json",
                              "--t2i", folder / "t2i.json", "--positives", "project",
                              "--bootstrap", "0")
        assert evaluated.exit_code == 0, evaluated.output
    return project


def test_compare_names_a_set_no_model_was_evaluated_on(five_models: Path):
    result = runner.invoke(app, ["--db", str(five_models), "retrieval", "compare",
                                 "--positives", "projcet"])
    assert _error(result) == ("error: no model was evaluated on 'projcet'; the sets "
                              "evaluated are 'project'")


def test_tau_of_a_metric_with_itself_is_exactly_one(five_models: Path):
    """Kendall's τ-b of a ranking with itself is 1 (concordant pairs over all untied
    pairs), whatever ties it has."""
    result = runner.invoke(app, ["--db", str(five_models), "retrieval", "compare",
                                 "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output[result.output.index("{"):])["kendall_tau_b"]
    diagonal = [row[row["metric"]] for row in rows if row[row["metric"]] is not None]
    assert len(diagonal) >= 5 and set(diagonal) == {1.0}


def test_the_tau_plot_keeps_its_colour_bar_label_inside_the_image(five_models: Path):
    pytest.importorskip("matplotlib")
    from PIL import Image

    plot = five_models.parent / "tau.png"
    result = runner.invoke(app, ["--db", str(five_models), "retrieval", "compare",
                                 "--plot", str(plot)])
    assert result.exit_code == 0, result.output
    image = np.asarray(Image.open(plot).convert("L"))
    assert (image[:, -3:] > 200).all()  # the right edge is blank: nothing cut off there
    assert (image[:, -60:-3] < 128).any()  # the label is drawn near it


# --- relevance matrices ----------------------------------------------------------------

def test_a_relevance_matrix_with_negative_values_is_refused(project: Path):
    """NCS (Biten et al. 2022) sums relevance φ(q, item) >= 0 as a gain."""
    from metrics.retrieval.relevance import RelevanceMatrix, write_relevance

    folder = project.parent
    _write_lists(folder)
    images, captions = _ids()
    values = np.random.default_rng(0).random((len(images), len(captions)))
    values[2, 5] = -0.25
    path = folder / "relevance.npz"
    write_relevance(RelevanceMatrix("cider-d", "relevance-cider-d|x", tuple(images),
                                    tuple(captions), values), path)
    message = _error(_evaluate(project, "--name", "m", "--i2t", folder / "i2t.json",
                               "--t2i", folder / "t2i.json", "--relevance", path))
    assert message.startswith(f"error: {path}: relevance must not be negative")
    assert f"image {images[2]!r}, caption {captions[5]!r} has -0.25" in message
