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
    """A caption to score, with its image's references minus any that is the caption
    itself; texts as the run's clean-up left them (THUMB's, or none: as given)."""

    caption_id: int
    image_key: str
    image_path: str | None
    system: str | None  # None for judgment sets without systems
    text: str
    references: tuple[str, ...]


@dataclass(frozen=True)
class ReferenceRule:
    """How a run chose each caption's references and cleaned the texts: rules, never counts
    of the data, so that a signature (the key under which stored scores are reused) stays
    the same when unrelated captions are imported."""

    self_references: str = "excluded"  # excluded, excluded-by-id (ids compared) or kept
    clean: str = "thumb"  # THUMB's clean-up, or none (the texts as given)
    source: str = "image"  # where the references come from: the caption's image

    def fields(self, uses_references: bool) -> dict[str, str]:
        """The signature's fields; a metric that uses no references names only the clean-up."""
        clean = {"clean": self.clean}
        return {"refs": self.source, "self": self.self_references, **clean} if (
            uses_references) else clean


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
BATCH_SIZE = MetricOption(
    "batch_size", "batch_size", None,
    "Batch size of a neural model (default: what the free GPU memory holds; 64 on the CPU).",
    int, minimum=1)


NO_REFERENCES = "no references"  # why a reference-based score is undefined


class Metric(ABC):
    """Subclasses set `name`, `help` and the `options` their constructor takes, and
    implement `settings()` (the signature fields) and `compute()`. A subclass in another
    package is a plugin: its distribution names it (or its module) in the entry-point
    group `thumb_tui.metrics` (see metrics.registry)."""

    name: str = ""
    help: ClassVar[str] = ""
    options: ClassVar[tuple[MetricOption, ...]] = ()
    corpus_level: bool = False  # True when one caption's score depends on the others
    needs_references: bool = True  # False for reference-free metrics (CLIP-S)
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

    def signature(self, items: Sequence[CaptionItem], references: ReferenceRule | str) -> str:
        """The settings and the reference rule (or a plain description of where references
        come from, such as BISON's `candidate-image`)."""
        fields = references.fields(self.needs_references) if isinstance(
            references, ReferenceRule) else {"refs": references}
        return format_signature(self.name, {**self.settings(items), **fields})

    def undefined_reason(self, item: CaptionItem) -> str | None:
        """Why this metric has no score for the item (NaN from `score()`), or None."""
        return NO_REFERENCES if self.needs_references and not item.references else None

    def score(self, items: Sequence[CaptionItem]) -> np.ndarray:
        """One score per item; NaN where the metric is undefined (`undefined_reason`), and
        `compute()` only sees the items it can score."""
        scores = np.full(len(items), np.nan)
        defined = [i for i, item in enumerate(items) if self.undefined_reason(item) is None]
        if not defined:
            return scores
        if self.needs_images and (absent := [items[i].image_key for i in defined
                                             if not items[i].image_path
                                             or not Path(items[i].image_path).is_file()]):
            raise RuntimeError(f"{self.name} needs the image files: {len(absent)} caption(s) "
                               f"have none, e.g. of image {absent[0]!r} (a judgment set "
                               "imported without an image column has no images)")
        computed = np.asarray(self.compute([items[i] for i in defined]), dtype=float)
        if computed.shape != (len(defined),):
            raise RuntimeError(f"{self.name} returned {computed.shape} scores for "
                               f"{len(defined)}")
        scores[defined] = computed
        return scores
