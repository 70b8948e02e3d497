"""A vectorised reader for the shape that large ranked-list files have: a JSON object of
canonical non-negative integer keys, each with a non-empty list of canonical non-negative
integers (`{"391895": [12, 7, …], …}`, the eccv-caption layout as `json.dump` writes it).

`json` turns the 30 M ids of a full COCO 5K ranking into 30 M Python objects; this reader
works on the bytes with NumPy instead, a megabyte at a time (so that its scratch
arrays are reused rather than fresh memory, which costs more than the arithmetic): every
byte must be a digit, JSON whitespace or one of `{}[],:"`; the tokens (structural bytes
and the first digit of each number) must follow the grammar, checked by a table of
allowed token triples; the numbers are read eight bytes at a time (SWAR arithmetic on
64-bit words; `np.fromstring` for numbers of 8 digits or more). Anything outside that
shape (string ids, leading zeros, signs, escapes, empty lists, numbers of 2^31 or more,
malformed JSON) returns None, and the caller reads the file with `json`, which accepts
exactly what JSON allows and names the line of an error.

Chunks are read in order and parsed by a few threads at once (NumPy lets go of the
interpreter lock inside its loops), then joined in order: the grammar across chunk ends,
the numbers and the key positions are stitched by the reading thread.
"""

from __future__ import annotations

import io
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing, contextmanager
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import BinaryIO

import numpy as np

CHUNK_BYTES = 1 << 20  # measured here: faster than 256 or 512 KiB chunks, 1 or 2 threads
MAX_THREADS = 4


def idle_cores(loadavg: Path = Path("/proc/loadavg")) -> int:
    """Cores free for parsing threads now (at least 1, at most MAX_THREADS): on a busy
    machine more threads only add switching and page faults (measured here: 2 threads at
    load 1.5 on 2 cores took 15 % more CPU and longer than one). What is busy is read at
    this instant where Linux says it (the threads running or ready to run, this one
    included), not from the one-minute load average, which still counts for a minute a
    process that has just ended (a script's previous command, say) and would leave an
    idle core unused; elsewhere the load average stands in."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    return max(1, min(MAX_THREADS, cores, round(cores + 1 - _busy(loadavg))))


def _busy(loadavg: Path) -> float:
    """Threads running or ready to run now, this one included (the fourth field of
    /proc/loadavg, `running/total`); the one-minute load average where that is missing."""
    try:
        return float(loadavg.read_text(encoding="ascii").split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0


_ALLOWED_BYTES = b'0123456789{}[],:" \t\n\r'
_LARGEST = 2**31 - 1  # numbers are kept as int32; larger ones are left to json

# Token classes (the bytes above 0x20: whitespace makes no token), plus the two ends.
START, OPEN_OBJECT, CLOSE_OBJECT, OPEN_LIST, CLOSE_LIST, COMMA, COLON, QUOTE, NUMBER, END = \
    range(10)
_CLASSES = bytearray(256)
for _byte, _class in zip(b'{}[],:"', (OPEN_OBJECT, CLOSE_OBJECT, OPEN_LIST, CLOSE_LIST,
                                       COMMA, COLON, QUOTE), strict=True):
    _CLASSES[_byte] = _class
_CLASSES[ord("0") : ord("9") + 1] = bytes([NUMBER]) * 10
_CLASS_OF_BYTE = bytes(_CLASSES)  # a bytes.translate table
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

    def distinct_keys(self) -> bool:
        keys = np.sort(self.keys)
        return not (keys[1:] == keys[:-1]).any()

    def rows(self) -> np.ndarray | None:
        """(keys x length) view of the values when every list has the same length."""
        if len(self.lengths) == 0 or (self.lengths != self.lengths[0]).any():
            return None
        return self.numbers.reshape(len(self.lengths), -1)[:, 1:]

    def values(self) -> np.ndarray:
        """The lists' values concatenated (a copy)."""
        return np.delete(self.numbers, self.key_index)

    def lists(self) -> list[list[int]]:
        """Each key's list as Python integers (for small files)."""
        values = self.values().tolist()
        ends = np.cumsum(self.lengths).tolist()
        return [values[end - length : end]
                for end, length in zip(ends, self.lengths.tolist(), strict=True)]


