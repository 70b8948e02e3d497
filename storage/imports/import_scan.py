"""The quick check of a large CSV import: its rows' own values, checked a column at a time
(pyarrow) before the full pass, so that a bad value anywhere in a file of a million rows is
refused in seconds instead of after the full pass (which reads every row in Python,
decodes every image and checks each row against the others and the database).

A row is checked by its signature: for each column the row's own checks read, the cell's
value (stage, scores, penalties and their types, flags, reasons, rubric), whether it is
empty (texts: image, system, caption, references, annotator, notes) or whether it is
empty, valid or not (times and seconds, which differ from row to row). Rows of one
signature pass or fail `RowReader.row`'s checks together, so one row of each is checked,
and every row of a failing signature then gets the full pass's message, made by the same
code (once for each signature and bad time or seconds: all that goes into it besides the
signature's values, `_failing_row_problems`). So the quick check never refuses a row that
the full pass accepts; it may miss problems (images, repeated rows, the database, THUMB's
protocol, forbidden characters in a row whose values pass), which the full pass then finds.
Where it cannot read the file as the full pass does (bad UTF-8, quoting that Python's
`csv` refuses, a row of the wrong width, a line of spaces, a header problem, too many
signatures), it finds nothing and the full pass reports."""

from __future__ import annotations

import csv
import functools
import itertools
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from rubrics import Rubric
from rubrics.files import regular_file
from rubrics.model import parse_rubric
from storage.errors import Problem
from storage.imports.images import start_worker
from storage.imports.import_files import FORMATS, ReadProgress, blank_row, csv_cells
from storage.imports.import_rows import (
    ALIASES,
    CAPTION_COLUMNS,
    RATING_COLUMNS,
    REFERENCE_COLUMN,
    RUBRIC_COLUMN,
    WORKFLOW_COLUMNS,
    RowError,
    RowReader,
    missing_columns,
    normalise_keys,
    rating_seconds,
    timestamp,
    unknown_columns,
)
from storage.imports.untrusted import clean_source, text_problems

if TYPE_CHECKING:
    import numpy
    import pyarrow

QUICK_BYTES = 16 * 2**20  # a smaller file's full pass takes a few seconds: no quick check
# What pyarrow parses at a time: its reader holds many blocks ahead, so the process's
# memory grows with it (about 170 MB for a million rows at 1 MB, 150 MB more at 4 MB), and its
# allocator keeps what it freed unless asked after each batch (`release_unused`).
BLOCK_BYTES = 2**20
MAX_SIGNATURES = 20_000  # more distinct signatures than this: the check stops, finds nothing
# What the refusal says after the problems the quick check found.
NOTE = ("(a quick check of the rows' values found these; the images, repeated rows, the "
        "database and THUMB's protocol are checked once they are fixed)")

# The columns whose checks depend on whether the cell is empty only (texts: CSV cells are
# never JSON), and those checked one value at a time (times and seconds differ on every row
# of an export); the others that `RowReader.row` reads go in the signature as they are.
PRESENCE_COLUMNS = {"image", "image_id", "system", "caption", "caption_id", "references",
                    "annotator", "note", "resolution_note", "fluency_round_by"}
VALUE_CHECKS: dict[str, Callable[[str], object]] = {
    **{name: (lambda text, name=name: timestamp({name: text}, name))
       for name in ("created_at", "updated_at", "resolved_at", "fluency_round_at")},
    "seconds": lambda text: rating_seconds({"seconds": text}),
}
READ_COLUMNS = CAPTION_COLUMNS | RATING_COLUMNS | WORKFLOW_COLUMNS | {RUBRIC_COLUMN}
EMPTY, VALID, INVALID = 0, 1, 2


class _CannotScan(Exception):
    """The file cannot be read here as the full pass reads it: that pass reports."""


