"""Automatic caption metrics and the statistics around them. At the top, what a metric
plugin's author needs: the `Metric` base (`base.py`), the registry, the runner, signatures
and the checks on untrusted files; by domain, `text/`, `models/`, `stats/` and `retrieval/`.

The modules that were directly in `metrics/` before #46 keep their old names as aliases:
importing one (`import metrics.cider`) warns and gives the module at its new place (the
same object, under both names in `sys.modules`)."""

from __future__ import annotations

import sys
import warnings
from importlib import import_module
from importlib.machinery import ModuleSpec
from types import ModuleType

MOVED_MODULES = {
    "metrics.agreement": "metrics.stats.agreement",
    "metrics.campaign": "metrics.stats.campaign",
    "metrics.confidence": "metrics.stats.confidence",
    "metrics.correlation": "metrics.stats.correlation",
    "metrics.judgments": "metrics.stats.judgments",
    "metrics.significance": "metrics.stats.significance",
    "metrics.cider": "metrics.text.cider",
    "metrics.coco": "metrics.text.coco",
    "metrics.ptb_lexer": "metrics.text.ptb_lexer",
    "metrics.spice": "metrics.text.spice",
    "metrics.text_metrics": "metrics.text.bleu_rouge",
    "metrics.tokenize": "metrics.text.tokenize",
    "metrics.wordnet": "metrics.text.wordnet",
    "metrics.bertscore": "metrics.models.bertscore",
    "metrics.clip": "metrics.models.clip",
    "metrics.torch_device": "metrics.models.torch_device",
    "metrics.bison": "metrics.retrieval.bison",
    "metrics.integer_lists": "metrics.retrieval.integer_lists",
    "metrics.match": "metrics.retrieval.match",
    "metrics.positives": "metrics.retrieval.positives",
    "metrics.rankings": "metrics.retrieval.rankings",
    "metrics.relevance": "metrics.retrieval.relevance",
    "metrics.sam": "metrics.retrieval.sam",
    # `metrics.retrieval` (now `metrics.retrieval.evaluation`) is the subpackage's name:
    # metrics/retrieval/__init__.py forwards the old module's names
}


def moved_warning(old: str, new: str) -> DeprecationWarning:
    return DeprecationWarning(f"{old} has moved to {new}; import it from there")


class MovedModules:
    """The import system's finder for a moved module's old name (and only for those): the
    module at its new place, after a DeprecationWarning pointing at the import that used the
    old name. First on `sys.meta_path`, so that no other finder (an editable install's, of
    an older checkout) finds an old copy of the module instead."""

    def find_spec(self, name: str, path: object = None, target: object = None
                  ) -> ModuleSpec | None:
        return ModuleSpec(name, self) if name in MOVED_MODULES else None

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        new = MOVED_MODULES[spec.name]
        # stacklevel 2 is the importing line: warnings skips importlib's own frames
        warnings.warn(moved_warning(spec.name, new), stacklevel=2)
        return import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """The module ran at its new place already."""


if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
    sys.meta_path.insert(0, MovedModules())
