"""Match proposals at COCO 5K scale: 5,000 images x 25,000 captions, five models, top 5 per
query in both directions (lists kept to 25), through `thumb match propose` (reading the
.npy, chunked top-k, writing proposals) on this machine's CPU. Targets: <= 60 s for the five
models, peak memory <= 4 GB per run. The reference, measured in the same run, is the
obvious way: load the matrix and argsort every row and every column. Prints figures,
asserts nothing."""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import insert  # noqa: E402

from storage import open_database  # noqa: E402
from storage.models import Caption, Image  # noqa: E402


def make_project(db: Path, images: int, per_image: int) -> tuple[list[str], list[str]]:
    engine = open_database(db)
    image_keys = [f"{i:06d}" for i in range(images)]
    with engine.begin() as connection:
        connection.execute(insert(Image.__table__), [{"key": k, "double_rating": False}
                                                     for k in image_keys])
        connection.execute(insert(Caption.__table__), [
            {"image_id": i + 1, "system": f"s{j}", "text": f"Caption {j} of image {i}.",
             "external_id": str(i * per_image + j)}
            for i in range(images) for j in range(per_image)])
    engine.dispose()
    return image_keys, [str(c) for c in range(images * per_image)]


def write_matrix(path: Path, images: int, captions: int, seed: int) -> None:
    """A float32 .npy written in row blocks (never whole in memory): noise plus a lift for
    each caption's own image, like a retrieval model's similarities."""
    matrix = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32,
                                       shape=(images, captions))
    rng = np.random.default_rng(seed)
    per_image = captions // images
    for start in range(0, images, 500):
        block = rng.standard_normal((min(500, images - start), captions), dtype=np.float32)
        for row in range(len(block)):
            own = (start + row) * per_image
            block[row, own:own + per_image] += 3.0
        matrix[start:start + len(block)] = block
    matrix.flush()
    del matrix


def run_measured(command: list[str]) -> tuple[float, float, str]:
    """Seconds and peak resident memory (GB) of a child process, and its output."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    output = process.stdout.read().decode() if process.stdout else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"command failed: {' '.join(command)}\n{output}")
    return seconds, usage.ru_maxrss / 1024 ** 2, output


REFERENCE = """
import sys, time, numpy as np
start = time.perf_counter()
scores = np.load(sys.argv[1])
i2t = np.argsort(-scores, axis=1, kind="stable")[:, :25]
t2i = np.argsort(-scores, axis=0, kind="stable")[:25].T
print(f"{time.perf_counter() - start:.2f}")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--captions-per-image", type=int, default=5)
    parser.add_argument("--models", type=int, default=5)
    args = parser.parse_args()
    captions = args.images * args.captions_per_image
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        db = folder / "match.db"
        image_keys, caption_keys = make_project(db, args.images, args.captions_per_image)
        (folder / "images.txt").write_text("\n".join(image_keys))
        (folder / "captions.txt").write_text("\n".join(caption_keys))
        print(f"project: {args.images:,} images x {captions:,} captions; "
              f"{args.models} models, top 5 per query, both directions, lists kept to 25")
        total, peaks = 0.0, []
        for model in range(args.models):
            matrix = folder / f"model{model}.npy"
            write_matrix(matrix, args.images, captions, seed=model)
            seconds, peak, output = run_measured([
                sys.executable, "-m", "thumb_tui", "--db", str(db), "match", "propose",
                "--model", f"model{model}", "--scores", str(matrix),
                "--image-keys", str(folder / "images.txt"),
                "--caption-keys", str(folder / "captions.txt"), "--top-k", "5"])
            total += seconds
            peaks.append(peak)
            print(f"  model{model}: {seconds:6.1f} s, peak {peak:5.2f} GB  "
                  f"{output.splitlines()[0]}")
            if model == 0:
                reference_seconds, reference_peak, reference_out = run_measured(
                    [sys.executable, "-c", REFERENCE, str(matrix)])
                reference_topk = float(reference_out.strip())
            matrix.unlink()
        print(f"ours, {args.models} models end to end (CLI start, .npy read, top-k, database "
              f"writes): {total:.1f} s (target <= 60 s), peak memory "
              f"{max(peaks):.2f} GB (target <= 4 GB)")
        print(f"reference (full load + argsort of rows and columns, top-k only, one model): "
              f"{reference_topk:.1f} s, process {reference_seconds:.1f} s, peak "
              f"{reference_peak:.2f} GB")
        per_model = total / args.models
        print(f"ratio: reference process / ours per model = "
              f"{reference_seconds / per_model:.2f}x time, peak memory "
              f"{reference_peak / max(peaks):.2f}x")
        print(f"this process's own peak: "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2:.2f} GB")


if __name__ == "__main__":
    main()