def quick_problems(path: Path, rubric: Rubric,
                   progress: ReadProgress | None = None) -> list[Problem]:
    """The problems of the rows of CSV file `path` (of QUICK_BYTES or more) that the quick
    check finds, with their lines and the full pass's messages; none for a smaller file,
    another format, or one it cannot read as the full pass does. `progress(done, total)`
    hears the bytes parsed. It runs in a process of its own: pyarrow and what its readers
    held would stay in this one for the full pass (about 110 MB more at the peak of a
    million rows' import)."""
    if FORMATS.get(path.suffix.lower()) != "csv":
        return []
    try:
        if regular_file(path).stat().st_size < QUICK_BYTES:
            return []
    except (OSError, ValueError):
        return []  # the full pass says why
    try:
        process = start_worker("storage.imports.import_scan", "serve_quick_check")
    except (OSError, ValueError):  # no interpreter to start: the full pass checks alone
        return []
    found: list[Problem] = []
    try:
        with process.stdin:  # type: ignore[union-attr]
            process.stdin.write(json.dumps(  # type: ignore[union-attr]
                [str(path), dict(rubric.definition), MAX_SIGNATURES]).encode())
        for line in process.stdout:  # type: ignore[union-attr]
            kind, *values = json.loads(line)
            if kind == "read" and progress is not None:
                progress(*values)
            elif kind == "problems":
                message, lines = values
                found += [Problem(path, line, message) for line in lines]
            elif kind == "cannot":
                found.clear()
    except (OSError, ValueError, TypeError):  # a broken pipe or line: as if it found nothing
        found.clear()
    except BaseException:  # (an interrupt, the progress display's error): it ends now
        process.kill()
        raise
    finally:
        process.stdout.close()  # type: ignore[union-attr]
        if process.wait() != 0:  # (it ended before saying all it found)
            found.clear()
    return found


def serve_quick_check() -> None:
    """The quick check's process: [path, the rubric's definition, MAX_SIGNATURES] in JSON
    on stdin, a JSON line on stdout for each stretch of the file read (["read", done,
    total]) and each run of problems with the same message (["problems", message, [line,
    …]]: a file whose every row is wrong the same way sends one line, not a million), or
    ["cannot"] if the file cannot be checked here."""
    path, definition, max_signatures = json.load(sys.stdin.buffer)
    rubric = parse_rubric(definition, check=False)  # (as the database reads it back)
    out = sys.stdout

    def say(*values: object) -> None:
        out.write(json.dumps(values) + "\n")

    def read(done: int, total: int) -> None:
        say("read", done, total)
        out.flush()

    problems = scan_problems(Path(path), rubric, max_signatures=max_signatures,
                             progress=read)
    if problems is None:
        say("cannot")
    for message, run in itertools.groupby(problems or (), key=lambda found: found.message):
        say("problems", message, [problem.line for problem in run])
    out.flush()


def scan_problems(path: Path, rubric: Rubric, *, max_signatures: int = MAX_SIGNATURES,
                  progress: ReadProgress | None = None) -> list[Problem] | None:
    """The quick check itself, in this process: the problems found, or None where the file
    cannot be read as the full pass reads it; ValueError naming `path` if it is not a
    regular file (`rubrics.files.regular_file`: a FIFO is not waited on)."""
    import pyarrow

    try:
        size = os.stat(path).st_size
        return _Scan(path, RowReader(path.parent, rubric), size, max_signatures,
                     progress).problems()
    except (_CannotScan, pyarrow.ArrowException, OSError, UnicodeError, csv.Error):
        return None


