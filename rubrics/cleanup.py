"""THUMB's minimal caption post-processing, applied to every text before any metric."""

from __future__ import annotations

import re

_SPACE_BEFORE_FINAL_PERIOD = re.compile(r"\s+\.$")


def clean_caption(text: str) -> str:
    """Strip, uppercase the first letter, end with a period, and drop a space before it.

    >>> clean_caption("  a dog on a beach .")
    'A dog on a beach.'
    """
    text = text.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    if not text.endswith("."):
        text += "."
    return _SPACE_BEFORE_FINAL_PERIOD.sub(".", text)
