"""Files a user names are untrusted: what every reader of one in `metrics/` checks before it
interprets a byte. `storage/imports/untrusted.py` is the import's counterpart; metrics cannot
import storage, so the JSON limits and number hooks they share live in the bottom layer,
`rubrics/json_limits.py`.

- `regular_file` (from `rubrics.files`, the one check every reader of a user's file
  makes): a FIFO, a device or a directory is refused before it is opened (opening a FIFO
  for reading blocks until a writer comes, which may be never).
- `load_json`: JSON within limits: nesting at most MAX_DEPTH levels, numbers written with
  at most MAX_NUMBER_CHARS characters and finite (no NaN, no Infinity, no 1e999), integers
  of at most MAX_INTEGER_DIGITS digits, no object naming a key twice; every problem is
  `file:line: problem` in the reader's own error type.
- `open_npy` and `Npz`: NumPy arrays whose header (dtype, shape) is read and checked, and
  checked against the bytes the file (or zip member) really holds, before any of the data
  is read or any memory for it is allocated; never a pickle.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
import sys
import tokenize
import warnings
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib import format as npy_format

from rubrics.files import regular_file  # the metrics readers take it from here
from rubrics.json_limits import MAX_DEPTH as MAX_DEPTH
from rubrics.json_limits import MAX_NUMBER_CHARS as MAX_NUMBER_CHARS
from rubrics.json_limits import (
    Refused,
    RepeatedKey,
    integer_hook,
    line_of,
    real_hook,
    refuse_constant,
    refused_line,
    repeated_key_problem,
    too_deep,
    unique_keys,
)

MAX_INTEGER_DIGITS = 20  # storage.imports.untrusted has 18 (int64 columns); ids may be uint64
DEFLATE_RATIO = 1032  # deflate's largest possible expansion: no member can hold more

ErrorType = type[ValueError]  # the reader's own error class


# --- JSON ------------------------------------------------------------------------------
# The number hooks, nesting check and limits are the import's (rubrics.json_limits).

_INTEGER = integer_hook(MAX_INTEGER_DIGITS)
_REAL = real_hook(finite=True)


def load_json(text: str, path: Path | str, error: ErrorType, *,
              object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
              flat: bool = False, integers: bool = True, reals: bool = True) -> Any:
    """`json.loads(text)` within the limits, or `error("path:line: problem")`.

    NaN, Infinity and -Infinity are always refused (a check that costs nothing when a
    file has none). Numbers are checked as they are parsed: integers of at most
    MAX_INTEGER_DIGITS digits, other numbers written with at most MAX_NUMBER_CHARS
    characters and finite (1e999 is not). A check per number doubles the time `json`
    takes over 30 M ids or a COCO file's 13 M polygon coordinates, so a reader whose
    numbers that matter are ids it checks itself (`normalize_id` bounds them) turns the
    check off for the kind of number its files are full of: `integers=False` (Python's
    parser still refuses more than 4,300 digits, named here with file and line),
    `reals=False` (a real number is then never used). Nesting deeper than MAX_DEPTH
    levels is refused (a walk over the parsed value) unless `flat=True`, for files whose
    shape the caller checks to be an object of lists of ids (anything else in a list
    refused): two levels, at no cost. An object naming a key twice is refused
    (`unique_keys`), unless the caller gives an `object_pairs_hook` of its own, which
    must then refuse it with its own words (a query named twice)."""
    hooks: dict[str, Any] = {"parse_constant": refuse_constant,
                             "object_pairs_hook": object_pairs_hook or unique_keys}
    if integers:
        hooks["parse_int"] = _INTEGER
    if reals:
        hooks["parse_float"] = _REAL
    try:
        value = json.loads(text, **hooks)
    except Refused as exc:
        raise error(f"{path}:{refused_line(text, exc)}: {exc}") from None
    except RepeatedKey:
        line, problem = repeated_key_problem(text)
        raise error(f"{path}:{line}: {problem}") from None
    except json.JSONDecodeError as exc:
        raise error(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise error(f"{path}: JSON nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        if type(exc) is not ValueError:  # the caller's hook refused something
            raise
        # Python's own limit on the digits of an integer (integers not checked here)
        found = re.search(f"[0-9]{{{sys.get_int_max_str_digits() + 1},}}", text)
        if found is None:
            raise error(f"{path}: not valid JSON: {exc}") from None
        raise error(f"{path}:{line_of(text, found.start())}: a number with "
                    f"{len(found.group())} digits (at most {MAX_INTEGER_DIGITS})") from None
    if not flat and text.count("[") + text.count("{") > MAX_DEPTH and too_deep(value):
        raise error(f"{path}: JSON nested deeper than {MAX_DEPTH} levels")
    return value


# --- NumPy arrays ----------------------------------------------------------------------

REAL_KINDS = "iuf"  # scores: integers and floats (no bool, complex, object, structured)
ID_KINDS = "iuU"  # ids: integers or (unicode) strings


@dataclass(frozen=True)
class ArrayHeader:
    """What an array's .npy header declares, and where its data starts."""

    shape: tuple[int, ...]
    fortran_order: bool
    dtype: np.dtype
    offset: int

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


