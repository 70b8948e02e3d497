"""The COCO caption evaluation's own BLEU-1…4, ROUGE-L and METEOR (pycocoevalcap), per
caption, on PTB-tokenised text as its `COCOEvalCap` tokenises it. These are the numbers the
caption-metric literature reports; they differ from sacrebleu's BLEU (tokenisation, no
smoothing, closest reference length) and from rouge-score's ROUGE-L (LCS F with
beta = 1.2 over the best precision and best recall)."""

from __future__ import annotations

import shutil
from collections.abc import Sequence

import numpy as np

from metrics.base import CaptionItem, Metric
from metrics.signature import package_version
from metrics.text.tokenize import TOKENIZER, resolve_tokenizer, tokenize


class _CocoMetric(Metric):
    """Tokenises captions and references once per call, as pycocoevalcap does."""

    options = (TOKENIZER,)

    def __init__(self, tokenizer: str = "auto") -> None:
        self.tokenizer = resolve_tokenizer(tokenizer)

    def _base_settings(self) -> dict[str, str]:
        return {"impl": f"pycocoevalcap-{package_version('pycocoevalcap')}",
                "tok": self.tokenizer}

    def tokens(self, items: Sequence[CaptionItem]
               ) -> tuple[dict[int, list[str]], dict[int, list[str]]]:
        """(references, candidate) dicts keyed by position, in pycocoevalcap's layout."""
        flat = [ref for item in items for ref in item.references]
        tokens = tokenize([item.text for item in items] + flat, self.tokenizer)
        candidates, rest = tokens[:len(items)], tokens[len(items):]
        references, start = {}, 0
        for index, item in enumerate(items):
            references[index] = rest[start:start + len(item.references)]
            start += len(item.references)
        return references, {index: [text] for index, text in enumerate(candidates)}


class CocoBleu(_CocoMetric):
    """pycocoevalcap's `Bleu` per caption: BLEU-n (n = 1…4) with the closest reference
    length and its tiny-count guard instead of smoothing; 0-1. One subclass per n."""

    n = 4

    def settings(self, items: Sequence[CaptionItem]) -> dict[str, str]:
        return {**self._base_settings(), "n": str(self.n), "reflen": "closest"}

    def compute(self, items: Sequence[CaptionItem]) -> np.ndarray:
        from pycocoevalcap.bleu.bleu import Bleu

        references, candidates = self.tokens(items)
        _, scores = Bleu(self.n).compute_score(references, candidates, verbose=0)
        return np.asarray(scores[self.n - 1], dtype=float)


# coco-bleu-1 … coco-bleu-4: one registered class per order n.
for _n in (1, 2, 3, 4):
    globals()[f"CocoBleu{_n}"] = type(f"CocoBleu{_n}", (CocoBleu,), {
        "__module__": __name__, "name": f"coco-bleu-{_n}", "n": _n,
        "help": f"BLEU-{_n} as COCO's evaluation computes it (pycocoevalcap), 0-1"})
del _n


class CocoRougeL(_CocoMetric):
    """pycocoevalcap's `Rouge`: LCS-based F with beta = 1.2 from the best precision and
    the best recall over the references; 0-1."""

    name = "coco-rouge-l"
    help = "ROUGE-L as COCO's evaluation computes it (LCS F, beta 1.2; pycocoevalcap), 0-1"

    def settings(self, items: Sequence[CaptionItem]) -> dict[str, str]:
        return {**self._base_settings(), "beta": "1.2"}

    def compute(self, items: Sequence[CaptionItem]) -> np.ndarray:
        from pycocoevalcap.rouge.rouge import Rouge

        references, candidates = self.tokens(items)
        rouge = Rouge()
        return np.array([rouge.calc_score(candidates[i], references[i])
                         for i in range(len(items))], dtype=float)


class Meteor(_CocoMetric):
    """METEOR 1.5 (English, normalised, paraphrase tables), the jar pycocoevalcap ships,
    scored per caption; needs Java."""

    name = "meteor"
    help = "METEOR 1.5 (pycocoevalcap's jar; needs Java), 0-1"

    def settings(self, items: Sequence[CaptionItem]) -> dict[str, str]:
        return {**self._base_settings(), "jar": "meteor-1.5", "lang": "en", "norm": "yes"}

    def compute(self, items: Sequence[CaptionItem]) -> np.ndarray:
        if shutil.which("java") is None:
            raise RuntimeError("meteor needs Java 8+ on the PATH (e.g. apt-get install "
                               "default-jre-headless)")
        from pycocoevalcap.meteor.meteor import Meteor as CocoMeteor

        references, candidates = self.tokens(items)
        scorer = CocoMeteor()
        try:
            _, scores = scorer.compute_score(references, candidates)
        finally:
            del scorer  # stops the Java process
        return np.asarray(scores, dtype=float)
