"""The import fuzz test in benchmark mode: 150 hypothesis examples per import format
(1,050 in all, against 10 per format in CI), each a mutated file that must be imported or
refused cleanly (exit 2, file:line lines, no traceback, database byte-identical, no file
left behind). Prints the examples run and the outcome; exits non-zero on any failure."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--per-format", type=int, default=150)
    args = parser.parse_args()
    counts = Path(tempfile.mkdtemp()) / "outcomes.txt"
    env = {**os.environ, "THUMB_FUZZ_EXAMPLES": str(args.per_format),
           "THUMB_FUZZ_COUNT_FILE": str(counts),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/test_untrusted_fuzz.py", "-k", "malformed"],
        cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    outcomes = Counter(counts.read_text().split("\n")[:-1]) if counts.exists() else Counter()
    total = sum(outcomes.values())
    print(f"import fuzz: {total} examples over 7 formats in {seconds:.0f} s "
          f"({seconds / max(total, 1) * 1000:.0f} ms each); pytest exit {result.returncode}")
    for outcome, count in sorted(outcomes.items()):
        print(f"  {outcome:<28} {count:5d}")
    print(result.stdout.strip().splitlines()[-1] if result.stdout.strip() else result.stderr)
    if result.returncode != 0:
        print(result.stdout[-5000:])
    sys.exit(result.returncode)


if __name__ == "__main__":
    main()
