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
    bert_layers: int | None = None
    bert_idf: bool = False
    bert_rescale: bool = False
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


BUILDERS: dict[str, Callable[[MetricOptions], Metric]] = {
    "bleu": _bleu,
    "rouge-l": _rouge,
    "cider-d": _cider,
}
DEFAULT_METRICS = ("bleu", "rouge-l", "cider-d")


def build_metric(name: str, options: MetricOptions) -> Metric:
    if name not in BUILDERS:
        raise ValueError(f"unknown metric {name!r}; known: {', '.join(BUILDERS)}")
    return BUILDERS[name](options)
