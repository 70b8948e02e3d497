"""Imported files are untrusted. Before any field is interpreted, every record is checked
against hard limits — characters, text length, JSON nesting depth, digits of a number —
and, for JSON, against the type each field must have (no coercion: a number is never
taken for a caption) and for a key named twice (JSON would keep the last value). A
violation is a `file:line` problem like any other; no parser error gets past the
importer. Checks only: nothing here touches the database."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from rubrics import forbidden_character
from rubrics.escape import FORBIDDEN_CHARACTERS, MAX_TEXT_CHARS, refusal
from rubrics.json_limits import MAX_DEPTH as MAX_DEPTH
from rubrics.json_limits import MAX_NUMBER_CHARS as MAX_NUMBER_CHARS
from rubrics.json_limits import (
    Refused,
    RepeatedKey,
    integer_hook,
    real_hook,
    refuse_constant,
    refuse_repeated_keys,
    refused_line,
    repeated_key_problem,
    too_deep,
)

# MAX_TEXT_CHARS (rubrics.escape): a caption, reference, note, name or path
# MAX_DEPTH, MAX_NUMBER_CHARS (rubrics.json_limits): shared with the metrics' readers
MAX_INTEGER_DIGITS = 18  # int64 columns (the metrics' readers take 20: uint64 ids)


class JsonProblem(ValueError):
    """A file that is not acceptable JSON; `line` is where the problem is (1 if unknown)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


# made once: a decoder per call costs more than decoding a caption row. Reals need not be
# finite here: 1e999 reaches the row checks, which name the field ("must be a finite
# number").
_DECODER = json.JSONDecoder(parse_int=integer_hook(MAX_INTEGER_DIGITS),
                            parse_float=real_hook(finite=False),
                            parse_constant=refuse_constant)


def load_json(text: str) -> Any:
    """`json.loads` within the limits: no integer over MAX_INTEGER_DIGITS digits, no float
    over MAX_NUMBER_CHARS characters, no NaN/Infinity, nesting at most MAX_DEPTH deep, no
    object naming a key twice."""
    try:
        value = _DECODER.decode(text)
        refuse_repeated_keys(text, value)  # at a glance: a JSON line is one flat object
    except Refused as exc:
        raise JsonProblem(refused_line(text, exc), str(exc)) from None
    except RepeatedKey:
        raise JsonProblem(*repeated_key_problem(text)) from None
    except json.JSONDecodeError as exc:
        raise JsonProblem(exc.lineno, f"malformed JSON: {exc.msg} (column {exc.colno})"
                          ) from None
    except RecursionError:
        raise JsonProblem(1, f"JSON nested deeper than {MAX_DEPTH} levels") from None
    # a value nests no deeper than the brackets its text opens (a flat record: 1 or 2)
    if text.count("[") + text.count("{") > MAX_DEPTH and too_deep(value):
        raise JsonProblem(1, f"JSON nested deeper than {MAX_DEPTH} levels")
    return value


