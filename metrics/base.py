"""The metric interface: the base class fixes the flow; each metric fills a few hooks."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from metrics.signature import format_signature


@dataclass(frozen=True)
class CaptionItem:
    """A caption to score, already cleaned (THUMB post-processing), with its image's
    references minus any that is the caption itself."""

    caption_id: int
    image_key: str
    image_path: str | None
    system: str | None  # None for judgment sets without systems
    text: str
    references: tuple[str, ...]


@dataclass(frozen=True)
class MetricOption:
    """A setting a metric takes from the command line as `--{option}` (underscores become
    dashes). `option` is its key among all metrics' options; `parameter` the keyword of
    the metric's constructor."""

    option: str
    parameter: str
    default: object
    help: str
    kind: type = str
    minimum: int | None = None

    @property
    def flag(self) -> str:
        return "--" + self.option.replace("_", "-")


DEVICE = MetricOption("device", "device", "auto", "auto, cpu or cuda.")
BATCH_SIZE = MetricOption("batch_size", "batch_size", 64, "Batch size of a neural model.", int,
                          minimum=1)


class Metric(ABC):
    """Subclasses set `name`, `help` and the `options` their constructor takes, and
    implement `settings()` (the signature fields) and `compute()`."""

    name: str = ""
    help: ClassVar[str] = ""
    options: ClassVar[tuple[MetricOption, ...]] = ()
    corpus_level: bool = False  # True when one caption's score depends on the others
    needs_references: bool = True
    needs_images: bool = False

    @classmethod
    def from_options(cls, values: Mapping[str, object]) -> Metric:
        """The metric built from the command line's values of its options."""
        return cls(**{option.parameter: values[option.option] for option in cls.options})

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
        if self.needs_references and (bare := sum(not item.references for item in items)):
            raise RuntimeError(f"{self.name} needs references: {bare} caption(s) have none "
                               "(none imported, or the only ones were the caption itself)")
        if self.needs_images and (absent := [item.image_key for item in items
                                             if not item.image_path
                                             or not Path(item.image_path).is_file()]):
            raise RuntimeError(f"{self.name} needs the image files: {len(absent)} caption(s) "
                               f"have none, e.g. of image {absent[0]!r} (a judgment set "
                               "imported without an image column has no images)")
        scores = np.asarray(self.compute(items), dtype=float)
        if scores.shape != (len(items),):
            raise RuntimeError(f"{self.name} returned {scores.shape} scores for {len(items)}")
        return scores
