"""`thumb report` on the THUMB 1.0 release (2,500 captions; a generated set of the same shape
without it) with BLEU, ROUGE-L and CIDEr-D stored and the default 1,000 bootstrap
resamples: the whole command as a user runs it (target 2 s), and the statistics alone with
8 metric columns. Best of 3. Prints figures next to targets; asserts nothing."""

from __future__ import annotations

import os
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
from benchmarks.table import ANCHORS, Table, best_of, seconds  # noqa: E402
from reports.scoring import compute_metrics  # noqa: E402
from reports.tables import build_report  # noqa: E402
from storage import import_captions, import_thumb, open_database  # noqa: E402
from storage.models import Caption, MetricScore, utcnow  # noqa: E402

THUMB = [sys.executable, "-c", "from thumb_tui.cli import app; app()"]


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


def run_command(arguments: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([*THUMB, *arguments], check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    return time.perf_counter() - start


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path, source = project(folder)
        table = Table("report_speed", f"{source}, 1,000 bootstrap resamples, best of 3, "
                                      f"{os.cpu_count()} CPUs shared with other developers")
        for fmt in ("md", "json"):
            took, _ = best_of(lambda fmt=fmt: run_command(
                ["--db", str(path), "report", "--format", fmt, "--out",
                 str(folder / fmt)]))
            table.add(f"`thumb report --format {fmt}` (3 metrics; md draws the figures)",
                      seconds(took), target="<= 2 s", met=took <= 2,
                      note="the whole command: interpreter start-up, imports, database, "
                           "statistics, writing")
        engine = open_database(path)
        took, _ = best_of(lambda: build_report(engine, bootstrap=1000, seed=0))
        table.add("report statistics alone, 3 metrics", seconds(took))
        add_random_metrics(path, 5)
        took, _ = best_of(lambda: build_report(engine, bootstrap=1000, seed=0))
        table.add("report statistics alone, 8 metrics", seconds(took))
        table.save()


if __name__ == "__main__":
    main()
