"""The limits on JSON numbers and nesting that every reader of a user's JSON file applies:
the import (`storage.untrusted`) and the metrics' readers (`metrics.untrusted`) alike.
Here, in the bottom layer, because metrics cannot import storage: one copy of the number
hooks for `json.JSONDecoder`, the line a refused number sits on, and the nesting check.

Each reader keeps its own error type and message frame (`file:line: problem` or a
`JsonProblem` with a line); the problems these hooks name are the same words in both."""

from __future__ import annotations

import math
from collections.abc import Callable

MAX_DEPTH = 32  # nesting: records are flat, lists of ids 2 deep, COCO files 4 or 5
MAX_NUMBER_CHARS = 40  # a number other than an integer, as written


class Refused(ValueError):
    """A number or constant the limits refuse; `fragment` is its text in the input."""

    def __init__(self, fragment: str, message: str) -> None:
        super().__init__(message)
        self.fragment = fragment


def integer_hook(max_digits: int) -> Callable[[str], int]:
    """`parse_int`: an integer of at most `max_digits` digits (a minus sign aside)."""

    def integer(digits: str) -> int:
        count = len(digits) - digits.startswith("-")
        if count > max_digits:
            raise Refused(digits, f"a number with {count} digits (at most {max_digits})")
        return int(digits)

    return integer


def real_hook(*, finite: bool, max_chars: int = MAX_NUMBER_CHARS) -> Callable[[str], float]:
    """`parse_float`: a number written with at most `max_chars` characters; with
    `finite`, one that is finite as well (1e999 is not)."""

    def real(text: str) -> float:
        if len(text) > max_chars:
            raise Refused(text, f"a number written with {len(text)} characters (at most "
                                f"{max_chars})")
        value = float(text)
        if finite and not math.isfinite(value):
            raise Refused(text, f"{text} is not a finite number")
        return value

    return real


def refuse_constant(name: str) -> float:
    """`parse_constant`: NaN, Infinity and -Infinity are not JSON numbers."""
    raise Refused(name, f"{name} is not a JSON number")


def line_of(text: str, position: int) -> int:
    """The line (from 1) of `text` at `position`; 1 for an unknown position (-1)."""
    return text.count("\n", 0, position) + 1 if position >= 0 else 1


def refused_line(text: str, refused: Refused) -> int:
    """The line of the first occurrence of the refused fragment in `text`."""
    return line_of(text, text.find(refused.fragment))


def too_deep(value: object, limit: int = MAX_DEPTH) -> bool:
    """Whether lists and objects nest more than `limit` levels deep in `value`, level by
    level, without recursion; scalars are passed over in C (list comprehensions)."""
    level, containers = 0, [value] if type(value) in (list, dict) else []
    while containers:
        level += 1
        if level > limit:
            return True
        inner = []
        for container in containers:
            items = container.values() if type(container) is dict else container
            inner += [item for item in items if type(item) is list or type(item) is dict]
        containers = inner
    return False
