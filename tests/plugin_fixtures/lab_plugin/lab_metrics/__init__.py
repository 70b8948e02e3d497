"""A lab's own metric as a thumb-tui plugin: the caption's length in words or characters."""

from __future__ import annotations

from collections.abc import Sequence

from metrics.base import CaptionItem, Metric, MetricOption


class WordCount(Metric):
    name = "lab-length"
    help = "caption length in words or characters (a lab's own metric)"
    options = (MetricOption("lab_unit", "unit", "words",
                            "What lab-length counts: words or chars."),)
    needs_references = False  # every caption gets a score

    def __init__(self, unit: str = "words") -> None:
        if unit not in ("words", "chars"):
            raise ValueError(f"--lab-unit is words or chars, not {unit!r}")
        self.unit = unit

    def settings(self, items: Sequence[CaptionItem]) -> dict[str, str]:
        return {"impl": "lab-metrics-0.1", "unit": self.unit}

    def compute(self, items: Sequence[CaptionItem]) -> list[float]:
        if self.unit == "chars":
            return [len(item.text) for item in items]
        return [len(item.text.split()) for item in items]