def parse_integer_lists(source: Path | bytes, *, chunk_bytes: int = CHUNK_BYTES,
                        threads: int | None = None) -> IntegerLists | None:
    """The numbers of the file at `source` (or of these bytes), or None when it is not
    exactly such an object. The file is read a chunk of at least `chunk_bytes` at a
    time (no mapping of its pages, no copy of it in memory), `threads` chunks parsed at
    once (default: as many as there are idle cores)."""
    with _opened(source) as (stream, size), closing(_parsed_in_order(
            _chunks(stream, chunk_bytes), threads or idle_cores())) as parsed:
        numbers = np.empty(size // 2 + 1, dtype=np.int32)  # pages touched only as filled
        context = np.array([START, START], dtype=np.uint8)  # the last two token classes
        key_tokens, filled, tokens = [], 0, 0
        try:
            for chunk_numbers, classes, chunk_keys in parsed:
                framed = np.concatenate((context, classes[:2]))  # the triples across
                if filled + len(chunk_numbers) > len(numbers) or not _ALLOWED_TRIPLES[
                        _triples(framed)].all():  # (the file grew while read: json reads it)
                    return None
                context = np.concatenate((context, classes[-2:]))[-2:]
                key_tokens.append(chunk_keys + tokens)
                numbers[filled : filled + len(chunk_numbers)] = chunk_numbers
                filled += len(chunk_numbers)
                tokens += len(classes)
        except _Outside:
            return None
    ending = np.append(context, np.uint8(END))
    if not key_tokens or not _ALLOWED_TRIPLES[_triples(ending)].all():
        return None
    # Tokens from a key to the next: K " : [ then 2L - 1 for L values, then ] , " (2L + 6);
    # from the last key to the end: 2L + 5.
    starts = np.concatenate(key_tokens)
    lengths = (np.diff(np.append(starts, tokens + 1)) - 6) // 2
    key_index = np.cumsum(lengths + 1) - (lengths + 1)
    return IntegerLists(numbers[:filled], key_index, lengths)


def _parsed_in_order(pieces: Iterator[tuple[bytes, int]], threads: int
                     ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """`_read_chunk` of each piece, in order: on this thread, or on `threads` threads with
    at most two pieces each in flight (so that memory holds a few chunks, not the file)."""
    if threads <= 1:
        yield from (_read_chunk(*piece) for piece in pieces)
        return
    pool = ThreadPoolExecutor(threads)
    try:
        in_flight: deque[Future] = deque()
        for piece, size in pieces:
            in_flight.append(pool.submit(_read_chunk, piece, size))
            if len(in_flight) >= 2 * threads:
                yield in_flight.popleft().result()
        while in_flight:
            yield in_flight.popleft().result()
    finally:  # also when the caller stops early: pieces not yet parsed are dropped
        pool.shutdown(cancel_futures=True)


@contextmanager
def _opened(source: Path | bytes) -> Iterator[tuple[BinaryIO, int]]:
    if isinstance(source, bytes):
        yield io.BytesIO(source), len(source)
        return
    with open(source, "rb") as stream:
        yield stream, os.fstat(stream.fileno()).st_size


def _chunks(stream: BinaryIO, chunk_bytes: int) -> Iterator[tuple[bytes, int]]:
    """(piece, size): the stream in chunks that end just after a comma (or at its end),
    so that no number or key straddles two; each piece holds its chunk (`size` bytes)
    and 8 bytes more (the next chunk's, or spaces) for the words read at its numbers."""
    buffer = bytearray(chunk_bytes + 8)
    kept = 0  # bytes of the next chunk already at the start of the buffer
    while True:
        if kept == len(buffer) - 8:  # no comma in a whole buffer: read on into more room
            buffer.extend(bytes(len(buffer)))
        with memoryview(buffer) as view:
            read = stream.readinto(view[kept : len(buffer) - 8])
        end = kept + read
        cut = end if read == 0 else buffer.rfind(b",", 0, end) + 1
        if cut == 0:
            if read == 0:
                return
            kept = end
            continue
        buffer[end : end + 8] = b" " * 8
        with memoryview(buffer) as view:
            yield bytes(view[: cut + 8]), cut
        buffer[: end - cut] = buffer[cut:end]
        kept = end - cut
        if read == 0:
            return


def _triples(classes: np.ndarray) -> np.ndarray:
    """The code of each triple of consecutive token classes."""
    codes = np.multiply(classes[:-2], 100, dtype=np.uint16)
    codes += classes[1:-1] * np.uint8(10)
    codes += classes[2:]
    return codes


def _read_chunk(piece: bytes, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the numbers of the chunk `piece[:size]`, the classes of its tokens, which tokens
    are keys); _Outside when the chunk breaks the grammar (the triples across chunks are
    checked by the caller)."""
    raw = np.frombuffer(piece, dtype=np.uint8, count=size)
    if (raw < 32).any() and piece.translate(None, _ALLOWED_BYTES):
        raise _Outside  # control bytes; other bytes outside the grammar have no class
    digit = np.subtract(raw, ord("0"), dtype=np.uint8) < 10
    continued = np.zeros_like(digit)  # a digit after a digit: not the start of a number
    np.logical_and(digit[1:], digit[:-1], out=continued[1:])
    quotes = np.flatnonzero(raw == ord('"'))
    after = digit[np.minimum(quotes + 1, size - 1)] & (quotes + 1 < size)
    before = digit[quotes - 1] & (quotes > 0)
    if not (after | before).all():
        raise _Outside  # a space inside a key (or a quote next to nothing): not an integer
    tokens = np.compress(np.greater(raw > 32, continued), raw)
    classes = np.frombuffer(tokens.tobytes().translate(_CLASS_OF_BYTE), dtype=np.uint8)
    if not _ALLOWED_TRIPLES[_triples(classes)].all():
        raise _Outside
    words = np.ndarray((size,), dtype="<u8", buffer=piece, strides=(1,))[
        np.flatnonzero(np.greater(digit, continued))]
    numbers, lengths = _eight_digits(words)
    if (lengths == 8).any():  # 8 digits or more: read by np.fromstring
        numbers = _long_numbers(piece[:size], raw, digit, continued)
    elif (((words & 0xFF) == ord("0")) & (lengths > 1)).any():
        raise _Outside  # `01`: not JSON, or (as a key) an id that is not an integer
    keys = np.flatnonzero((classes[:-1] == QUOTE) & (classes[1:] == NUMBER)) + 1
    return numbers, classes, keys


_SWAR_STEPS = [(np.uint64(mask), np.uint64(factor), np.uint64(shift)) for mask, factor, shift in (
    (0x0F0F0F0F0F0F0F0F, 10 << 8 | 1, 8), (0x00FF00FF00FF00FF, 100 << 16 | 1, 16),
    (0x0000FFFF0000FFFF, 10000 << 32 | 1, 32))]


def _eight_digits(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(value, digit count) of the number starting each 8-byte little-endian word: the
    count is the position of the first non-digit byte (8 when there is none), the value
    that of the digits before it (SWAR: pairs, then fours, then eights of digits)."""
    digits = words - np.uint64(0x3030303030303030)
    outside = words + np.uint64(0x4646464646464646)
    outside |= digits
    outside &= np.uint64(0x8080808080808080)  # the high bit of each byte not a digit
    below = outside - np.uint64(1)
    below &= ~outside  # the bits below the first byte that is not a digit: 8 x count + 7
    bits = np.bitwise_count(below)
    value = digits << (np.uint64(71) - bits)  # drop what follows the number
    for mask, factor, shift in _SWAR_STEPS:
        value &= mask
        value *= factor
        value >>= shift
    return value, bits >> 3


def _long_numbers(chunk: bytes, raw: np.ndarray, digit: np.ndarray, continued: np.ndarray
                  ) -> np.ndarray:
    """The numbers of a chunk that has numbers of 8 digits or more."""
    leading_zero = (raw[:-1] == ord("0")) & digit[1:]
    if np.greater(leading_zero, continued[:-1]).any():
        raise _Outside
    numbers = np.fromstring(chunk.translate(_SPACE_FOR_NON_DIGITS), dtype=np.int64, sep=" ")
    if len(numbers) != np.count_nonzero(np.greater(digit, continued)) or (
            numbers.max(initial=0) > _LARGEST):
        raise _Outside
    return numbers
