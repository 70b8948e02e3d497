"""BLEU-4 (sacrebleu sentence BLEU) and ROUGE-L (rouge-score, best F over references)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from metrics.base import CaptionItem, Metric
from metrics.signature import package_version


class Bleu(Metric):
    """Sentence BLEU-4 against all of the caption's references (sacrebleu defaults:
    13a tokenisation, exponential smoothing, mixed case); 0-100."""

    name = "bleu"

    def __init__(self) -> None:
        from sacrebleu.metrics import BLEU

        self._bleu = BLEU(effective_order=True)

    def settings(self, items: Sequence[CaptionItem]) -> dict[str, str]:
        return {"impl": f"sacrebleu-{package_version('sacrebleu')}", "sentence": "yes",
                "tok": "13a", "smooth": "exp", "eff": "yes", "case": "mixed"}

    def compute(self, items: Sequence[CaptionItem]) -> np.ndarray:
        return np.array([
            self._bleu.sentence_score(item.text, list(item.references)).score
            for item in items
        ])


class RougeL(Metric):
    """ROUGE-L F-measure, the best over the caption's references (rouge-score, no stemming)."""

    name = "rouge-l"

    def __init__(self) -> None:
        from rouge_score.rouge_scorer import RougeScorer

        self._scorer = RougeScorer(["rougeL"], use_stemmer=False)

    def settings(self, items: Sequence[CaptionItem]) -> dict[str, str]:
        return {"impl": f"rouge-score-{package_version('rouge-score')}", "stem": "no",
                "agg": "max-f"}

    def compute(self, items: Sequence[CaptionItem]) -> np.ndarray:
        return np.array([
            max(self._scorer.score(ref, item.text)["rougeL"].fmeasure for ref in item.references)
            for item in items
        ])
