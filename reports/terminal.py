"""Terminal tables wider than the terminal's 80 columns, split into several tables of fewer
columns, each repeating the columns that name a row (judgment, agreement and match tables;
the retrieval tables switch to a long layout instead, `reports.retrieval_text.fitted`)."""

from __future__ import annotations

from collections.abc import Callable

from rich.cells import cell_len

TERMINAL_WIDTH = 80  # every terminal table fits this or switches to its long layout

def text_width(text: str) -> int:
    """The columns the widest line of `text` takes in a terminal."""
    return max(map(cell_len, text.splitlines()), default=0)


def fitted(columns: list[str], render: Callable[[list[str]], str], *, keys: int = 1,
           width: int = TERMINAL_WIDTH) -> list[str]:
    """`render(columns)`, or where that is wider than the terminal's 80 columns, several
    tables of the columns in turn, each repeating the first `keys` (what names a row)."""
    head, rest = columns[:keys], columns[keys:]
    chunks: list[list[str]] = [[]]
    for column in rest:
        if chunks[-1] and text_width(render([*head, *chunks[-1], column])) > width:
            chunks.append([column])
        else:
            chunks[-1].append(column)
    return [render([*head, *chunk]) for chunk in chunks]
