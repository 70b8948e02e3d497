"""The full report for 2,500 captions x 8 metrics with 1,000 bootstrap resamples (target
10 s). Uses the THUMB 1.0 release when ../shared/anchors is present (else a generated set of
the same shape) and 8 stored metric columns (random scores with bench signatures: the
report's cost does not depend on what the metric is). Prints figures; asserts nothing."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from sqlalchemy import select  # noqa: E402

from benchmarks.synthetic import generate  # noqa: E402
from reports.render import write_report  # noqa: E402
from reports.tables import build_report  # noqa: E402
from storage import import_captions, import_thumb, open_database  # noqa: E402
from storage.models import Caption, MetricScore, utcnow  # noqa: E402

ANCHORS = ROOT.parent / "shared" / "anchors" / "thumb-1.0"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        engine = open_database(folder / "report.db")
        if (ANCHORS / "mscoco_THumB-1.0.jsonl").is_file():
            import_thumb(engine, ANCHORS / "mscoco_THumB-1.0.jsonl",
                         ANCHORS / "mscoco_references.json", actor="bench")
            source = "THUMB 1.0 release"
        else:
            import_captions(engine, generate(folder, 2_500), actor="bench")
            source = "generated set"
        with engine.begin() as connection:
            ids = connection.execute(select(Caption.__table__.c.id)).scalars().all()
            rng = np.random.default_rng(0)
            now = utcnow()
            for k in range(8):
                connection.execute(MetricScore.__table__.insert(), [
                    {"caption_id": i, "metric": f"bench{k}", "value": float(v),
                     "signature": f"bench{k}|impl:random|thumb-tui:bench", "computed_at": now}
                    for i, v in zip(ids, rng.normal(size=len(ids)), strict=True)])
        print(f"{len(ids)} captions ({source}), 8 metrics, 1000 bootstrap resamples")
        start = time.perf_counter()
        report = build_report(engine, bootstrap=1000, seed=0)
        built = time.perf_counter() - start
        print(f"statistics (Tables 2-4, Williams, pairwise)  {built:6.2f} s  (target <= 10 s)")
        for fmt in ("json", "md", "html"):
            start = time.perf_counter()
            write_report(report, folder / fmt, fmt)
            print(f"  + writing {fmt:<4} (md/html draw 9 figures)   "
                  f"{time.perf_counter() - start:6.2f} s")


if __name__ == "__main__":
    main()
