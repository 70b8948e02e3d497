"""SPICE: a clear error when its CoreNLP jars are missing, output parsing; spice-approx
tuples and F1 on sentences whose scene graphs are known."""

from __future__ import annotations

import numpy as np
import pytest

from metrics.base import CaptionItem
from metrics.text import spice
from metrics.text.wordnet import wordnet_dir


def test_missing_corenlp_jars_give_instructions(tmp_path, monkeypatch):
    (tmp_path / "spice-1.0.jar").write_bytes(b"")
    monkeypatch.setattr(spice, "spice_folder", lambda: tmp_path)
    monkeypatch.setattr(spice.shutil, "which", lambda name: "/usr/bin/java")
    with pytest.raises(RuntimeError) as caught:
        spice.Spice().score([CaptionItem(1, "k", None, "S", "A dog.", ("A dog.",))])
    message = str(caught.value)
    assert "stanford-corenlp-3.6.0-models.jar" in message
    assert "get_stanford_models" in message and "spice-approx" in message


def test_missing_java_is_named(monkeypatch):
    monkeypatch.setattr(spice.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="SPICE needs Java"):
        spice.check_spice()


def test_spice_output_is_read_in_input_order():
    output = [
        {"image_id": 1, "scores": {"All": {"f": 0.25, "pr": 0.5, "re": 0.1}}},
        {"image_id": 0, "scores": {"All": {"f": float("nan"), "pr": 0, "re": 0}}},
    ]
    np.testing.assert_allclose(spice.parse_spice_output(output, 2), [0.0, 0.25])
    with pytest.raises(RuntimeError, match="no score"):
        spice.parse_spice_output(output[:1], 2)


@pytest.fixture(scope="module")
def parser():
    pytest.importorskip("spacy")
    try:
        return spice.spacy_parser()
    except RuntimeError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def wordnet():
    if wordnet_dir() is None:
        pytest.skip("WordNet database files (Debian wordnet-base) not installed")
    from metrics.text.wordnet import load_wordnet

    return load_wordnet()


@pytest.mark.slow
def test_scene_tuples_of_known_sentences(parser):
    tuples = spice.scene_tuples(parser("Two red balls lying on green grass under a blue sky."))
    assert {("ball",), ("grass",), ("sky",), ("ball", "red"), ("ball", "two"),
            ("grass", "green"), ("sky", "blue"), ("ball", "on", "grass"),
            ("ball", "under", "sky")} <= tuples
    house = spice.scene_tuples(parser("A yellow house with a red door and a tree."))
    assert {("house", "with", "door"), ("house", "with", "tree"), ("door", "red")} <= house
    assert ("car", "red") in spice.scene_tuples(parser("The car is red."))


def test_tuple_f1_uses_wordnet_synonyms(parser, wordnet):
    assert wordnet.similar("car", "automobile") and not wordnet.similar("car", "dog")
    car = spice.scene_tuples(parser("A red car."))
    automobile = spice.scene_tuples(parser("A red automobile."))
    assert spice.tuple_f1(car, automobile, wordnet) == pytest.approx(1.0)
    dog = spice.scene_tuples(parser("A brown dog."))
    assert spice.tuple_f1(car, dog, wordnet) == 0.0
    # candidate {ball, ball-red}, references {ball, ball-blue}: P = R = 1/2
    half = spice.tuple_f1(spice.scene_tuples(parser("A red ball.")),
                          spice.scene_tuples(parser("A blue ball.")), wordnet)
    assert half == pytest.approx(0.5)


def test_spice_approx_scores_and_signature(parser, wordnet):
    items = [CaptionItem(1, "k", None, "S", "A red car.", ("A red automobile.", "A car.")),
             CaptionItem(2, "k", None, "T", "A brown dog.", ("A red automobile.",))]
    metric = spice.SpiceApprox()
    scores = metric.score(items)
    assert scores[0] == pytest.approx(1.0) and scores[1] == 0.0
    signature = metric.signature(items, "image")
    assert signature.startswith("spice-approx|") and "note:not-SPICE" in signature
