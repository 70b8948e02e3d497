"""Every registered reader of a user's file (tests/readers.py: the imports, positive sets,
ranked lists, score and relevance matrices, judgment files, rubrics, keymaps, images)
under hypothesis in bulk: 1,000 mutated inputs per reader by default (the test suite runs
50), each read or refused with the reader's documented error naming the file. For each
reader it prints the examples run, how many were refused and accepted, tracebacks (any
other exception, exit status or message), wrong accepts (a poisoned text field
accepted), whether the database was byte-identical after every refusal (its -wal and -shm
files included; `thumb` readers only) and the files left behind; exits 1 on any failure.

    python benchmarks/fuzz_imports.py [--per-reader 1000] [--jobs 2] [--reader NAME …]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def run_reader(name: str, examples: int) -> dict[str, object]:
    """`examples` hypothesis examples of one reader, in a fresh working folder (also the
    current directory, so that a file written anywhere near is seen)."""
    from hypothesis import HealthCheck, Phase, given, settings

    from tests.readers import examples as mutations
    from tests.readers import readers, run_example

    reader = next(r for r in readers() if r.name == name)
    home = Path(tempfile.mkdtemp(prefix="thumb-fuzz-"))
    os.chdir(home)
    work = home / "work"
    counts: Counter[str] = Counter()
    failures: list[str] = []
    start = time.perf_counter()

    @settings(max_examples=examples, deadline=None, database=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(example=mutations(reader))
    def run(example) -> None:
        outcome = run_example(reader, example, work)
        counts["examples"] += 1
        counts["accepted" if outcome.accepted else "refused" if outcome.refused
               else "other"] += 1
        counts["tracebacks"] += bool(outcome.traceback)
        counts["wrong accepts"] += outcome.wrong_accept
        if outcome.database_unchanged is not None:
            counts["database checked"] += 1
            counts["database unchanged"] += outcome.database_unchanged
        counts["files left"] += len(outcome.files_left)
        if not outcome.ok and len(failures) < 3:
            failures.append(f"{example.kind} ({len(example.content)} bytes): "
                            f"{outcome}"[:3000])

    run()
    stray = [p.name for p in home.iterdir() if p.name != "work"]
    counts["files left"] += len(stray)
    failures += [f"left in the working folder: {name}" for name in stray[:3]]
    os.chdir(ROOT)
    shutil.rmtree(home, ignore_errors=True)
    return {"name": name, "counts": dict(counts), "failures": failures,
            "seconds": time.perf_counter() - start, "database": reader.uses_database}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-reader", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--reader", action="append", help="only this reader (repeat)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from tests.readers import readers

    names = [r.name for r in readers() if not args.reader or r.name in args.reader]
    # every temporary folder (the workers' template databases too: a worker process ends
    # without running atexit) under one that is removed at the end
    scratch = tempfile.mkdtemp(prefix="thumb-fuzz-")
    tempfile.tempdir = scratch
    start = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        # the slow ones (through `thumb`, with a database) first, so the jobs end together
        order = sorted(names, key=lambda n: not next(r for r in readers()
                                                      if r.name == n).uses_database)
        results = {r["name"]: r for r in pool.map(run_reader, order,
                                                   [args.per_reader] * len(order))}
    seconds = time.perf_counter() - start
    shutil.rmtree(scratch, ignore_errors=True)
    header = ("reader", "examples", "refused", "accepted", "tracebacks", "wrong accepts",
              "db unchanged", "files left", "s")
    rows = []
    failed = False
    for name in names:
        result = results[name]
        c = Counter(result["counts"])
        database = (f"{c['database unchanged']}/{c['database checked']}"
                    if result["database"] else "n/a")
        rows.append((name, c["examples"], c["refused"], c["accepted"], c["tracebacks"],
                     c["wrong accepts"], database, c["files left"],
                     f"{result['seconds']:.0f}"))
        failed |= bool(result["failures"]) or c["examples"] < args.per_reader or (
            c["database unchanged"] != c["database checked"])
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("  ".join(str(cell).ljust(w) if i == 0 else str(cell).rjust(w)
                        for i, (cell, w) in enumerate(zip(row, widths, strict=True))))
    total = sum(Counter(r["counts"])["examples"] for r in results.values())
    print(f"{total:,} examples over {len(names)} readers in {seconds:.0f} s "
          f"({args.jobs} processes)")
    for result in results.values():
        for failure in result["failures"]:
            print(f"FAILED {result['name']}: {failure}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
