"""Read CSV, JSONL (and our own Parquet exports) into (line number, record) pairs,
strictly."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from pathlib import Path

from rubrics.escape import from_spreadsheet
from rubrics.files import regular_file
from rubrics.json_limits import utf8_problem
from storage.errors import InputError, Problem, Problems
from storage.imports.untrusted import (
    JsonProblem,
    clean_source,
    load_json,
    text_problems,
    type_problems,
)

Record = dict[str, object]
# (line number, record, whether its source is clean: see `storage.imports.untrusted.clean_source`)
Parsed = Iterator[tuple[int, Record, bool]]
# How far a read is, (done, total): bytes of a CSV or JSON-lines file, rows of a Parquet one.
ReadProgress = Callable[[int, int], None]
PROGRESS_RECORDS = 16_384  # records between two progress reports


def _unreadable(path: Path, exc: OSError | ValueError) -> InputError:
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return InputError([Problem(path, 0, f"cannot read file: {reason}")])


def _regular(path: Path) -> None:
    """Refuse, before opening it, what is not a regular file: opening a FIFO for reading
    blocks until a writer comes (which may be never); a device or a folder is no file to
    import (`rubrics.files.regular_file`)."""
    try:
        regular_file(path)
    except ValueError as exc:
        message = str(exc).removeprefix(f"{path}: ").removeprefix("cannot read: ")
        raise InputError([Problem(path, 0, message if "not a regular file" in message
                                  else f"cannot read file: {message}")]) from None


def read_text(path: Path) -> str:
    """Decode a file as UTF-8 (a BOM is allowed), naming the line of the first bad byte."""
    _regular(path)
    try:
        raw = path.read_bytes()
    except (OSError, ValueError) as exc:
        raise _unreadable(path, exc) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError([Problem(path, *utf8_problem(raw, exc.start))]) from exc


class _Position:
    """How many bytes of a file its reader has taken so far (0 before it opens)."""

    def __init__(self) -> None:
        self.handle: io.TextIOWrapper | None = None

    def bytes_read(self) -> int:
        return 0 if self.handle is None or self.handle.closed else self.handle.buffer.tell()


def _lines(path: Path, newline: str, problems: Problems, position: _Position | None = None
           ) -> Iterator[str]:
    """The file's lines, decoded as UTF-8 (a BOM is allowed) while they are read, so that
    a large file is never held whole. `newline` as `open()` takes it: "" ends lines at LF,
    CR and CRLF (CSV), LF at LF only (JSON lines). `position` follows the bytes read. From
    the first bad byte on, the file is read again past the lines already given, each bad
    byte reported (`_past_bad_bytes`), so that the rest of the file is still checked."""
    _regular(path)
    lines_read = 0
    try:
        with open(path, encoding="utf-8-sig", newline=newline) as handle:
            if position is not None:
                position.handle = handle
            for line in handle:
                lines_read += 1
                yield line
        return
    except UnicodeDecodeError:
        pass  # the lines after it are read below
    except (OSError, ValueError) as exc:
        raise _unreadable(path, exc) from None
    try:
        with open(path, encoding="utf-8-sig", newline=newline,
                  errors="surrogateescape") as handle:
            if position is not None:
                position.handle = handle
            yield from _past_bad_bytes(handle, lines_read, problems)
    except (OSError, ValueError) as exc:
        raise _unreadable(path, exc) from None


def _past_bad_bytes(lines: Iterator[str], lines_read: int, problems: Problems
                    ) -> Iterator[str]:
    """The `lines` (decoded with surrogateescape) after the first `lines_read`: a line
    with bad bytes is reported (its first one, with its column) and given with U+FFFD in
    their place, so that its other problems, and the other lines', are found in the same
    pass."""
    for number, line in enumerate(lines, start=1):
        if number <= lines_read:
            continue
        raw = line.encode("utf-8", "surrogateescape")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.add(number, utf8_problem(raw, exc.start)[1])
            text = raw.decode("utf-8", "replace")
        yield text


def _csv_records(lines: Iterator[str], problems: Problems) -> Parsed:
    reader = csv.reader(lines, strict=True)
    try:
        header = next(reader)
    except StopIteration:
        problems.add(1, "empty file: expected a header row")
        return
    except csv.Error as exc:
        problems.add(1, f"malformed CSV header: {exc}")
        return
    columns = [name.strip().lower() for name in header]
    seen: set[str] = set()
    for name in columns:
        if not name:
            problems.add(1, "empty column name in the header")
        elif name in seen:
            problems.add(1, f"column {name!r} appears twice in the header")
        seen.add(name)
    names_clean = not text_problems(dict.fromkeys(columns), "")
    width = len(columns)
    line_after = reader.line_num
    while True:
        start = line_after + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            problems.add(start, f"malformed CSV: {exc}")
            return
        line_after = reader.line_num
        if blank_row(row):
            continue
        if len(row) != width:
            problems.add(start, f"row has {len(row)} fields, the header has {width}")
            continue
        # the cells joined by a comma, which no escape or CR LF pair can straddle: what
        # `clean_source` judges (the cells are all a record's texts)
        text = ",".join(row)
        yield (start, dict(zip(columns, csv_cells(row, text), strict=True)),
               names_clean and clean_source(text))


def blank_row(row: list[str]) -> bool:
    """A CSV row of empty cells (spaces at most): skipped, as a blank line is."""
    return not (row and row[0].strip()) and not "".join(row).strip()


def csv_cells(row: list[str], text: str) -> list[str | None]:
    """A CSV row's cells as a record holds them (`text`: the cells joined by commas):
    stripped, None where empty, line breaks in a quoted cell as newlines, and a cell that
    an export escaped for spreadsheets (`'=…`) as it was (looked for only in a row that has
    a `'`)."""
    if "\r" in text:
        row = [cell.replace("\r\n", "\n") for cell in row]
    if "'" in text:
        return [(from_spreadsheet(cell) if cell[:1] == "'" else cell) or None
                for cell in map(str.strip, row)]
    return [cell.strip() or None for cell in row]


def _jsonl_records(lines: Iterator[str], problems: Problems) -> Parsed:
    # lines end at newlines only: str.splitlines() also breaks at C1 and Unicode
    # separators, which would put the problems on the wrong lines
    names: dict[tuple, tuple[str, ...]] = {}  # the keys of a record -> its field names
    for number, raw in enumerate(lines, start=1):
        line = raw.removesuffix("\n")
        if not line.strip():
            continue
        try:
            value = load_json(line)
        except JsonProblem as exc:
            problems.add(number, str(exc))
            continue
        if not isinstance(value, dict):
            problems.add(number, f"expected a JSON object, found {type(value).__name__}")
            continue
        keys = tuple(value)
        if keys not in names:
            if len(names) > 1024:  # records of many shapes: no more remembered
                names.clear()
            names[keys] = tuple(str(key).strip().lower() for key in keys)
        record = (value if names[keys] == keys
                  else dict(zip(names[keys], value.values(), strict=True)))
        if len(record) < len(value):  # two keys alike but for letter case or spaces
            named = names[keys]
            twice = next(name for at, name in enumerate(named) if name in named[:at])
            problems.add(number, f"key {twice!r} appears twice in one object (letter case "
                                 "and spaces aside)")
            continue
        if "" in record.values():
            record = {key: (None if item == "" else item) for key, item in record.items()}
        yield number, record, clean_source(raw)


def _parquet_records(path: Path) -> Parsed:
    """Rows of a Parquet file (our own export), numbered from 1 like data lines. Arrow may
    decode a column only when it is used (a string column that is not UTF-8), so every
    error of the reading and of the conversion to records names the file."""
    import pandas as pd
    import pyarrow

    try:
        frame = pd.read_parquet(path)
        rows = frame.to_dict(orient="records")
    except MemoryError:
        raise InputError([Problem(path, 0, "does not fit in memory")]) from None
    except (pyarrow.ArrowException, OSError, ValueError, TypeError, KeyError, IndexError,
            NotImplementedError, OverflowError, RuntimeError, UnicodeError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError([Problem(path, 0, f"cannot read Parquet file: {reason}")]
                         ) from None

    def plain(value: object) -> object:
        if hasattr(value, "tolist"):  # numpy arrays and scalars
            value = value.tolist()
        if not isinstance(value, (str, list, dict)) and pd.isna(value):  # NaN, NaT, NA
            return None
        return None if value == "" else value

    for number, record in enumerate(rows, start=1):
        yield number, {str(key).strip().lower(): plain(item)
                       for key, item in record.items()}, False


FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}


def iter_records(path: Path, fmt: str | None = None, *, schema: dict[str, str] | None = None,
                 problems: Problems, progress: ReadProgress | None = None
                 ) -> Iterator[tuple[int, Record]]:
    """The records of a CSV or JSON-lines file (`fmt` overrides the format the suffix gives)
    that pass the checks of untrusted input (characters, sizes; with `schema` the type of
    every field of a JSON record), read as they are needed: a large file is streamed. The
    problems of the others go to `problems`; a file without records raises InputError.
    `progress` hears how far the read is every PROGRESS_RECORDS records and at the end."""
    fmt = fmt or FORMATS.get(path.suffix.lower())
    if fmt not in {"csv", "jsonl", "parquet"}:
        raise InputError([Problem(path, 0, "unknown format: expected .csv, .jsonl or "
                                           ".parquet")])
    position = _Position()
    if fmt == "parquet":
        _regular(path)
        records = _parquet_records(path)
        schema = None
    elif fmt == "csv":
        records = _csv_records(_lines(path, "", problems, position), problems)
        schema = None
    else:
        records = _jsonl_records(_lines(path, "\n", problems, position), problems)
    report = _reporter(progress, path, fmt, position)
    found = 0
    for line, record, clean in records:
        found += 1
        if found % PROGRESS_RECORDS == 0:
            report(found, False)
        messages = [] if clean else text_problems(record, "")
        if schema is not None:
            messages += type_problems(record, schema)
        for message in messages:
            problems.add(line, message)
        if not messages:
            yield line, record
    if not found and (fmt == "parquet" or not problems.items):
        raise InputError([Problem(path, 1, "no records found")])
    report(found, True)


def _reporter(progress: ReadProgress | None, path: Path, fmt: str, position: _Position
              ) -> Callable[[int, bool], None]:
    """`progress` of the `records` read so far (`ended`: all of them): bytes of a CSV or
    JSON-lines file, its size read once; a Parquet file, read whole before its first
    record, is reported in rows at its end."""
    if progress is None:
        return lambda _records, _ended: None
    if fmt == "parquet":
        return lambda records, ended: progress(records, records) if ended else None
    try:
        size = path.stat().st_size
    except OSError:  # the read says why
        return lambda _records, _ended: None

    def report(_records: int, ended: bool) -> None:
        progress(size if ended else min(position.bytes_read(), size), size)

    return report


def read_records(path: Path, fmt: str | None = None, *, schema: dict[str, str] | None = None,
                 problems: Problems | None = None) -> list[tuple[int, Record]]:
    """All records of a file, as `iter_records` gives them. Without `problems` raises
    InputError listing every problem; with it, adds them there and leaves out the records
    that have any, so that the caller reports them together with its own."""
    found = problems or Problems(path)
    records = list(iter_records(path, fmt, schema=schema, problems=found))
    if problems is None:
        found.raise_if_any()
    return records
