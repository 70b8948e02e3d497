"""Image-text retrieval: ranked lists and score matrices, positive sets, the retrieval
metrics (recall@k, R-precision, mAP@R, PMRP, NCS, SR), semantic relevance and SAM, match
verification of positive sets, and BISON's choice between two images.

`metrics.retrieval` was the retrieval metrics' module before #46 (now `evaluation.py`):
the first read of one of that module's names from this package warns, and every read
gives the name from its new place; this package's own modules import as usual."""

from __future__ import annotations

import warnings
from importlib import import_module
from pkgutil import iter_modules

from metrics import moved_warning

_EVALUATION = f"{__name__}.evaluation"


def __getattr__(name: str) -> object:
    unknown = AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name.startswith("__") or name in {module.name for module in iter_modules(__path__)}:
        raise unknown  # (a module of this package: the import system imports it)
    evaluation = import_module(_EVALUATION)
    if not hasattr(evaluation, name):
        raise unknown
    warnings.warn(moved_warning(f"{__name__}.{name}", f"{_EVALUATION}.{name}"), stacklevel=2)
    globals()[name] = value = getattr(evaluation, name)  # warned once, as a moved module is
    return value