def strings(value: object, name: str) -> Iterator[tuple[str, str]]:
    """Every text in `value` (object keys included) with the field it sits in."""
    stack = [(value, name)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            yield where, item
        elif isinstance(item, dict):
            for key, child in item.items():
                yield (f"a key in {where}" if where else "a field name"), str(key)
                stack.append((child, f"{where}.{key}" if where else str(key)))
        elif isinstance(item, list):
            stack.extend((child, where) for child in item)


def _flat_texts(record: dict) -> list[str] | None:
    """The keys and texts of a flat record (scalars and lists of texts, as a caption row
    has), or None for anything deeper."""
    texts = [key for key in record if type(key) is str]
    if len(texts) != len(record):
        return None
    for value in record.values():
        kind = type(value)
        if kind is str:
            texts.append(value)
        elif kind is list and all(type(item) is str for item in value):
            texts.extend(value)
        elif value is not None and kind not in (int, float, bool):
            return None
    return texts


def _clean(texts: list[str]) -> bool:
    """Whether none of `texts` is too long or has a forbidden character: one search over
    them all, joined by a newline (an allowed character)."""
    return (max(map(len, texts), default=0) <= MAX_TEXT_CHARS
            and forbidden_character("\n".join(texts)) is None)


# What may decode to a character `rubrics.forbidden_character` refuses: one of them (the
# same class, less CR), a CR not followed by LF (CSV reads CR LF as a line end, or inside a
# quoted cell as a newline), or a JSON escape that can make one (\b \f \r \uXXXX). A
# plain class with CR and backslash is searched first: far faster, and enough for most rows.
_MAYBE_FORBIDDEN = re.compile(f"(?!\r)[{FORBIDDEN_CHARACTERS}]|\r(?!\n)|\\\\[bfru]")
_FORBIDDEN_CR_OR_ESCAPE = re.compile(f"[\t\n\\\\{FORBIDDEN_CHARACTERS}]")


def clean_source(text: str) -> bool:
    """Whether every text parsed out of `text` (the lines of one CSV record, one JSON line)
    certainly passes `text_problems`: nothing longer than the source, nothing that could
    decode to a forbidden character. A million clean rows need one search each; a source
    that may not be clean has its texts checked one by one."""
    if len(text) > MAX_TEXT_CHARS:
        return False
    found = _FORBIDDEN_CR_OR_ESCAPE.search(text.removesuffix("\n"))
    return found is None or _MAYBE_FORBIDDEN.search(text, found.start()) is None


def text_problems(value: object, name: str) -> list[str]:
    """Forbidden characters (`U+001B`) and over-long texts anywhere in `value`."""
    if isinstance(value, dict) and (texts := _flat_texts(value)) is not None and _clean(texts):
        return []  # the common case, fast: a million rows are checked this way
    problems = []
    for where, text in strings(value, name):
        character = forbidden_character(text)
        if character is not None:
            problems.append(f"{where}: {refusal(character)}")
        elif len(text) > MAX_TEXT_CHARS:
            problems.append(f"{where}: {len(text)} characters (at most {MAX_TEXT_CHARS})")
    return problems


# What a field of a JSON record must be. CSV cells are all text and are parsed strictly
# by the row checks; JSON says the type itself, so a wrong one is refused, never coerced.
TEXT, KEY, NUMBER, FLAG, TEXTS = ("text", "text or an integer", "a number", "true or false",
                                  "a list of texts")
OBJECTS = "a list of objects (or its JSON text)"  # CSV cells give the JSON text
_ACCEPTS = {
    TEXT: lambda v: isinstance(v, str),
    OBJECTS: lambda v: isinstance(v, str) or (isinstance(v, list)
                                               and all(isinstance(item, dict) for item in v)),
    KEY: lambda v: isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool)),
    NUMBER: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    FLAG: lambda v: isinstance(v, bool),
    TEXTS: lambda v: isinstance(v, list) and all(isinstance(item, str) for item in v),
}


def _json_name(value: object) -> str:
    return {bool: "true/false", int: "a number", float: "a number", str: "text",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def type_problems(record: dict[str, object], schema: dict[str, str]) -> list[str]:
    """Fields of a JSON record whose value is not of the type `schema` gives (null is
    always allowed here: whether a field may be empty is the row checks' business)."""
    wrong = [name for name, value in record.items()
             if value is not None and name in schema and not _ACCEPTS[schema[name]](value)]
    if not wrong:
        return []
    order = list(schema)
    return [f"{name} must be {schema[name]}, not {_json_name(record[name])}"
            for name in sorted(wrong, key=order.index)]


def record_problems(record: dict[str, object], schema: dict[str, str] | None = None
                    ) -> list[str]:
    """Everything wrong with one record before its fields are read: characters and sizes
    of every text (keys too), and with a `schema` (JSON input) the type of every field."""
    problems = text_problems(record, "")
    if schema is not None:
        problems += type_problems(record, schema)
    return problems
