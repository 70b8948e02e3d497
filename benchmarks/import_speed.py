"""Import speed and memory: the 2,500-caption THUMB 1.0 release (target 5 s), and a million
generated caption rows with references and stage-1 ratings as CSV and as JSON lines
(target 15 s and 500 MB peak each), next to the floor measured in the same run: the same
file read by `csv` (or `json`) and written into the project's tables by
`sqlite3.executemany`, with no checks at all (and, in the note, into bare tables of the
same columns: what the schema's indexes and triggers cost). Then the same CSV file with
one bad row (first, middle or last) must be refused within 10 s. Each import runs in a
fresh process whose peak resident memory (interpreter and libraries included) and CPU
time are measured, with those of the image workers it starts (their CPU time, and their
memory sampled: the peak printed is the sum of both peaks); on a shared machine the wall
time depends on the load, the CPU time much less. A CSV file is refused by the import's
quick check of its values (`storage.imports.import_scan`, in a process of its own, measured apart
from the image workers: it ends before they start). The rows name 200,000 distinct valid
PNG files (5 systems per image), each of which the import decodes once. The million-row
runs run once each (minutes in all); the release import is the best of 3. Prints figures
next to targets; asserts nothing."""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import resource
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.synthetic import generate  # noqa: E402
from benchmarks.table import ANCHORS, Table, best_of, in_child, megabytes, seconds  # noqa: E402
from storage import InputError, import_captions, import_thumb, open_database  # noqa: E402
from storage.rubric_registry import project_rubric  # noqa: E402
from thumb_tui.cli.common import collector_paused  # noqa: E402

TARGET_SECONDS, TARGET_BYTES, REFUSAL_SECONDS = 15, 500 * 2**20, 10


def _resident_bytes(pid: int) -> int:
    """A process's resident memory now (0 once it has ended)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    except OSError:
        return 0
    kib = next((line.split()[1] for line in status.splitlines() if line.startswith("VmRSS")),
               "0")
    return int(kib) * 1024


def _children() -> list[int]:
    """The processes this one started that are running (the import's image workers)."""
    pids = []
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):
            pids += map(int, (task / "children").read_text(encoding="ascii").split())
    return pids


class WorkerMemory:
    """The largest total resident memory of the import's image workers, sampled every
    SAMPLE seconds in a thread (their own peaks cannot be read: a worker's ru_maxrss
    counts the importing process it was started from); and apart from them, the largest
    resident memory of the quick check's process (a large CSV file's, which ends before the
    full pass starts its image workers) together with this process's at the same time."""

    SAMPLE = 0.05

    def __init__(self) -> None:
        self.peak = self.quick_check_peak = 0
        self._own_command = _command_line("self")
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.wait(self.SAMPLE):
            workers = quick_check = 0
            for pid in _children():
                command = _command_line(pid)
                if command == self._own_command:
                    # between fork and exec: its resident memory is this process's own
                    # pages, shared (the quick check's process in that instant was once
                    # counted as 101 MB of image workers)
                    continue
                if b"serve_quick_check" in command:
                    quick_check += _resident_bytes(pid)
                else:
                    workers += _resident_bytes(pid)
            self.peak = max(self.peak, workers)
            if quick_check:
                self.quick_check_peak = max(self.quick_check_peak,
                                            quick_check + _resident_bytes(os.getpid()))

    def stop(self) -> tuple[int, int]:
        """The image workers' peak, and that of the quick check's process with this one."""
        self._done.set()
        self._thread.join()
        return self.peak, self.quick_check_peak


