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
    help = "sentence BLEU-4, sacrebleu (13a tokens, exponential smoothing), 0-100"

    def __init__(self) -> None:
        from sacrebleu.metrics import BLEU

        self._bleu = BLEU(effective_order=True)

    def settings(self, items: Sequence[CaptionItem]) -> dict[str, str]:
        bleu = self._bleu
        return {"impl": f"sacrebleu-{package_version('sacrebleu')}", "sentence": "yes",
                "tok": bleu.tokenizer.signature(), "smooth": bleu.smooth_method,
                "eff": "yes" if bleu.effective_order else "no",
                "case": "lc" if bleu.lowercase else "mixed"}

    def compute(self, items: Sequence[CaptionItem]) -> np.ndarray:
        return np.array([
            self._bleu.sentence_score(item.text, list(item.references)).score
            for item in items
        ])


class RougeL(Metric):
    """ROUGE-L F-measure, the best over the caption's references (rouge-score, no stemming)."""

    name = "rouge-l"
    help = "ROUGE-L F, best over the references (rouge-score, no stemming)"

    def __init__(self, use_stemmer: bool = False) -> None:
        from rouge_score.rouge_scorer import RougeScorer

        self.use_stemmer = use_stemmer
        self._scorer = RougeScorer(["rougeL"], use_stemmer=use_stemmer)

    def settings(self, items: Sequence[CaptionItem]) -> dict[str, str]:
        return {"impl": f"rouge-score-{package_version('rouge-score')}",
                "stem": "yes" if self.use_stemmer else "no", "agg": "max-f"}

    def compute(self, items: Sequence[CaptionItem]) -> np.ndarray:
        return np.array([
            max(self._scorer.score(ref, item.text)["rougeL"].fmeasure for ref in item.references)
            for item in items
        ])
