"""`make bench`: every benchmark in its own process, then one table of all their rows in
`benchmarks/RESULTS.md` (the table the README quotes), with the machine and library
versions it was measured with."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.table import RESULTS, installed_environment, package_version  # noqa: E402

SCRIPTS = ("metrics", "cider_tokenize", "retrieval_eccv", "report_speed", "project_scale",
           "startup", "import_speed", "write_latency", "suite_time")
LIBRARIES = ("pycocoevalcap", "sacrebleu", "rouge-score", "bert-score", "torch", "numpy",
             "scipy", "SQLAlchemy")


def render(names: tuple[str, ...], command: str = "make bench",
           load_at_start: float | None = None) -> str:
    """RESULTS.md: the rows the scripts `names` saved, and the machine they ran on, with
    its load average at the start of the run (when given) and now."""
    load = f"{os.getloadavg()[0]:.1f}"
    if load_at_start is not None:
        load = f"{load_at_start:.1f} at the start, {load} at the end"
    lines = [
        "# Benchmark results",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC by `{command}` on {platform.machine()}"
        f", {os.cpu_count()} CPUs shared with other developers (load average {load}), "
        f"Python {platform.python_version()}; "
        + ", ".join(f"{name} {package_version(name)}" for name in LIBRARIES) + ".",
        "Timings are the best of 3 unless a row says otherwise; each ratio compares two "
        "timings taken in the same run.",
        "",
        "| work | ours | reference | ratio | target | verdict |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    notes = []
    for name in names:
        path = RESULTS / f"{name}.json"
        if not path.is_file():
            continue
        for row in json.loads(path.read_text(encoding="utf-8"))["rows"]:
            mark = ""
            if row["note"]:
                notes.append(row["note"])
                mark = f" [{len(notes)}]"
            cells = [row["work"] + mark, row["ours"], row["reference"], row["ratio"],
                     row["target"], row["verdict"]]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines += ["", *(f"[{n}] {note}  " for n, note in enumerate(notes, start=1))]
    return "\n".join(lines).rstrip() + "\n"


def main(names: list[str]) -> None:
    """Every benchmark, or only the scripts named (`run_all.py metrics`): the table then
    holds their rows only, and says so."""
    unknown = set(names) - set(SCRIPTS)
    if unknown:
        raise SystemExit(f"unknown benchmark(s) {', '.join(sorted(unknown))}; "
                         f"benchmarks: {', '.join(SCRIPTS)}")
    chosen = tuple(names) or SCRIPTS
    load_at_start = os.getloadavg()[0]
    for name in chosen:
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / f"{name}.py")],
                       check=True, env=installed_environment())
    command = "make bench" if not names else f"benchmarks/run_all.py {' '.join(chosen)}"
    results = render(chosen, command, load_at_start)
    (ROOT / "benchmarks" / "RESULTS.md").write_text(results, encoding="utf-8")
    print(f"\n{results}\nwrote {ROOT / 'benchmarks' / 'RESULTS.md'}")


if __name__ == "__main__":
    main(sys.argv[1:])
