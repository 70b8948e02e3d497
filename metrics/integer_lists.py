"""A vectorised reader for the shape that large ranked-list files have: a JSON object of
canonical non-negative integer keys, each with a non-empty list of canonical non-negative
integers (`{"391895": [12, 7, …], …}`, the eccv-caption layout as `json.dump` writes it).

`json` turns the 30 M ids of a full COCO 5K ranking into 30 M Python objects; this reader
works on the bytes with NumPy instead, a few megabytes at a time (so that its scratch
arrays are reused rather than fresh memory, which costs more than the arithmetic): every
byte must be a digit, JSON whitespace or one of `{}[],:"`; the tokens (structural bytes
and the first digit of each number) must follow the grammar, checked by a table of
allowed token triples; the numbers are read by `np.fromstring`. Anything outside that
shape (string ids, leading zeros, signs, escapes, empty lists, numbers of 2^31 or more,
malformed JSON) returns None, and the caller reads the file with `json`, which accepts
exactly what JSON allows and names the line of an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from mmap import mmap

import numpy as np

CHUNK_BYTES = 1 << 22
_ALLOWED_BYTES = b'0123456789{}[],:" \t\n\r'
_LARGEST = 2**31 - 1  # numbers are kept as int32; larger ones are left to json

# Token classes (the bytes above 0x20: whitespace makes no token), plus the two ends.
START, OPEN_OBJECT, CLOSE_OBJECT, OPEN_LIST, CLOSE_LIST, COMMA, COLON, QUOTE, NUMBER, END = \
    range(10)
_CLASS_OF_BYTE = np.zeros(256, dtype=np.uint16)
for _byte, _class in zip(b'{}[],:"', (OPEN_OBJECT, CLOSE_OBJECT, OPEN_LIST, CLOSE_LIST,
                                       COMMA, COLON, QUOTE), strict=True):
    _CLASS_OF_BYTE[_byte] = _class
_CLASS_OF_BYTE[ord("0") : ord("9") + 1] = NUMBER
_SPACE_FOR_NON_DIGITS = bytes(byte if ord("0") <= byte <= ord("9") else ord(" ")
                              for byte in range(256))

# The grammar over roles, a role being a class told apart by the class before it: an
# opening quote follows `{` or `,`; a key follows a quote; an entry comma follows `]`.
# Each role has one place in `{"K":[V,V…],"K":[V…]}`, so checking every (role, next
# role) pair, that is every triple of classes, checks the whole grammar.
_FOLLOWERS = {
    "start": {"{"}, "{": {"open-quote"}, "open-quote": {"key"}, "key": {"close-quote"},
    "close-quote": {":"}, ":": {"["}, "[": {"value"}, "value": {"list-comma", "]"},
    "list-comma": {"value"}, "]": {"entry-comma", "}"}, "entry-comma": {"open-quote"},
    "}": {"end"},
}


def _role(previous: int, current: int) -> str:
    if current == QUOTE:
        return "open-quote" if previous in (OPEN_OBJECT, COMMA) else "close-quote"
    if current == NUMBER:
        return "key" if previous == QUOTE else "value"
    if current == COMMA:
        return "entry-comma" if previous == CLOSE_LIST else "list-comma"
    return {START: "start", OPEN_OBJECT: "{", CLOSE_OBJECT: "}", OPEN_LIST: "[",
            CLOSE_LIST: "]", COLON: ":", END: "end"}[current]


_ALLOWED_TRIPLES = np.zeros(1000, dtype=bool)
for _first, _second, _third in product(range(10), repeat=3):
    _ALLOWED_TRIPLES[100 * _first + 10 * _second + _third] = (
        _role(_second, _third) in _FOLLOWERS.get(_role(_first, _second), set()))


class _Outside(Exception):
    """The bytes are not of the shape this reader takes."""


@dataclass(frozen=True)
class IntegerLists:
    """Every number of the file in order (each key followed by its list's values) and
    where the keys are among them."""

    numbers: np.ndarray  # int32
    key_index: np.ndarray  # int64, the position of each key in `numbers`
    lengths: np.ndarray  # int64, the length of each key's list

    @property
    def keys(self) -> np.ndarray:
        return self.numbers[self.key_index].astype(np.int64)

    def rows(self) -> np.ndarray | None:
        """(keys x length) view of the values when every list has the same length."""
        if len(self.lengths) == 0 or (self.lengths != self.lengths[0]).any():
            return None
        return self.numbers.reshape(len(self.lengths), -1)[:, 1:]

    def values(self) -> np.ndarray:
        """The lists' values concatenated (a copy)."""
        return np.delete(self.numbers, self.key_index)


def parse_integer_lists(data: bytes | mmap, *, chunk_bytes: int = CHUNK_BYTES
                        ) -> IntegerLists | None:
    """The numbers of `data` (bytes or an mmap of the file), or None when it is not
    exactly such an object. Chunks are at least `chunk_bytes` long."""
    size = len(data)
    numbers = np.empty(size // 2 + 1, dtype=np.int32)  # pages are touched only as filled
    context = np.array([START, START], dtype=np.uint16)  # the last two token classes
    key_tokens, filled = [], 0
    tokens = start = 0
    try:
        while start < size:
            end = data.find(b",", start + chunk_bytes)  # a chunk never splits a number
            end = size if end < 0 else end + 1
            chunk_numbers, framed = _read_chunk(data[start:end], context)
            key_tokens.append(np.flatnonzero((framed[1:-1] == QUOTE)
                                             & (framed[2:] == NUMBER)) + tokens)
            numbers[filled : filled + len(chunk_numbers)] = chunk_numbers
            filled += len(chunk_numbers)
            tokens += len(framed) - 2
            context = framed[-2:]
            start = end
    except _Outside:
        return None
    if size == 0 or not _ALLOWED_TRIPLES[100 * context[0] + 10 * context[1] + END]:
        return None
    # Tokens from a key to the next: K " : [ then 2L - 1 for L values, then ] , " (2L + 6);
    # from the last key to the end: 2L + 5.
    starts = np.concatenate(key_tokens)
    lengths = (np.diff(np.append(starts, tokens + 1)) - 6) // 2
    key_index = np.cumsum(lengths + 1) - (lengths + 1)
    return IntegerLists(numbers[:filled], key_index, lengths)


def _read_chunk(chunk: bytes, context: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the chunk's numbers, the classes of its tokens after the two of `context`, those
    of the tokens before it); _Outside when the chunk breaks the grammar. The previous
    chunk ended with a comma, so no number or key straddles the boundary."""
    if chunk.translate(None, _ALLOWED_BYTES):
        raise _Outside
    raw = np.frombuffer(chunk, dtype=np.uint8)
    digit = (raw >= ord("0")) & (raw <= ord("9"))
    continued = np.zeros_like(digit)  # a digit after a digit: not the start of a number
    np.logical_and(digit[1:], digit[:-1], out=continued[1:])
    leading_zero = (raw[:-1] == ord("0")) & digit[1:]
    if np.greater(leading_zero, continued[:-1]).any():
        raise _Outside  # `01`: not JSON, or (as a key) an id that is not an integer
    quotes = np.flatnonzero(raw == ord('"'))
    after = digit[np.minimum(quotes + 1, len(raw) - 1)] & (quotes + 1 < len(raw))
    before = digit[quotes - 1] & (quotes > 0)
    if not (after | before).all():
        raise _Outside  # a space inside a key (or a quote next to nothing): not an integer
    framed = np.concatenate((context, _CLASS_OF_BYTE[np.compress(np.greater(raw > 32,
                                                                          continued), raw)]))
    codes = framed[:-2] * 100
    codes += framed[1:-1] * 10
    codes += framed[2:]
    if not _ALLOWED_TRIPLES[codes].all():
        raise _Outside
    count = np.count_nonzero(framed[2:] == NUMBER)
    numbers = np.fromstring(chunk.translate(_SPACE_FOR_NON_DIGITS), dtype=np.int64, sep=" ")
    if count == 0:
        numbers = numbers[:0]  # fromstring reads blank text as one 0
    if len(numbers) != count or (count and numbers.max() > _LARGEST):
        raise _Outside
    return numbers, framed
