"""matplotlib for the figures that need it (the τ heat map of `thumb retrieval compare
--plot`, the report's print figures), imported only when such a figure is asked for, and
made safe for stored text: every label goes through `plot_label`, mathtext and TeX are off
(`$x$` is shown as typed, an unbalanced `$` cannot fail a plot), and what matplotlib warns
(a glyph missing from the font) is passed on with its message made printable."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from rubrics.escape import printable

PLOT_LABEL_CHARS = 80  # a longer label is cut (…): a figure stays readable


def plot_label(text: str) -> str:
    """`text` as a label of a figure: control characters shown as escapes (`\\x1b`, so
    that no raw byte reaches an SVG, where XML forbids it, or a terminal through a
    warning), on one line, at most PLOT_LABEL_CHARS characters. `$` stays a dollar sign:
    figures are drawn with mathtext off."""
    text = printable(text, newlines=False)
    return text if len(text) <= PLOT_LABEL_CHARS else text[: PLOT_LABEL_CHARS - 1] + "…"


@contextmanager
def pyplot(needed_by: str, **settings: object) -> Iterator[ModuleType]:
    """matplotlib's pyplot (Agg) with mathtext and TeX off and `settings` (rc parameters)
    in force; a missing matplotlib is a RuntimeError that says what `needed_by` needs."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise RuntimeError(f"{needed_by} needs matplotlib: pip install 'thumb-tui[metrics]'"
                           ) from error
    with warnings.catch_warnings(record=True) as caught, matplotlib.rc_context(
            {"text.parse_math": False, "text.usetex": False, **settings}):
        warnings.simplefilter("always")
        yield plt
    for warning in {printable(str(w.message), newlines=False): w for w in caught}.values():
        warnings.warn(printable(str(warning.message), newlines=False),
                      category=warning.category, stacklevel=3)
