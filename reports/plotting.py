"""matplotlib for the figures that need it (the τ heat map of `thumb retrieval compare
--plot`, the report's print figures), imported only when such a figure is asked for, and
made safe for stored text: every label goes through `plot_label`, mathtext and TeX are off
(`$x$` is shown as typed, an unbalanced `$` cannot fail a plot), and what matplotlib warns
is passed on once, made printable, its warning per character the font lacks merged into one
per font."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import ModuleType

from rubrics.escape import printable

PLOT_LABEL_CHARS = 80  # a longer label is cut (…): a figure stays readable
SHOWN_GLYPHS = 8  # the characters a font lacks that its note names
# matplotlib warns once per character a font has no glyph for, naming it by code point
_MISSING_GLYPH = re.compile(r"Glyph (\d+) \(.*\) missing from font\(s\) (.+?)\.?")


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
    for note in plot_notes(str(warning.message) for warning in caught):
        warnings.warn(note, UserWarning, stacklevel=3)


def plot_notes(messages: Iterable[str]) -> list[str]:
    """What matplotlib warned, each message once and printable, on one line; its warnings
    for the characters a font lacks (one per character, a CJK system name gives dozens) as
    one line per font that names them."""
    notes: list[str] = []
    missing: dict[str, list[str]] = {}
    for message in messages:
        match = _MISSING_GLYPH.fullmatch(message)
        if match is None:
            notes.append(message)
        else:
            missing.setdefault(match[2], []).append(chr(int(match[1])))
    for font, characters in missing.items():
        unique = list(dict.fromkeys(characters))
        shown = " ".join(unique[:SHOWN_GLYPHS]) + (" …" if len(unique) > SHOWN_GLYPHS else "")
        notes.append(f"the font {font} has no glyph for {len(unique)} character"
                     f"{'' if len(unique) == 1 else 's'} of the labels ({shown}): the figures "
                     "show them as empty boxes")
    return list(dict.fromkeys(printable(note, newlines=False) for note in notes))
