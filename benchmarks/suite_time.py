"""How long the test suite takes (issue #29's row: `make test` <= 10 min and `make test-fast`
<= 2 min on 2 idle CPUs): both Makefile targets run as they are, one after the other, with
the load average before and after each (other work on the CPUs slows the suite down as
much as the suite itself)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.table import Table  # noqa: E402

# target -> its limit in seconds
TARGETS = {"test-fast": 120, "test": 600}


def run_target(target: str) -> tuple[float, str, str]:
    """`make <target>`: its wall seconds, pytest's last line, and the load around it."""
    before = os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run(["make", "--no-print-directory", target], cwd=ROOT,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    outcome = lines[-1].strip("= ") if lines else f"no output (exit {done.returncode})"
    if done.returncode:
        outcome += f"; exit status {done.returncode}"
    return seconds, outcome, f"load average {before:.1f} before, {os.getloadavg()[0]:.1f} after"


def main() -> None:
    cpus = len(os.sched_getaffinity(0))
    table = Table("suite_time", f"the Makefile's test targets on {cpus} CPUs")
    for target, limit in TARGETS.items():
        seconds, outcome, load = run_target(target)
        table.add(f"`make {target}`", f"{seconds:.0f} s wall",
                  target=f"<= {limit} s on 2 idle CPUs", met=seconds <= limit
                  and "exit status" not in outcome, note=f"{outcome}; {load} on {cpus} CPUs")
    table.save()


if __name__ == "__main__":
    main()
