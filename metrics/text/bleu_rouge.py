"""BLEU-4 (sacrebleu sentence BLEU) and ROUGE-L (rouge-score, best F over references), each
with its reference statistics computed once per distinct reference set and reused for every
caption of the image: the libraries' scores, without their per-caption reference work."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import ClassVar

import numpy as np

from metrics.base import CaptionItem, Metric
from metrics.signature import package_version


class Bleu(Metric):
    """Sentence BLEU-4 against all of the caption's references (sacrebleu defaults:
    13a tokenisation, exponential smoothing, mixed case); 0-100. sacrebleu's public API
    only: per distinct reference set one `BLEU(references=...)` (sacrebleu's documented
    reference cache: the reference n-grams extracted once), and each distinct caption of
    that set scored once as a one-segment corpus, which is its sentence BLEU."""

    name = "bleu"
    help = "sentence BLEU-4, sacrebleu (13a tokens, exponential smoothing), 0-100"

    # sacrebleu's BLEU options, spelled out so that the signature needs no sacrebleu import
    # (a run that finds every score stored does not load it)
    OPTIONS: ClassVar[dict[str, object]] = {"tokenize": "13a", "smooth_method": "exp",
                                            "effective_order": True, "lowercase": False}

    def settings(self, items: Sequence[CaptionItem]) -> dict[str, str]:
        options = self.OPTIONS
        return {"impl": f"sacrebleu-{package_version('sacrebleu')}", "sentence": "yes",
                "tok": str(options["tokenize"]), "smooth": str(options["smooth_method"]),
                "eff": "yes" if options["effective_order"] else "no",
                "case": "lc" if options["lowercase"] else "mixed"}

    def compute(self, items: Sequence[CaptionItem]) -> np.ndarray:
        from sacrebleu.metrics import BLEU

        # reference set -> caption text -> positions; one set at a time, so that only one
        # set's n-grams are held (systems often agree: each text is scored once per set)
        groups: dict[tuple[str, ...], dict[str, list[int]]] = {}
        for index, item in enumerate(items):
            groups.setdefault(item.references, {}).setdefault(item.text, []).append(index)
        scores = np.zeros(len(items))
        for references, texts in groups.items():
            bleu = BLEU(**self.OPTIONS, references=[[ref] for ref in references])
            for text, positions in texts.items():
                scores[positions] = bleu.corpus_score([text], None).score
        return scores


def lcs_length(masks: dict[str, int], width: int, tokens: Sequence[str]) -> int:
    """Length of the longest common subsequence of a reference and `tokens`, bit-parallel
    (Hyyro 2004): `masks` has, per reference token, the bit set of its positions."""
    full = (1 << width) - 1
    row = full
    for token in tokens:
        matches = row & masks.get(token, 0)
        row = ((row + matches) | (row - matches)) & full
    return width - row.bit_count()


def position_masks(tokens: Sequence[str]) -> dict[str, int]:
    masks: dict[str, int] = {}
    for position, token in enumerate(tokens):
        masks[token] = masks.get(token, 0) | (1 << position)
    return masks


class RougeL(Metric):
    """ROUGE-L F-measure, the best over the caption's references (rouge-score's tokenizer and
    formula, no stemming by default); each distinct text tokenized once."""

    name = "rouge-l"
    help = "ROUGE-L F, best over the references (rouge-score, no stemming)"

    def __init__(self, use_stemmer: bool = False) -> None:
        self.use_stemmer = use_stemmer

    def settings(self, items: Sequence[CaptionItem]) -> dict[str, str]:
        return {"impl": f"rouge-score-{package_version('rouge-score')}",
                "stem": "yes" if self.use_stemmer else "no", "agg": "max-f"}

    def _tokenizer(self) -> Callable[[str], list[str]]:
        """rouge-score's tokenizer; without stemming its plain function (no nltk import)."""
        if self.use_stemmer:
            from rouge_score.tokenizers import DefaultTokenizer

            return DefaultTokenizer(use_stemmer=True).tokenize
        from rouge_score.tokenize import tokenize

        return partial(tokenize, stemmer=None)

    def compute(self, items: Sequence[CaptionItem]) -> np.ndarray:
        tokenize = self._tokenizer()
        references: dict[str, tuple[dict[str, int], int]] = {}
        for ref in dict.fromkeys(r for item in items for r in item.references):
            tokens = tokenize(ref)
            references[ref] = (position_masks(tokens), len(tokens))
        scores = np.zeros(len(items))
        for index, item in enumerate(items):
            tokens = tokenize(item.text)
            best = 0.0
            for ref in item.references:
                masks, width = references[ref]
                if not width or not tokens:
                    continue  # rouge-score: an empty side scores 0
                common = lcs_length(masks, width, tokens)
                precision, recall = common / len(tokens), common / width
                if precision + recall > 0:
                    best = max(best, 2 * precision * recall / (precision + recall))
            scores[index] = best
        return scores
