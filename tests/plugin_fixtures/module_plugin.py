"""A module that a metric plugin's entry point names (`tests.plugin_fixtures.module_plugin`):
every named `Metric` subclass defined here counts; imported names and unnamed bases do not."""

from __future__ import annotations

from metrics.base import CaptionItem, Metric
from metrics.text.bleu_rouge import Bleu  # noqa: F401  (imported: not this module's metric)


class _Length(Metric):
    name = ""  # a base: not a metric

    def settings(self, items: list[CaptionItem]) -> dict[str, str]:
        return {}


class Words(_Length):
    name = "mod-words"
    help = "words in the caption"

    def compute(self, items: list[CaptionItem]) -> list[float]:
        return [len(item.text.split()) for item in items]


class Chars(_Length):
    name = "mod-chars"
    help = "characters in the caption"

    def compute(self, items: list[CaptionItem]) -> list[float]:
        return [len(item.text) for item in items]