def _command_line(pid: int | str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""



def import_file(database: Path, path: Path
                ) -> tuple[str, float, float, float, tuple[int, int]]:
    """The import's summary (or its first problem, with its line), the wall-clock and CPU
    seconds it took (the database made beforehand), the CPU seconds of its image workers
    (and quick check), and the peak resident memory of the image workers and of the quick
    check with this process (`WorkerMemory`, sampled)."""
    engine = open_database(database)
    workers = WorkerMemory()
    wall, start = time.perf_counter(), time.process_time()
    try:
        with collector_paused():  # as `thumb import` runs it
            outcome = str(import_captions(engine, path, actor="bench"))
    except InputError as exc:
        first = exc.problems[0]
        outcome = f"refused: line {first.line}: {first.message}"
    took, cpu = time.perf_counter() - wall, time.process_time() - start
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # the workers, ended
    return outcome, took, cpu, children.ru_utime + children.ru_stime, workers.stop()


def _records(path: Path) -> Iterator[dict[str, object]]:
    """The generated file's rows as dicts, by the plain readers."""
    with path.open(encoding="utf-8", newline="") as handle:
        if path.suffix == ".csv":
            yield from csv.DictReader(handle)
        else:
            yield from map(json.loads, handle)


# The tables of the floor without the project's schema: the same columns, no
# constraints, indexes or triggers.
BARE_TABLES = (
    "CREATE TABLE annotator (id INTEGER PRIMARY KEY, name, created_at)",
    "CREATE TABLE image (id INTEGER PRIMARY KEY, key, path, double_rating)",
    "CREATE TABLE image_reference (id INTEGER PRIMARY KEY, image_id, position, text)",
    "CREATE TABLE caption (id INTEGER PRIMARY KEY, image_id, system, text)",
    "CREATE TABLE rating (id INTEGER PRIMARY KEY, caption_id, annotator_id, stage, "
    "precision, recall, fluency, conciseness, inclusive, note, seconds, rubric, created_at, "
    "updated_at)",
)


def plain_import(database: Path, path: Path, schema: bool = True) -> tuple[str, float, float]:
    """The floor: the rows read by `csv` or `json` and inserted by `sqlite3.executemany`
    in one transaction, nothing checked, nothing decoded; into the project's tables (its
    schema, indexes and triggers) or, without `schema`, into bare tables of the same
    columns. Ids are counted here (a fresh file numbers rows 1, 2, ...)."""
    if schema:
        engine = open_database(database)
        rubric = project_rubric(engine).signature
        engine.dispose()
    else:
        rubric = "bare"
        with sqlite3.connect(database) as bare:
            for statement in BARE_TABLES:
                bare.execute(statement)
    wall, start = time.perf_counter(), time.process_time()
    connection = sqlite3.connect(database)
    now = "2026-01-01 00:00:00.000000"
    connection.execute("INSERT INTO annotator (name, created_at) VALUES ('bench', ?)", (now,))
    images: dict[str, int] = {}
    captions, references, ratings = [], [], []

    def flush() -> None:
        connection.executemany("INSERT INTO image (key, path, double_rating) "
                               "VALUES (?, ?, 0)", [(key, key) for key in new_images])
        connection.executemany("INSERT INTO image_reference (image_id, position, text) "
                               "VALUES (?, ?, ?)", references)
        connection.executemany("INSERT INTO caption (image_id, system, text) "
                               "VALUES (?, ?, ?)", captions)
        connection.executemany(
            "INSERT INTO rating (caption_id, annotator_id, stage, precision, recall, fluency,"
            " conciseness, inclusive, note, seconds, rubric, created_at, updated_at) VALUES "
            "(?, 1, ?, ?, ?, ?, 0, 0, '', 0, ?, ?, ?)", ratings)
        for rows in (new_images, captions, references, ratings):
            rows.clear()

    new_images: list[str] = []
    for caption_id, record in enumerate(_records(path), start=1):
        image = str(record["image"])
        if image not in images:
            images[image] = len(images) + 1
            new_images.append(image)
            texts = record.get("references") or [record[f"reference_{k}"] for k in range(1, 5)]
            references += [(images[image], k, text) for k, text in enumerate(texts)]
        captions.append((images[image], record["system"], record["caption"]))
        if record.get("annotator"):
            ratings.append((caption_id, int(record["stage"]), int(record["precision"]),
                            int(record["recall"]), float(record["fluency"]), rubric, now,
                            now))
        if len(captions) == 20_000:
            flush()
    flush()
    connection.commit()
    connection.close()
    return f"{len(images)} images", time.perf_counter() - wall, time.process_time() - start


def with_bad_row(path: Path, where: str) -> Path:
    """A copy of the generated file whose first, middle or last data row rates at stage 7
    (no such stage)."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    first = 1 if path.suffix == ".csv" else 0
    index = {"first": first, "middle": (first + len(lines)) // 2, "last": len(lines) - 1}[where]
    good, bad = (",bench,1,", ",bench,7,") if path.suffix == ".csv" else ('"stage": 1',
                                                                        '"stage": 7')
    lines[index] = lines[index].replace(good, bad, 1)
    broken = path.with_name(f"bad-{where}{path.suffix}")
    broken.write_text("".join(lines), encoding="utf-8")
    return broken


def load() -> str:
    return f"load average {os.getloadavg()[0]:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--captions", type=int, default=1_000_000)
    args = parser.parse_args()
    cpus = os.cpu_count()
    table = Table("import_speed", f"fresh SQLite files; {cpus} CPUs shared with other "
                                  "developers")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        release = ANCHORS / "mscoco_THumB-1.0.jsonl"
        if release.is_file():
            def thumb() -> None:
                database = folder / "thumb.db"
                database.unlink(missing_ok=True)
                import_thumb(open_database(database), release,
                             ANCHORS / "mscoco_references.json", actor="bench")

            took, _ = best_of(thumb)
            table.add("import the THUMB 1.0 release (2,500 captions)", seconds(took),
                      target="< 5 s", met=took < 5)
        csv_file = None
        for fmt in ("csv", "jsonl"):
            data = folder / fmt
            data.mkdir()
            path = generate(data, args.captions, fmt=fmt)
            csv_file = csv_file or path
            before = load()
            _, own_peak, (summary, took, cpu, worker_cpu, (worker_peak, quick_peak)) = (
                in_child(partial(import_file, folder / f"{fmt}.db", path)))
            # (own + workers: an upper bound, the two peaks need not meet; the quick
            # check's process ends before the workers start, measured with this one's)
            peak = max(own_peak + worker_peak, quick_peak)
            _, _, (_, floor, floor_cpu) = in_child(partial(plain_import,
                                                           folder / f"{fmt}-plain.db", path))
            _, _, (_, bare, bare_cpu) = in_child(partial(
                plain_import, folder / f"{fmt}-bare.db", path, schema=False))
            reader = "csv" if fmt == "csv" else "json"
            table.add(f"import {args.captions:,} caption rows with ratings, {fmt.upper()} "
                      "(one run)", f"{seconds(took)} ({seconds(cpu)} CPU + "
                      f"{seconds(worker_cpu)} in the processes it starts), peak "
                      f"{megabytes(peak)}",
                      reference=f"{seconds(floor)} ({seconds(floor_cpu)} CPU; {reader} + "
                                "sqlite3.executemany into the project's tables, no checks)",
                      ratio=took / floor, target="<= 15 s, <= 500 MB",
                      met=took <= TARGET_SECONDS and peak <= TARGET_BYTES,
                      note=f"{summary.split(': ', 1)[-1]}; peak = the importing process's "
                           f"{megabytes(own_peak)} + its image workers' "
                           f"{megabytes(worker_peak)} (sampled every {WorkerMemory.SAMPLE} s)"
                           + (f", or if more, the quick check's process (before the full "
                              f"pass) with the importing process at the same time: "
                              f"{megabytes(quick_peak)}" if quick_peak else "")
                           + "; ratio = ours / floor (slower by); "
                           f"into bare tables (no constraints, indexes or triggers) the "
                           f"floor takes {seconds(bare)} ({seconds(bare_cpu)} CPU); "
                           f"{before} before, {load()} after the run, on {cpus} CPUs")
        for where in ("first", "middle", "last"):
            broken = with_bad_row(csv_file, where)
            _, _, (problem, took, cpu, worker_cpu, _) = in_child(
                partial(import_file, folder / f"{where}.db", broken))
            table.add(f"a CSV of {args.captions:,} rows with a bad {where} row, refused "
                      "(one run)", f"{seconds(took)} ({seconds(cpu)} CPU + "
                      f"{seconds(worker_cpu)} in the quick check's process)",
                      target="<= 10 s", met=took <= REFUSAL_SECONDS and "stage" in problem,
                      note=f"{problem}; {load()}")
    table.save()


if __name__ == "__main__":
    main()