class _Scan:
    def __init__(self, path: Path, reader: RowReader, size: int, max_signatures: int,
                 progress: ReadProgress | None) -> None:
        self.path, self.reader, self.size, self.progress = path, reader, size, progress
        self.max_signatures = max_signatures
        self.columns = self._header()
        named = [ALIASES.get(name, name) for name in self.columns]
        if (len(set(named)) < len(named)  # (an alias and its column both given)
                or unknown_columns(set(named)) or missing_columns(set(named))):
            raise _CannotScan
        read = [at for at, name in enumerate(named)
                if name in READ_COLUMNS or REFERENCE_COLUMN.match(name)]
        self.presence = [at for at in read
                         if named[at] in PRESENCE_COLUMNS or REFERENCE_COLUMN.match(named[at])]
        self.checked = [at for at in read if named[at] in VALUE_CHECKS]
        self.values = [at for at in read if at not in self.presence and at not in self.checked]
        self.checks = [VALUE_CHECKS[named[at]] for at in self.checked]
        self.unread = [at for at in range(len(named)) if at not in read]
        self.outcomes: dict[tuple, bool] = {}  # signature -> whether its rows pass
        self.invalid: dict[int, set[str]] = {}  # a checked column -> its batch's bad cells
        self.messages: dict[tuple, list[str]] = {}  # see `_failing_row_problems`

    def _header(self) -> list[str]:
        """The header's column names as the full pass reads them; a header the full pass
        reports a problem of (or that spans lines) cannot be scanned."""
        with open(regular_file(self.path), encoding="utf-8-sig", newline="") as handle:
            lines = csv.reader(handle, strict=True)
            header = next(lines, None)
            if header is None or lines.line_num != 1:
                raise _CannotScan
        columns = [name.strip().lower() for name in header]
        if (not all(columns) or len(set(columns)) < len(columns)
                or text_problems(dict.fromkeys(columns), "")):
            raise _CannotScan
        return columns

    def _batches(self) -> Iterator[pyarrow.RecordBatch]:
        import pyarrow
        import pyarrow.csv

        names = [f"c{at}" for at in range(len(self.columns))]
        stream = pyarrow.input_stream(str(self.path))
        batches = pyarrow.csv.open_csv(
            stream,
            read_options=pyarrow.csv.ReadOptions(column_names=names, skip_rows=1,
                                                 block_size=BLOCK_BYTES),
            parse_options=pyarrow.csv.ParseOptions(newlines_in_values=True,
                                                   ignore_empty_lines=False),
            convert_options=pyarrow.csv.ConvertOptions(
                column_types=dict.fromkeys(names, pyarrow.string()),
                strings_can_be_null=False, quoted_strings_can_be_null=False))
        for batch in batches:
            yield batch
            if self.progress is not None:
                self.progress(min(stream.tell(), self.size), self.size)

    def problems(self) -> list[Problem]:
        """Each batch's rows grouped by signature, one row of each new signature checked,
        the rows of failing ones checked one by one; their lines counted as the full pass
        counts them (an empty line is a row of empty cells here, skipped there)."""
        import numpy
        import pyarrow
        import pyarrow.compute as compute

        if not _strict_csv(self.path):
            raise _CannotScan
        found: list[Problem] = []
        rows = breaks = 0  # before the batch: rows read, line breaks inside their cells
        pool = pyarrow.default_memory_pool()
        for batch in self._batches():
            if any(compute.max(compute.binary_length(column)).as_py() > csv.field_size_limit()
                   for column in batch.columns):
                raise _CannotScan  # (`csv` refuses a cell that long: a byte is a character or less)
            inside = _breaks_inside(batch)
            # a row's first line: the header's, then one per row and break before it
            starts = 2 + rows + breaks + numpy.arange(batch.num_rows) + (
                numpy.cumsum(inside) - inside)
            failing, signatures = self._failing_rows(batch)
            if failing:  # (their cells taken out together: one at a time costs far more)
                chosen = batch.take(pyarrow.array(failing, pyarrow.int64()))
                cells = zip(*(column.to_pylist() for column in chosen.columns), strict=True)
                for index, signature, raw in zip(failing, signatures, cells, strict=True):
                    found += self._failing_row_problems(signature, list(raw),
                                                        int(starts[index]))
            rows += batch.num_rows
            breaks += int(inside.sum())
            del batch
            pool.release_unused()
        return found

    def _failing_rows(self, batch: pyarrow.RecordBatch) -> tuple[list[int], list[tuple]]:
        """The indexes of the batch's rows whose signature fails, in order, and their
        signatures. (The rows are grouped by NumPy over each key's codes: pyarrow's own
        grouping would load its query engine, about 55 MB more of this process's
        memory.)"""
        import numpy
        import pyarrow.compute as compute

        keys = []  # (the keys' values, and each row's code of its value among them)
        for at in self.presence:
            keys.append(_codes(compute.invert(_blank(batch.column(at)))))
        for at, check in zip(self.checked, self.checks, strict=True):
            validity, self.invalid[at] = _validity(batch.column(at), check)
            keys.append(_codes(validity))
        for at in self.values:
            keys.append(_codes(batch.column(at)))
        if self.unread:  # a blank row passes, a row with only these columns does not
            keys.append(_codes(functools.reduce(compute.and_, (
                _blank(batch.column(at)) for at in self.unread))))
        combined = numpy.zeros(batch.num_rows, dtype=numpy.int64)
        for values, codes in keys:
            if len(values) > 1:  # renumbered densely, so that no product overflows
                _, combined = numpy.unique(combined * len(values) + codes,
                                           return_inverse=True)
        _, firsts, groups = numpy.unique(combined, return_index=True, return_inverse=True)
        failing = numpy.zeros(len(firsts), dtype=bool)
        signatures = []
        for group, first in enumerate(firsts.tolist()):
            signature = tuple(values[codes[first]] for values, codes in keys)
            signatures.append(signature)
            passes = self.outcomes.get(signature)
            if passes is None:
                if len(self.outcomes) >= self.max_signatures:
                    raise _CannotScan
                passes = not self._row_problems(
                    [column[first].as_py() for column in batch.columns], 0, texts=False)
                self.outcomes[signature] = passes
            failing[group] = not passes
        rows = numpy.flatnonzero(failing[groups])
        return rows.tolist(), [signatures[group] for group in groups[rows].tolist()]

    def _failing_row_problems(self, signature: tuple, raw: list[str], line: int
                              ) -> list[Problem]:
        """`_row_problems` of a row whose signature fails. Its fields' problem says the
        signature's values and the text of each time or seconds that does not parse, and
        nothing else of the row, so it is worked out once for each of those (a file whose
        every row gives a stage 7 has one message to make, not a million)."""
        text = ",".join(raw)
        if not clean_source(text):  # (its texts' problems come first: the row's own)
            return self._row_problems(raw, line)
        key = (signature, tuple(raw[at] if raw[at] in self.invalid[at] else None
                                for at in self.checked))
        messages = self.messages.get(key)
        if messages is None:
            messages = [problem.message for problem in self._row_problems(raw, line)]
            if len(self.messages) >= self.max_signatures:
                self.messages.clear()
            self.messages[key] = messages
        return [Problem(self.path, line, message) for message in messages]

    def _row_problems(self, raw: list[str], line: int, *, texts: bool = True
                      ) -> list[Problem]:
        """The problems of the row of cells `raw` (at `line`) as the full pass gives them:
        its texts' (unless not `texts`: they are not the signature's), else its fields'
        (without its image file's)."""
        if blank_row(raw):
            return []
        text = ",".join(raw)
        record = dict(zip(self.columns, csv_cells(raw, text), strict=True))
        if texts and not clean_source(text):
            messages = text_problems(record, "")
            if messages:
                return [Problem(self.path, line, message) for message in messages]
        try:
            self.reader.row(line, normalise_keys(record), images=False)
        except RowError as exc:
            return [Problem(self.path, line, str(exc))]
        return []


