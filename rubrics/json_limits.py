"""The limits on JSON numbers and nesting that every reader of a user's JSON file applies:
the import (`storage.imports.untrusted`) and the metrics' readers (`metrics.untrusted`) alike.
Here, in the bottom layer, because metrics cannot import storage: one copy of the number
hooks for `json.JSONDecoder`, the line a refused number sits on, the nesting check, and the
hook that refuses an object naming a key twice, with the line of that key; and how a byte
that is not UTF-8 is named in any text file.

Each reader keeps its own error type and message frame (`file:line: problem` or a
`JsonProblem` with a line); the problems these hooks name are the same words in both."""

from __future__ import annotations

import json
import math
import re
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


def utf8_problem(raw: bytes, start: int) -> tuple[int, str]:
    """(line, `invalid UTF-8 (byte 0xff at column 12)`) of the bad byte at `start` of a
    user's file: a line and a column (in bytes from the line's start), not a byte offset,
    to find it in an editor. Every reader of a text file says it in these words."""
    line = raw.count(b"\n", 0, start) + 1
    column = start - (raw.rfind(b"\n", 0, start) + 1) + 1
    return line, f"invalid UTF-8 (byte 0x{raw[start]:02x} at column {column})"


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


class RepeatedKey(ValueError):
    """An object names a key twice: JSON keeps the last value without a word, so
    `"precision": 5, …, "precision": 1` would be read as 1 (a CSV header that names a
    column twice is refused too). Raised by `unique_keys`, which cannot say where;
    `repeated_key_problem` can."""


def unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """`object_pairs_hook` for whole files (the metrics' readers): the object, unless it
    names a key twice. A Python call per object: 4% more time to decode a COCO file, but
    as much again of a whole import of JSON lines, one small object each, which
    `refuse_repeated_keys` checks instead."""
    record = dict(pairs)
    if len(record) < len(pairs):
        raise RepeatedKey
    return record


_SPACE = re.compile("[ \t\n\r]*")  # JSON's whitespace
_UNIQUE_KEYS = json.JSONDecoder(object_pairs_hook=unique_keys)


def refuse_repeated_keys(text: str, value: object) -> None:
    """Raise `RepeatedKey` if `text`, decoded to `value` without `unique_keys`, names a
    key twice. Told at a glance for a JSON line: every key is followed by a colon, so a
    text with no more colons than its top object has keys repeats none (one count in C).
    Any other (a colon in a text, nested objects) is decoded again with `unique_keys`."""
    if text.count(":") > (len(value) if type(value) is dict else 0):
        _UNIQUE_KEYS.decode(text)


def repeated_key_problem(text: str) -> tuple[int, str]:
    """(line, problem) of a key named twice in `text`, a text that `unique_keys` refused,
    at its second naming. From the outermost value in: an object's keys are compared as
    they come, and the member value (or list item) that holds the repeat is found by
    decoding each in turn with `unique_keys` (in C: a repeat at the end of a 37 MB file
    is found in under a second) and is entered in its turn."""
    position = _SPACE.match(text).end()  # at a list or an object that holds the repeat
    while True:
        keys: set[str] | None = set() if text[position] == "{" else None  # None: a list
        position = _SPACE.match(text, position + 1).end()
        while True:
            if keys is not None:
                key, end = _UNIQUE_KEYS.raw_decode(text, position)
                if key in keys:
                    shown = repr(key) if len(key) <= 40 else f"{key[:40]!r}…"
                    return line_of(text, position), f"key {shown} appears twice in one object"
                keys.add(key)
                position = _SPACE.match(text, _SPACE.match(text, end).end() + 1).end()
            try:
                end = _UNIQUE_KEYS.raw_decode(text, position)[1]
            except RepeatedKey:
                break  # the repeat is inside this value: enter it
            position = _SPACE.match(text, _SPACE.match(text, end).end() + 1).end()  # past ","