_CORRUPT = (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error,
            NotImplementedError, RuntimeError, struct.error, OverflowError, KeyError,
            IndexError, TypeError, SyntaxError, tokenize.TokenError)


def _read_header(stream, where: str, error: ErrorType) -> ArrayHeader:
    try:
        version = npy_format.read_magic(stream)
        with warnings.catch_warnings():  # a header is a Python literal: bad escapes warn
            warnings.simplefilter("ignore")
            if version == (1, 0):
                shape, fortran_order, dtype = npy_format.read_array_header_1_0(stream)
            elif version == (2, 0):
                shape, fortran_order, dtype = npy_format.read_array_header_2_0(stream)
            else:
                raise ValueError(f"version {version[0]}.{version[1]} is not read here")
        offset = stream.tell()
    except _CORRUPT as exc:
        raise error(f"{where}: not a readable .npy array ({_reason(exc)})") from None
    if not all(type(d) is int and d >= 0 for d in shape):
        raise error(f"{where}: the header declares an impossible shape {shape}")
    return ArrayHeader(tuple(shape), bool(fortran_order), dtype, offset)


def _reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def check_array(header: ArrayHeader, where: str, error: ErrorType, *, kinds: str,
                what: str, ndim: tuple[int, ...]) -> None:
    """Refuse a dtype outside `kinds` (and any structured, object or over-wide one) and a
    number of dimensions outside `ndim`."""
    dtype = header.dtype
    if (dtype.kind not in kinds or dtype.names is not None or dtype.subdtype is not None
            or (dtype.kind == "f" and dtype.itemsize > 8)):
        raise error(f"{where}: {_dtype_name(dtype)} values; {what}")
    if len(header.shape) not in ndim:
        dims = " or ".join(f"{n}-D" for n in ndim)
        raise error(f"{where}: a {len(header.shape)}-D array {header.shape}; expected {dims}")


def _dtype_name(dtype: np.dtype) -> str:
    if dtype.names is not None or dtype.subdtype is not None:
        return "structured"
    return {"b": "true/false", "c": f"complex ({dtype.name})", "O": "Python object",
            "S": "byte-string", "V": "raw-bytes", "M": "datetime", "m": "timedelta"
            }.get(dtype.kind, dtype.name)


def open_npy(path: Path, error: ErrorType, *, kinds: str, what: str,
             shape: tuple[int, ...], expected: str = "") -> np.ndarray:
    """A read-only memory map of the `.npy` at `path` after its header is checked: dtype
    (`kinds`; `what` says which are allowed), the `shape` expected (`expected` says
    why), and a file that holds exactly the bytes the header declares (no truncated
    file, no trailing data)."""
    regular_file(path, error)
    try:
        with open(path, "rb") as stream:
            if os.fstat(stream.fileno()).st_size == 0:
                raise error(f"{path}: an empty file, not a .npy array")
            header = _read_header(stream, str(path), error)
            check_array(header, str(path), error, kinds=kinds, what=what,
                        ndim=(len(shape),))
            if header.shape != shape:
                raise error(f"{path}: the matrix is {' x '.join(map(str, header.shape))} "
                            f"but {expected or ' x '.join(map(str, shape)) + ' was expected'}")
            size = os.fstat(stream.fileno()).st_size
            if size != header.offset + header.nbytes:
                raise error(f"{path}: the header declares {header.nbytes:,} bytes of data "
                            f"but the file holds {size - header.offset:,} (truncated or "
                            "not a .npy)")
            if header.nbytes == 0:
                return np.zeros(shape, dtype=header.dtype)
            return np.memmap(stream, dtype=header.dtype, mode="r", offset=header.offset,
                             shape=shape, order="F" if header.fortran_order else "C")
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror or exc}") from None


