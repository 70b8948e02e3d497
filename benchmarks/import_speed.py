"""Import speed and memory: the 2,500-caption THUMB 1.0 release (target 5 s), and a million
generated caption rows with references and stage-1 ratings as CSV and as JSON lines
(target 60 s and 1 GB peak each), each import in a fresh process whose peak resident memory
(interpreter and libraries included) and CPU time are measured: on a shared machine the
wall time depends on the load, the CPU time much less. The rows name 200,000 distinct
valid PNG files (5 systems per image), each of which the import decodes once. The
million-row imports run once each (minutes per run); the release import is the best of 3.
Prints figures next to targets; asserts nothing."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.synthetic import generate  # noqa: E402
from benchmarks.table import ANCHORS, Table, best_of, in_child, megabytes, seconds  # noqa: E402
from storage import import_captions, import_thumb, open_database  # noqa: E402
from thumb_tui.cli.common import collector_paused  # noqa: E402


def import_file(database: Path, path: Path) -> tuple[str, float]:
    """The import's summary and the CPU seconds (user and system) it took."""
    engine = open_database(database)
    start = time.process_time()
    with collector_paused():  # as `thumb import` runs it
        summary = import_captions(engine, path, actor="bench")
    return str(summary), time.process_time() - start


def load() -> str:
    return f"load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--captions", type=int, default=1_000_000)
    args = parser.parse_args()
    table = Table("import_speed", f"fresh SQLite files; {os.cpu_count()} CPUs shared with "
                                  "other developers")
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
        for fmt in ("csv", "jsonl"):
            data = folder / fmt
            data.mkdir()
            path = generate(data, args.captions, fmt=fmt)
            before = load()
            took, peak, (summary, cpu) = in_child(partial(import_file, folder / f"{fmt}.db",
                                                          path))
            table.add(f"import {args.captions:,} caption rows with ratings, {fmt.upper()} "
                      "(one run)", f"{seconds(took)} ({seconds(cpu)} CPU), peak "
                      f"{megabytes(peak)}", target="<= 60 s, <= 1 GB",
                      met=took <= 60 and peak <= 2**30,
                      note=f"{summary.split(': ', 1)[-1]}; {before} before, {load()} after "
                           f"the run, on {os.cpu_count()} CPUs")
    table.save()


if __name__ == "__main__":
    main()