def _codes(column: pyarrow.Array) -> tuple[list, numpy.ndarray]:
    """The column's distinct values, and each cell's index among them."""
    encoded = column.dictionary_encode()
    return encoded.dictionary.to_pylist(), encoded.indices.to_numpy()


def _validity(column: pyarrow.Array, check: Callable[[str], object]
              ) -> tuple[pyarrow.Array, set[str]]:
    """EMPTY, VALID or INVALID for each cell, and the cells that are INVALID: `check` run
    once per distinct value, on the value as the full pass reads the cell (`csv_cells`:
    stripped, a spreadsheet escape undone)."""
    import pyarrow
    import pyarrow.compute as compute

    bad = []
    for value in compute.unique(column).to_pylist():
        (text,) = csv_cells([value], value)
        if text is None:
            continue
        try:
            check(text)
        except RowError:
            bad.append(value)
    empty = _blank(column)
    invalid = compute.is_in(column, value_set=pyarrow.array(bad, pyarrow.string()))
    return compute.if_else(empty, EMPTY, compute.if_else(invalid, INVALID, VALID)), set(bad)


def _blank(column: pyarrow.Array) -> pyarrow.Array:
    """Whether each cell is empty or white space only (what the full pass reads as None)."""
    import pyarrow.compute as compute

    return compute.or_(compute.equal(compute.binary_length(column), 0),
                       compute.utf8_is_space(column))


