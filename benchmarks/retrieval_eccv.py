"""thumb-tui's retrieval metrics against the eccv-caption package, same run, same rankings.

1. In memory: full 5,000 x 25,000 rankings of the COCO 5K test split (random similarities
   that favour each caption's own image), for several seeds. Each side gets the rankings
   in its own in-memory form (eccv-caption: dicts of id lists; thumb-tui: index arrays,
   what `--scores` or the JSON reader produce) and computes every non-PM metric of
   eccv-caption on both sides: COCO 1K and 5K R@1/5/10, CxC R@1/5/10, ECCV R@1, R-P and
   mAP@R. Best of 3 each; the converting of eccv-caption's dicts into arrays is timed
   apart and printed too.
2. From the command line: one `thumb retrieval evaluate` call with the four shipped sets
   on JSON files (lists truncated to --list-length so that eccv-caption's `json` load
   fits in memory), against a script that loads the same files with `json` and runs
   eccv-caption. Both as fresh processes with compiled bytecode, as installed (one
   untimed run of each first), taking turns, best of 3; thumb-tui with
   --bootstrap 0 (the package computes no CIs), each run a new model in an existing
   project database; once more with the default 1,000 resamples and once creating the
   database.

Prints figures and ratios; the last line is `speedup: X` (eccv-caption time / ours, in
memory). Needs `pip install eccv-caption`."""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks.table import installed_environment  # noqa: E402
from metrics.positives import coco_1k_folds, shipped_positive_set  # noqa: E402
from metrics.rankings import Rankings, rankings_from_lists  # noqa: E402
from metrics.retrieval import evaluate  # noqa: E402
from storage import open_database  # noqa: E402

TARGETS = ("coco_1k_recalls", "coco_5k_recalls", "cxc_recalls", "eccv_r1", "eccv_map_at_r",
           "eccv_rprecision")
PACKAGE_SCRIPT = f"""
import json, sys, warnings
warnings.simplefilter("ignore")
from eccv_caption import Metrics
with open(sys.argv[1]) as f:
    i2t = {{int(k): v for k, v in json.load(f).items()}}
with open(sys.argv[2]) as f:
    t2i = {{int(k): v for k, v in json.load(f).items()}}
metrics = Metrics()
metrics.compute_all_metrics(i2t, t2i, target_metrics={TARGETS!r}, Ks=(1, 5, 10),
                            verbose=False)
"""


def best_of(runs: int, work) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        result = work()
        best = min(best, time.perf_counter() - start)
    return best, result


