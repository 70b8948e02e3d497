"""Import speed: the 2,500-caption THUMB release (target < 5 s) and 100,000 generated
captions with references and ratings (target < 60 s). Prints figures; asserts nothing."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.synthetic import generate  # noqa: E402
from storage import import_captions, import_thumb, open_database  # noqa: E402

ANCHORS = ROOT.parent / "shared" / "anchors" / "thumb-1.0"
def timed(label: str, target: float, action: Callable[[], object]) -> None:
    start = time.perf_counter()
    summary = action()
    seconds = time.perf_counter() - start
    verdict = "ok" if seconds < target else "SLOWER THAN TARGET"
    print(f"{label:<44} {seconds:7.2f} s  (target < {target:g} s: {verdict})  {summary}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--captions", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        release = ANCHORS / "mscoco_THumB-1.0.jsonl"
        if release.is_file():
            engine = open_database(folder / "thumb.db")
            timed("THUMB 1.0 release (2,500 captions)", 5, lambda: import_thumb(
                engine, release, ANCHORS / "mscoco_references.json", actor="bench"))
        else:
            small = folder / "small"
            small.mkdir()
            path = generate(small, 2_500)
            engine = open_database(folder / "small.db")
            timed("generated 2,500 captions (no anchors)", 5,
                  lambda: import_captions(engine, path, actor="bench"))
        big = folder / "big"
        big.mkdir()
        path = generate(big, args.captions)
        engine = open_database(folder / "big.db")
        timed(f"generated {args.captions:,} captions + ratings", 60,
              lambda: import_captions(engine, path, actor="bench"))


if __name__ == "__main__":
    main()