# A quoted cell, its quotes doubled inside.
_QUOTED_CELL = re.compile(rb'"[^"]*(?:""[^"]*)*"')
_CHUNK_BYTES = 2**22


def _strict_csv(path: Path) -> bool:
    """Whether Python's `csv` (strict, as the full pass reads) reads the file without an
    error of its quoting: every quoted cell closed, and followed by a comma, a line break
    or the end. Where it would stop with an error, pyarrow reads on (it takes `"1"x` as
    `1x`, a quote left open as a cell to the end), and the two would no longer agree. A
    quote opens a cell at the start of the text or after a comma or a line break; `csv`
    takes any other as a character of an unquoted cell."""
    with open(path, "rb") as handle:
        data = handle.read(_CHUNK_BYTES).removeprefix(b"\xef\xbb\xbf")
        at, ended = 0, False
        previous = b"\n"  # the byte before data[0] (the file's start opens a cell too)
        while True:
            quote = data.find(b'"', at)
            if quote < 0:
                if ended:
                    return True
                previous, data, at = data[-1:] or previous, b"", 0
            else:
                before = data[quote - 1:quote] if quote else previous
                if before not in (b",", b"\r", b"\n"):
                    at = quote + 1  # a character of an unquoted cell
                    continue
                cell = _QUOTED_CELL.match(data, quote)
                after = data[cell.end():cell.end() + 1] if cell else b""
                if cell and (after in (b",", b"\r", b"\n") or (not after and ended)):
                    at = cell.end()
                    continue
                if ended or len(data) - quote > 4 * csv.field_size_limit() + 2:
                    # a quote left open, what follows a closing one, or a cell longer than
                    # `csv` takes (a character is at most 4 bytes, a doubled quote 2)
                    return False
                previous, data, at = before, data[quote:], 0  # (the cell may go on)
            more = handle.read(_CHUNK_BYTES)
            ended = not more
            data += more


def _breaks_inside(batch: pyarrow.RecordBatch) -> numpy.ndarray:
    """The line breaks inside each row's cells (quoted ones), counted as the full pass's
    reader counts lines: CR LF, CR or LF."""
    import numpy
    import pyarrow.compute as compute

    inside = numpy.zeros(batch.num_rows, dtype=numpy.int64)
    for column in batch.columns:
        newlines = compute.count_substring(column, "\n")
        if compute.max(newlines).as_py():
            inside += newlines.to_numpy()
        returns = compute.count_substring(column, "\r")
        if compute.max(returns).as_py():  # a CR LF is one break
            inside += (returns.to_numpy()
                       - compute.count_substring(column, "\r\n").to_numpy())
    return inside
