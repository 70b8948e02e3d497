"""Commit latency of ratings on SQLite WAL with many writers at once (issue #29's row:
p99 <= 50 ms while the CPUs are not oversubscribed, the oversubscribed figure beside it).
`benchmarks.races`'s throughput run, twice in one run: 2 writers per CPU, then 8 writers
(oversubscribed where there are fewer than 4 CPUs), each writer a process committing
1,000 ratings through the session API the screens use; afterwards every saved value is
looked for in the database. The machine's load is printed beside the figures: other
processes on the CPUs make every writer wait, whatever the database does."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.races import WALKERS, ThroughputResult, run_throughput  # noqa: E402
from benchmarks.table import Table  # noqa: E402

TARGET_P99_MS = 50.0
WRITERS_PER_CPU = 2  # the bound for "not oversubscribed": writers <= 2 x cores


def _measure(writers: int, ratings: int, folder: Path) -> tuple[ThroughputResult, str]:
    """One throughput run and the load averages around it."""
    before = os.getloadavg()[0]
    result = run_throughput(str(folder / f"{writers}-writers.db"), folder / f"{writers}",
                            processes=writers, ratings=ratings)
    return result, f"load average {before:.1f} before, {os.getloadavg()[0]:.1f} after"


def _latency(result: ThroughputResult) -> str:
    return f"p99 {result.p99_ms:g} ms (p50 {result.p50_ms:g} ms)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ratings", type=int, default=1000, help="per writer")
    args = parser.parse_args()
    cpus = len(os.sched_getaffinity(0))  # the CPUs this process may run on (taskset)
    calm_writers = WRITERS_PER_CPU * cpus
    table = Table("write_latency", f"SQLite WAL, {args.ratings:,} ratings per writer, "
                  f"{cpus} CPUs")
    with tempfile.TemporaryDirectory(prefix="thumb-write-latency-") as folder:
        calm, calm_load = _measure(calm_writers, args.ratings, Path(folder))
        busy, busy_load = _measure(WALKERS, args.ratings, Path(folder))
    crowded = "oversubscribed" if calm_writers < WALKERS else "not oversubscribed"
    table.add(f"commit latency, SQLite WAL, {args.ratings:,} ratings per writer: "
              f"{calm_writers} writers (<= {WRITERS_PER_CPU} per CPU), one run", _latency(calm),
              f"{WALKERS} writers ({crowded} on {cpus} CPUs): {_latency(busy)}",
              target=f"p99 <= {TARGET_P99_MS:g} ms", met=calm.p99_ms <= TARGET_P99_MS,
              note=f"{calm_writers} writers: {calm.seconds:g} s, {calm_load}; "
                   f"{WALKERS} writers: {busy.seconds:g} s, {busy_load}; on {cpus} CPUs")
    runs = (calm, busy)
    table.add("the same runs: ratings lost, duplicated, crashed",
              ", ".join(f"{run.processes} writers: {run.lost} lost, {run.duplicated} "
                        f"duplicated, {run.errors} errors" for run in runs),
              target="0", met=not any(run.lost or run.duplicated or run.errors for run in runs),
              note="; ".join(run.error_sample for run in runs if run.error_sample))
    table.save()


if __name__ == "__main__":
    main()