def make_rankings(seed: int, images: list[int], captions: list[int],
                  own_image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(i2t order, t2i order) as index arrays: random similarities, each caption's own
    image a little closer (so the metrics are far from 0 and from 1)."""
    rng = np.random.default_rng(seed)
    scores = rng.random((len(images), len(captions)), dtype=np.float32)
    scores[own_image, np.arange(len(captions))] += rng.random(len(captions),
                                                              dtype=np.float32) * 0.2
    i2t = np.argsort(-scores, axis=1, kind="stable").astype(np.int32)
    t2i = np.argsort(-scores.T, axis=1, kind="stable").astype(np.int32)
    return i2t, t2i


def package_lists(order: np.ndarray, queries: list[int], items: list[int]
                  ) -> dict[int, list[int]]:
    return {query: [items[j] for j in row] for query, row in zip(queries, order.tolist(),
                                                                  strict=True)}


def ours_in_memory(i2t: np.ndarray, t2i: np.ndarray, images: list[int], captions: list[int],
                   sets: list) -> list[dict]:
    directions = {"i2t": Rankings(tuple(images), tuple(captions), i2t),
                  "t2i": Rankings(tuple(captions), tuple(images), t2i)}
    return evaluate(directions, positive_sets=sets, bootstrap=0)


def compare_values(ours: list[dict], theirs: dict) -> float:
    """Largest absolute difference over every metric both compute."""
    value = {(r["positives"], r["metric"], r["direction"], r["k"]): r["value"] for r in ours}
    worst = 0.0
    for name, label in (("coco_1k", "coco-1k"), ("coco_5k", "coco-5k"), ("cxc", "cxc")):
        for k in (1, 5, 10):
            for direction in ("i2t", "t2i"):
                worst = max(worst, abs(value[(label, "recall@k", direction, k)]
                                       - theirs[f"{name}_r{k}"][direction]))
    for key, (metric, k) in {"eccv_r1": ("recall@k", 1), "eccv_map_at_r": ("map@r", None),
                             "eccv_rprecision": ("r-precision", None)}.items():
        for direction in ("i2t", "t2i"):
            worst = max(worst, abs(value[("eccv", metric, direction, k)]
                                   - theirs[key][direction]))
    return worst


def command_line(i2t: np.ndarray, t2i: np.ndarray, images: list[int], captions: list[int],
                 length: int, runs: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        paths = [Path(folder) / "i2t.json", Path(folder) / "t2i.json"]
        for path, order, queries, items in ((paths[0], i2t, images, captions),
                                            (paths[1], t2i, captions, images)):
            head = np.asarray(items)[order[:, :length]]
            with open(path, "w") as handle:
                json.dump({str(q): row for q, row in zip(queries, head.tolist(), strict=True)},
                          handle)
        size = sum(p.stat().st_size for p in paths) / 1e6
        env = installed_environment()  # both sides' bytecode compiled, as installed
        package = [sys.executable, "-c", PACKAGE_SCRIPT, str(paths[0]), str(paths[1])]
        project = Path(folder) / "project.db"
        open_database(str(project))  # an existing project; each run evaluates a new model

        def ours_command(bootstrap: str, db: Path = project) -> list[str]:
            return [sys.executable, "-m", "thumb_tui", "--db", str(db), "retrieval",
                    "evaluate", "--name", f"run-{time.perf_counter_ns()}", "--i2t",
                    str(paths[0]), "--t2i", str(paths[1]), "--positives", "eccv",
                    "--positives", "cxc", "--positives", "coco-5k", "--positives",
                    "coco-1k", "--bootstrap", bootstrap, "--format", "json", "--out",
                    str(Path(folder) / "o.json"), "--force"]

        def run(command) -> None:
            done = subprocess.run(command() if callable(command) else command, env=env,
                                  capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"failed: {done.stderr.strip()[-500:]}")

        run(package)  # untimed: warms the file cache and writes the bytecode
        run(lambda: ours_command("0"))
        theirs = ours = float("inf")
        for _ in range(runs):  # alternating, so that a change of load hits both sides
            theirs = min(theirs, best_of(1, lambda: run(package))[0])
            ours = min(ours, best_of(1, lambda: run(lambda: ours_command("0")))[0])
        with_ci, _ = best_of(1, lambda: run(lambda: ours_command("1000")))
        new_db, _ = best_of(1, lambda: run(lambda: ours_command(
            "0", Path(folder) / "new.db")))
        print(f"command line, lists of {length} ({size:.0f} MB of JSON): eccv-caption "
              f"(json + compute) {theirs:.2f} s, thumb retrieval evaluate {ours:.2f} s "
              f"(--bootstrap 0, a new model in an existing database; {new_db:.2f} s "
              f"creating the database), {with_ci:.2f} s with 1,000-resample CIs")
        print(f"command-line speedup: {theirs / ours:.1f}x (creating the database: "
              f"{theirs / new_db:.1f}x; with CIs: {theirs / with_ci:.1f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--list-length", type=int, default=1000)
    parser.add_argument("--skip-command-line", action="store_true")
    args = parser.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from eccv_caption import Metrics
    coco = shipped_positive_set("coco-5k")
    images, captions = list(coco.image_to_captions), list(coco.caption_to_images)
    image_index = {image: i for i, image in enumerate(images)}
    own_image = np.array([image_index[coco.caption_to_images[c][0]] for c in captions])
    sets = [("coco-1k", coco_1k_folds(coco)), ("coco-5k", [coco]),
            ("cxc", [shipped_positive_set("cxc")]), ("eccv", [shipped_positive_set("eccv")])]
    package = Metrics()
    ratios, last = [], None
    for seed in (int(s) for s in args.seeds.split(",")):
        i2t, t2i = make_rankings(seed, images, captions, own_image)
        lists = (package_lists(i2t, images, captions), package_lists(t2i, captions, images))
        theirs, reference = best_of(args.runs, lambda lists=lists: package.compute_all_metrics(
            *lists, target_metrics=TARGETS, Ks=(1, 5, 10), verbose=False))
        ours, records = best_of(args.runs, lambda i2t=i2t, t2i=t2i: ours_in_memory(
            i2t, t2i, images, captions, sets))
        convert, _ = best_of(1, lambda lists=lists: (rankings_from_lists(lists[0]),
                                                     rankings_from_lists(lists[1])))
        difference = compare_values(records, reference)
        ratios.append(theirs / ours)
        print(f"seed {seed}: eccv-caption {theirs:.2f} s, thumb-tui {ours:.3f} s "
              f"(x{theirs / ours:.0f}); max |difference| {difference:.1e}; converting the "
              f"package's dicts to arrays {convert:.2f} s (x{theirs / (ours + convert):.1f} "
              "with it)")
        last = (i2t, t2i)
        del lists
    if not args.skip_command_line:
        command_line(*last, images, captions, args.list_length, args.runs)
    print(f"speedup: {min(ratios):.1f}")


if __name__ == "__main__":
    main()
