"""The metric interface: the base class fixes the flow; each metric fills a few hooks."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from metrics.signature import format_signature


@dataclass(frozen=True)
class CaptionItem:
    """A caption to score, already cleaned (THUMB post-processing), with its image's
    references minus any that is the caption itself."""

    caption_id: int
    image_key: str
    image_path: str | None
    system: str
    text: str
    references: tuple[str, ...]


class Metric(ABC):
    """Subclasses set `name` and implement `settings()` and `compute()`."""

    name: str = ""
    corpus_level: bool = False  # True when one caption's score depends on the others

    @abstractmethod
    def settings(self, items: Sequence[CaptionItem]) -> dict[str, str]:
        """Everything besides the data that decides the scores (library, model, layer…)."""

    @abstractmethod
    def compute(self, items: Sequence[CaptionItem]) -> np.ndarray:
        """One score per item, in order."""

    def signature(self, items: Sequence[CaptionItem], references: str) -> str:
        return format_signature(self.name, {**self.settings(items), "refs": references})

    def score(self, items: Sequence[CaptionItem]) -> np.ndarray:
        if not items:
            return np.zeros(0)
        scores = np.asarray(self.compute(items), dtype=float)
        if scores.shape != (len(items),):
            raise RuntimeError(f"{self.name} returned {scores.shape} scores for {len(items)}")
        return scores
