"""coco-bleu-1…4, coco-rouge-l and meteor equal pycocoevalcap's per-caption scores, computed
through pycocoevalcap's own pipeline (its PTBTokenizer, then its scorers)."""

from __future__ import annotations

import csv
import shutil

import numpy as np
import pytest

from metrics.base import CaptionItem
from metrics.registry import MetricOptions, build_metric
from metrics.signature import parse_signature
from metrics.text.coco import CocoRougeL, Meteor
from metrics.text.tokenize import java_available
from rubrics import clean_caption
from tests.conftest import SAMPLE_CSV

needs_java = pytest.mark.skipif(not java_available(), reason="Java or pycocoevalcap missing")


def sample_items() -> list[CaptionItem]:
    with open(SAMPLE_CSV, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return [CaptionItem(index, row["image_id"], None, row["system"],
                        clean_caption(row["caption"]),
                        tuple(clean_caption(row[f"reference_{n}"]) for n in range(1, 5)))
            for index, row in enumerate(rows)]


def coco_pipeline(items: list[CaptionItem]) -> tuple[dict, dict]:
    """gts and res as COCOEvalCap builds them: PTB-tokenised by pycocoevalcap itself."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    tokenizer = PTBTokenizer()
    gts = tokenizer.tokenize({i: [{"caption": r} for r in item.references]
                              for i, item in enumerate(items)})
    res = tokenizer.tokenize({i: [{"caption": item.text}] for i, item in enumerate(items)})
    return gts, res


@needs_java
@pytest.mark.slow
def test_coco_bleu_equals_pycocoevalcap_per_caption():
    from pycocoevalcap.bleu.bleu import Bleu

    items = sample_items()
    _, expected = Bleu(4).compute_score(*coco_pipeline(items), verbose=0)
    for n in (1, 2, 3, 4):
        ours = build_metric(f"coco-bleu-{n}", MetricOptions(tokenizer="ptb-java")).score(items)
        np.testing.assert_allclose(ours, expected[n - 1], rtol=0, atol=1e-12)
    assert len(set(np.round(expected[3], 6))) > 20  # the sample's captions differ


@needs_java
def test_coco_rouge_l_equals_pycocoevalcap_and_differs_from_rouge_score():
    from pycocoevalcap.rouge.rouge import Rouge

    items = sample_items()
    _, expected = Rouge().compute_score(*coco_pipeline(items))
    ours = CocoRougeL(tokenizer="ptb-java").score(items)
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-12)
    rouge_score = build_metric("rouge-l", MetricOptions()).score(items)
    assert np.abs(ours - rouge_score).max() > 0.01


@pytest.mark.slow
@needs_java
def test_meteor_equals_pycocoevalcap_per_caption():
    from pycocoevalcap.meteor.meteor import Meteor as CocoMeteor

    items = sample_items()
    scorer = CocoMeteor()
    _, expected = scorer.compute_score(*coco_pipeline(items))
    del scorer
    ours = Meteor(tokenizer="ptb-java").score(items)
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-12)
    assert 0 < ours.min() < ours.max() <= 1


def test_signatures_say_implementation_order_and_tokenizer():
    items = sample_items()
    bleu = parse_signature(build_metric("coco-bleu-2", MetricOptions(
        tokenizer="ptb-python")).signature(items, "image"))
    assert (bleu["metric"], bleu["n"], bleu["tok"], bleu["reflen"]) == (
        "coco-bleu-2", "2", "ptb-python", "closest")
    assert bleu["impl"].startswith("pycocoevalcap-")
    assert parse_signature(CocoRougeL(tokenizer="ptb-python").signature(items, "i"))[
        "beta"] == "1.2"
    with pytest.raises(ValueError, match="unknown metric 'coco-bleu-5'"):
        build_metric("coco-bleu-5", MetricOptions())


def test_reference_metrics_are_undefined_without_references():
    bare = CaptionItem(1, "img", None, None, "A dog.", ())
    metric = build_metric("coco-bleu-4", MetricOptions(tokenizer="ptb-python"))
    scores = metric.score([bare, *sample_items()[:1]])
    assert np.isnan(scores[0]) and np.isfinite(scores[1])
    assert metric.undefined_reason(bare) == "no references"


def test_meteor_without_java_says_so(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="meteor needs Java"):
        Meteor(tokenizer="ptb-python").score(sample_items()[:2])
