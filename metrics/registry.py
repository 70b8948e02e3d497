"""Metric names the command line accepts, and how each is built from the options."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from metrics.base import Metric


@dataclass(frozen=True)
class MetricOptions:
    device: str = "auto"
    batch_size: int = 64
    keep_self_references: bool = False
    cider_corpus: str = "per-system"
    tokenizer: str = "auto"
    bert_model: str = "roberta-large"
    bert_layer: int | None = None
    bert_idf: bool = False
    bert_rescale: bool = False
    bert_baseline: str | None = None
    clip_model: str = "openai/clip-vit-base-patch32"


def _bleu(options: MetricOptions) -> Metric:
    from metrics.text_metrics import Bleu

    return Bleu()


def _rouge(options: MetricOptions) -> Metric:
    from metrics.text_metrics import RougeL

    return RougeL()


def _cider(options: MetricOptions) -> Metric:
    from metrics.cider import CiderD

    return CiderD(corpus=options.cider_corpus, tokenizer=options.tokenizer)


def _bertscore(options: MetricOptions) -> Metric:
    from metrics.bertscore import BertScore

    return BertScore(options.bert_model, options.bert_layer, idf=options.bert_idf,
                     rescale=options.bert_rescale, baseline_path=options.bert_baseline,
                     device=options.device, batch_size=options.batch_size)


def _clip(variant: str) -> Callable[[MetricOptions], Metric]:
    def build(options: MetricOptions) -> Metric:
        from metrics.clip import ClipMetric

        return ClipMetric(variant, options.clip_model, options.device, options.batch_size)

    return build


def _spice(options: MetricOptions) -> Metric:
    from metrics.spice import Spice

    return Spice()


def _spice_approx(options: MetricOptions) -> Metric:
    from metrics.spice import SpiceApprox

    return SpiceApprox()


BUILDERS: dict[str, Callable[[MetricOptions], Metric]] = {
    "bleu": _bleu,
    "rouge-l": _rouge,
    "cider-d": _cider,
    "bertscore": _bertscore,
    "clip-s": _clip("clip-s"),
    "refclip-s": _clip("refclip-s"),
    "refonly-c": _clip("refonly-c"),
    "spice": _spice,
    "spice-approx": _spice_approx,
}
DEFAULT_METRICS = ("bleu", "rouge-l", "cider-d")


def build_metric(name: str, options: MetricOptions) -> Metric:
    if name not in BUILDERS:
        raise ValueError(f"unknown metric {name!r}; known: {', '.join(BUILDERS)}")
    return BUILDERS[name](options)
