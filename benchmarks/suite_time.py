"""How long the test suite takes (issue #29's row: `make test` <= 10 min and `make test-fast`
<= 2 min on 2 idle CPUs): both Makefile targets run as they are, one after the other, with
the load average before and after each (other work on the CPUs slows the suite down as
much as the suite itself). Each starts once the CPUs have been idle for a few seconds (at
most IDLE_WAIT_LIMIT of waiting: what an earlier benchmark left running ends first); the
wait and the CPUs' idle share then are printed with it."""

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
IDLE_SHARE = 0.9  # of all CPUs' time over IDLE_WINDOW: "idle CPUs"
IDLE_WINDOW = 5.0  # seconds
IDLE_WAIT_LIMIT = 180.0  # seconds


def _cpu_times() -> tuple[int, int]:
    """Idle and total jiffies of all CPUs since boot (/proc/stat)."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = [int(field) for field in stat.readline().split()[1:]]
    return fields[3] + fields[4], sum(fields)  # idle + iowait


def wait_for_idle_cpus() -> str:
    """Wait until the CPUs were idle IDLE_SHARE of a window (or IDLE_WAIT_LIMIT passed);
    say how long it waited and how idle they were."""
    start = time.perf_counter()
    share = 0.0
    while time.perf_counter() - start < IDLE_WAIT_LIMIT:
        idle, total = _cpu_times()
        time.sleep(IDLE_WINDOW)
        idle_after, total_after = _cpu_times()
        share = (idle_after - idle) / max(total_after - total, 1)
        if share >= IDLE_SHARE:
            break
    return (f"started after {time.perf_counter() - start:.0f} s of waiting, the CPUs "
            f"{share:.0%} idle over {IDLE_WINDOW:.0f} s")


def run_target(target: str) -> tuple[float, str, str]:
    """`make <target>` once the CPUs are idle: its wall seconds, pytest's last line, and
    the load around it."""
    idle = wait_for_idle_cpus()
    before = os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run(["make", "--no-print-directory", target], cwd=ROOT,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    outcome = lines[-1].strip("= ") if lines else f"no output (exit {done.returncode})"
    if done.returncode:
        outcome += f"; exit status {done.returncode}"
    return seconds, outcome, (f"{idle}; load average {before:.1f} before, "
                              f"{os.getloadavg()[0]:.1f} after")


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