class Npz:
    """An `.npz` opened for checked reading (a context manager). `header(name)` reads one
    array's header and checks it against its zip member (the declared bytes must be what
    the member holds, and what its compressed bytes can possibly hold); `array(name)`
    reads the data, only after that. Zip problems of any kind end in `error`."""

    def __init__(self, path: Path, error: ErrorType) -> None:
        self.path, self.error = Path(path), error
        regular_file(path, error)
        self._size = 0
        try:
            self._file = open(path, "rb")  # noqa: SIM115 (closed by close())
        except OSError as exc:
            raise error(f"{path}: cannot read: {exc.strerror or exc}") from None
        try:
            self._size = os.fstat(self._file.fileno()).st_size
            self._zip = zipfile.ZipFile(self._file)
            infos = self._zip.infolist()
        except _CORRUPT as exc:
            self._file.close()
            reason = "an empty file" if self._size == 0 else _reason(exc)
            raise error(f"{path}: not a readable .npz (zip) archive ({reason})") from None
        self._members = {info.filename.removesuffix(".npy"): info for info in infos
                         if info.filename.endswith(".npy")}
        self._headers: dict[str, ArrayHeader] = {}

    def __enter__(self) -> Npz:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._zip.close()
        self._file.close()

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(self._members)

    def _where(self, name: str) -> str:
        return f"{self.path}: {name}"

    def header(self, name: str) -> ArrayHeader:
        if name in self._headers:
            return self._headers[name]
        info, where = self._members[name], self._where(name)
        if info.flag_bits & 0x1:
            raise self.error(f"{where}: an encrypted zip member")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise self.error(f"{where}: zip compression method {info.compress_type} (NumPy "
                             "writes stored or deflated members)")
        limit = (info.compress_size if info.compress_type == zipfile.ZIP_STORED
                 else DEFLATE_RATIO * info.compress_size + 1024)
        if info.header_offset + info.compress_size > self._size or info.file_size > limit:
            raise self.error(f"{where}: the zip member declares more bytes than the file "
                             "holds (truncated or corrupt)")
        try:
            with self._zip.open(info) as stream:
                header = _read_header(stream, where, self.error)
        except self.error:
            raise
        except _CORRUPT as exc:
            raise self.error(f"{where}: not a readable zip member ({_reason(exc)})") from None
        if header.dtype.hasobject:  # (a pickle: its size says nothing, it is never read)
            raise self.error(f"{where}: an array of Python objects (dtype=object, pandas' "
                             "`.values` of text); save ids as str or int arrays "
                             "(np.asarray(ids, dtype=str)) and numbers as float arrays")
        if header.offset + header.nbytes != info.file_size:
            raise self.error(f"{where}: the header declares {header.shape} "
                             f"{header.dtype.name} ({header.nbytes:,} bytes) but the member "
                             f"holds {max(0, info.file_size - header.offset):,} bytes")
        self._headers[name] = header
        return header

    def array(self, name: str) -> np.ndarray:
        """The array `name`; its header must have been read (and checked) first."""
        header = self._headers[name]
        try:
            with self._zip.open(self._members[name]) as stream:
                return npy_format.read_array(stream, allow_pickle=False)
        except MemoryError:
            raise self.error(f"{self._where(name)}: {header.nbytes:,} bytes do not fit in "
                             "memory") from None
        except _CORRUPT as exc:
            raise self.error(f"{self._where(name)}: cannot read the data ({_reason(exc)})"
                             ) from None
