"""What every benchmark shares: best-of-N timing, peak memory of a child process, and the
results table. Each script records its rows in `benchmarks/results/<script>.json`;
`benchmarks/run_all.py` runs them all and writes `benchmarks/RESULTS.md`, the table the
README quotes. Benchmarks print figures and never assert: targets are shown next to them."""

from __future__ import annotations

import json
import multiprocessing
import os
import resource
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
ANCHORS = Path(os.environ.get("THUMB_ANCHORS", ROOT.parent / "shared" / "anchors")) / "thumb-1.0"
REPEAT = 3


def package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "missing"


def installed_environment() -> dict[str, str]:
    """The environment of a child `thumb` process run as an installed package runs: its
    bytecode written once and reused (with PYTHONDONTWRITEBYTECODE, set on these
    machines, every run would compile the project's modules again: about 0.2 s)."""
    environment = {key: value for key, value in os.environ.items()
                   if key != "PYTHONDONTWRITEBYTECODE"}
    environment.update(PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    return environment


def best_of(action: Callable[[], Any], repeat: int = REPEAT) -> tuple[float, Any]:
    """The fastest of `repeat` runs (the machine is shared and noisy) and the last result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = action()
        best = min(best, time.perf_counter() - start)
    return best, result


def _child(queue: multiprocessing.Queue, action: Callable[[], Any]) -> None:
    start = time.perf_counter()
    result = action()
    seconds = time.perf_counter() - start
    queue.put((seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, result))


def in_child(action: Callable[[], Any]) -> tuple[float, int, Any]:
    """Run `action` (a module-level function) in a fresh process: its seconds, the process's
    peak resident memory in bytes (interpreter and libraries included) and its result."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child, args=(queue, action))
    process.start()
    seconds, peak, result = queue.get()
    process.join()
    return seconds, peak, result


@dataclass
class Row:
    work: str
    ours: str
    reference: str
    ratio: str
    target: str
    verdict: str
    note: str = ""


class Table:
    """Rows of one benchmark script, printed as they come and saved for RESULTS.md."""

    def __init__(self, script: str, setting: str) -> None:
        self.script, self.setting, self.rows = script, setting, []
        print(f"## {script}: {setting}\n")

    def add(self, work: str, ours: str, reference: str = "-", ratio: float | None = None,
            target: str = "-", met: bool | None = None, note: str = "") -> None:
        verdict = "-" if met is None else ("met" if met else "NOT MET")
        row = Row(work, ours, reference, "-" if ratio is None else f"{ratio:.1f}x", target,
                  verdict, note)
        self.rows.append(row)
        print(f"{work}\n    ours {ours} | reference {reference} | {row.ratio} | target "
              f"{target}: {verdict}" + (f"\n    {note}" if note else ""), flush=True)

    def speed(self, work: str, ours: float, reference: float, target: float,
              reference_name: str, note: str = "") -> None:
        """A ratio row: both timings (best of 3, same run) and the target speed-up."""
        ratio = reference / ours
        self.add(work, f"{ours:.3f} s", f"{reference:.3f} s ({reference_name})", ratio,
                 f">= {target:g}x", ratio >= target, note)

    def save(self) -> None:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"{self.script}.json").write_text(json.dumps(
            {"script": self.script, "setting": self.setting,
             "rows": [asdict(row) for row in self.rows]}, indent=1) + "\n", encoding="utf-8")


def seconds(value: float) -> str:
    return f"{value:.2f} s"


def megabytes(value: float) -> str:
    return f"{value / 2**20:,.0f} MB"
