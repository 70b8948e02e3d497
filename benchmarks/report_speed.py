"""`thumb report` on the THUMB 1.0 release (2,500 captions; a generated set of the same shape
without it) with BLEU, ROUGE-L and CIDEr-D stored and the default 1,000 bootstrap
resamples: the whole command as a user runs it, interpreter start-up and imports included
(target 1 s; the project's bytecode compiled, as installed), in wall-clock and CPU time
(user + system of the child: what an idle machine's wall time would be; the machine's load
average is printed with them), next to `thumb --help` in the same run (the start-up every
command pays), and the statistics alone with 3 and 8 metric columns, each run drawing its
bootstrap resamples afresh. Best of 5 for the commands, 3 for the rest. Prints figures
next to targets; asserts nothing."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
from sqlalchemy import select  # noqa: E402

from benchmarks.synthetic import generate  # noqa: E402
from benchmarks.table import ANCHORS, Table, best_of, installed_environment, seconds  # noqa: E402
from metrics.stats.correlation import _draw_counts  # noqa: E402
from reports.scoring import compute_metrics  # noqa: E402
from reports.thumb.tables import build_report  # noqa: E402
from storage import import_captions, import_thumb, open_database  # noqa: E402
from storage.models import Caption, MetricScore, utcnow  # noqa: E402

THUMB = [sys.executable, "-c", "from thumb_tui.cli import app; app()"]
# what every `thumb report` imports whatever its own code does: the floor under its time
REPORT_LIBRARIES = [sys.executable, "-c",
                    "import numpy, pandas, scipy.special, sqlalchemy, storage.models"]


def project(folder: Path) -> tuple[Path, str]:
    """A database with the release (or a generated set) and the default metrics stored."""
    path = folder / "report.db"
    engine = open_database(path)
    if (ANCHORS / "mscoco_THumB-1.0.jsonl").is_file():
        import_thumb(engine, ANCHORS / "mscoco_THumB-1.0.jsonl",
                     ANCHORS / "mscoco_references.json", actor="bench")
        source = "THUMB 1.0 release"
    else:
        import_captions(engine, generate(folder, 2_500), actor="bench")
        source = "generated set of its shape"
    compute_metrics(engine, ["bleu", "rouge-l", "cider-d"])
    return path, source


def add_random_metrics(path: Path, count: int) -> None:
    """`count` more metric columns of random scores: the statistics cost the same whatever
    the metric is."""
    engine = open_database(path)
    with engine.begin() as connection:
        ids = connection.execute(select(Caption.__table__.c.id)).scalars().all()
        rng = np.random.default_rng(0)
        now = utcnow()
        for k in range(count):
            connection.execute(MetricScore.__table__.insert(), [
                {"caption_id": i, "metric": f"bench{k}", "value": float(v),
                 "signature": f"bench{k}|impl:random|thumb-tui:bench", "computed_at": now}
                for i, v in zip(ids, rng.normal(size=len(ids)), strict=True)])


COMMAND_RUNS = 5
TARGET_SECONDS = 1


def run_command(command: list[str]) -> tuple[float, float]:
    """Wall-clock seconds and CPU seconds (user + system) of one process, its bytecode
    compiled (as installed)."""
    environment = installed_environment()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=environment)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def statistics(engine: object) -> object:
    """The report's tables, its bootstrap resamples drawn afresh (not from the previous
    run's cache): what one `thumb report` computes."""
    _draw_counts.cache_clear()
    return build_report(engine, bootstrap=1000, seed=0)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path, source = project(folder)
        table = Table("report_speed", f"{source}, 1,000 bootstrap resamples, best of "
                                      f"{COMMAND_RUNS} for the command and 3 for the "
                                      f"statistics, {os.cpu_count()} CPUs shared with "
                                      f"other developers")
        start_up = min(run_command([*THUMB, "--help"]) for _ in range(COMMAND_RUNS))
        for fmt in ("md", "html", "json"):
            runs = [run_command([*THUMB, "--db", str(path), "report", "--format", fmt,
                                 "--out", str(folder / fmt), "--force"])
                    for _ in range(COMMAND_RUNS)]
            wall, cpu = min(run[0] for run in runs), min(run[1] for run in runs)
            load = os.getloadavg()[0]
            what = "3 metrics, writes the 4 figures" if fmt == "md" else "3 metrics"
            table.add(f"`thumb report --format {fmt}` ({what})",
                      f"{seconds(wall)} wall, {seconds(cpu)} CPU",
                      reference=f"{seconds(start_up[0])} wall, {seconds(start_up[1])} CPU "
                                "(`thumb --help`: the start-up alone)",
                      target=f"<= {TARGET_SECONDS} s wall", met=wall <= TARGET_SECONDS,
                      note=f"the whole command: interpreter start-up, imports, database, "
                           f"statistics, writing; best of {COMMAND_RUNS}; CPU = user + "
                           f"system time of the process, what an idle machine's wall time "
                           f"would be ({'met' if cpu <= TARGET_SECONDS else 'not met'} in "
                           f"CPU time); load average {load:.1f} on {os.cpu_count()} CPUs")
        runs = [run_command(REPORT_LIBRARIES) for _ in range(COMMAND_RUNS)]
        table.add("the libraries every report imports, alone (NumPy, pandas, SciPy's "
                  "special functions, SQLAlchemy and the tables)",
                  f"{seconds(min(run[0] for run in runs))} wall, "
                  f"{seconds(min(run[1] for run in runs))} CPU",
                  note="a fresh process: the part of the command's time that the report's "
                       f"own code cannot save; best of {COMMAND_RUNS}")
        engine = open_database(path)
        took, _ = best_of(lambda: statistics(engine))
        table.add("report statistics alone, 3 metrics", seconds(took))
        add_random_metrics(path, 5)
        took, _ = best_of(lambda: statistics(engine))
        table.add("report statistics alone, 8 metrics", seconds(took))
        table.save()


if __name__ == "__main__":
    main()
