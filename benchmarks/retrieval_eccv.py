"""thumb-tui's retrieval evaluation against the eccv-caption package, same run, same rankings:
the COCO 5K test split (5,000 images x 25,000 captions, random similarities that favour each
caption's own image) and the four shipped positive sets (COCO 1K and 5K, CxC, ECCV), every
non-PM metric of eccv-caption on both sides. Best of --runs each, the two sides taking turns
so that a change of load hits both; the machine's load is printed with the rows.

1. From the command line: `thumb retrieval evaluate` on JSON files of lists of depth
   --list-length (a new model in an existing project database) with the default 1,000
   resampled CIs, against a script that loads the same files with `json` and runs
   eccv-caption (which computes no CIs); both fresh processes with compiled bytecode, as
   installed (one untimed run of each first). Also the share of our run that the CIs take.
2. In memory: our evaluation from the score matrix (what `--scores` reads), partial sorts
   included, default CIs, against eccv-caption on the same rankings as in-memory lists of
   that depth (its metrics need no deeper list: every positive set's R is below it).

Each row says the largest difference of any metric value between the two sides, and the
CPU seconds of each side beside the wall times (the verdicts): on a loaded machine the
wall times' noise can hide a difference that the CPU times show. Needs
`pip install eccv-caption`."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks.table import Table, installed_environment, package_version  # noqa: E402
from metrics.retrieval.evaluation import evaluate  # noqa: E402
from metrics.retrieval.positives import coco_1k_folds, shipped_positive_set  # noqa: E402
from metrics.retrieval.rankings import scored_directions  # noqa: E402
from storage import open_database  # noqa: E402

BOOTSTRAP = "1000"  # `thumb retrieval evaluate`'s default
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
scores = metrics.compute_all_metrics(i2t, t2i, target_metrics={TARGETS!r}, Ks=(1, 5, 10),
                                     verbose=False)
with open(sys.argv[3], "w") as f:
    json.dump(scores, f)
"""


def make_scores(seed: int, own_image: np.ndarray, images: int) -> np.ndarray:
    """(images x captions) random similarities, each caption's own image a little closer
    (so that the metrics are far from 0 and from 1)."""
    rng = np.random.default_rng(seed)
    scores = rng.random((images, len(own_image)), dtype=np.float32)
    scores[own_image, np.arange(len(own_image))] += rng.random(len(own_image),
                                                               dtype=np.float32) * 0.2
    return scores


def ranked_lists(scores: np.ndarray, queries: list[int], items: list[int], depth: int
                 ) -> dict[int, list[int]]:
    """The eccv-caption form: each query's `depth` best item ids (ties by position: by
    ascending id, as the score matrix ranks them, when `items` ascend)."""
    ids = np.asarray(items)
    lists = {}
    for start in range(0, len(queries), 1000):
        block = scores[start : start + 1000]
        order = np.argsort(-block, axis=1, kind="stable")[:, :depth]
        lists.update(zip(queries[start : start + 1000], ids[order].tolist(), strict=True))
    return lists


def largest_difference(ours: list[dict], theirs: dict) -> float:
    """Largest absolute difference over every metric both compute."""
    value = {(r["positives"], r["metric"], r["direction"], r["k"]): r["value"] for r in ours}
    pairs = [(("coco-1k" if name == "coco_1k" else name.replace("_", "-"), "recall@k", k),
              f"{name}_r{k}") for name in ("coco_1k", "coco_5k", "cxc") for k in (1, 5, 10)]
    pairs += [(("eccv", metric, k), key) for key, (metric, k) in {
        "eccv_r1": ("recall@k", 1), "eccv_map_at_r": ("map@r", None),
        "eccv_rprecision": ("r-precision", None)}.items()]
    return max(abs(value[(label, metric, direction, k)] - theirs[key][direction])
               for (label, metric, k), key in pairs for direction in ("i2t", "t2i"))


def timed(command: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and all its threads) of one run: on a
    loaded machine the CPU time shows what the wall time's noise hides."""
    env = installed_environment()  # both sides' bytecode compiled, as installed
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(command[:6])}…: {done.stderr.strip()[-500:]}")
    return seconds, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def command_line(table: Table, lists: tuple[dict, dict], runs: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        here = Path(folder)
        paths = [here / "i2t.json", here / "t2i.json"]
        for path, ranking in zip(paths, lists, strict=True):
            path.write_text(json.dumps({str(q): row for q, row in ranking.items()}),
                            encoding="utf-8")
        size = sum(p.stat().st_size for p in paths) / 1e6
        package = [sys.executable, "-c", PACKAGE_SCRIPT, *map(str, paths),
                   str(here / "theirs.json")]
        project = here / "project.db"
        open_database(str(project))  # an existing project; each run evaluates a new model

        def ours(bootstrap: str) -> list[str]:
            return [sys.executable, "-m", "thumb_tui", "--db", str(project), "retrieval",
                    "evaluate", "--name", f"run-{time.perf_counter_ns()}", "--i2t",
                    str(paths[0]), "--t2i", str(paths[1]), "--positives", "eccv",
                    "--positives", "cxc", "--positives", "coco-5k", "--positives",
                    "coco-1k", "--bootstrap", bootstrap, "--format", "json", "--out",
                    str(here / f"ours-{bootstrap}.json"), "--force"]

        timed(package)  # untimed: warms the file cache and writes the bytecode
        timed(ours("0"))
        best = {side: (float("inf"), float("inf")) for side in ("theirs", "with", "without")}
        for _ in range(runs):  # taking turns, so that a change of load hits every side
            for side, command in (("theirs", package), ("with", ours(BOOTSTRAP)),
                                  ("without", ours("0"))):
                best[side] = tuple(map(min, best[side], timed(command)))
        (theirs_s, theirs_cpu), (with_ci, with_cpu), (without_ci, without_cpu) = (
            best["theirs"], best["with"], best["without"])
        reference = json.loads((here / "theirs.json").read_text(encoding="utf-8"))
        records = json.loads((here / f"ours-{BOOTSTRAP}.json").read_text(encoding="utf-8"))
    table.speed(f"`thumb retrieval evaluate`, the four shipped sets, lists of depth "
                f"{len(next(iter(lists[0].values())))} ({size:.0f} MB of JSON), default "
                "1,000-resample CIs", with_ci, theirs_s, 4,
                f"eccv-caption {package_version('eccv-caption')} from the same files (json "
                "+ compute_all_metrics, no CIs)",
                f"max |difference| of the metric values "
                f"{largest_difference(records, reference):.1e}; {without_ci:.2f} s with "
                f"--bootstrap 0 ({theirs_s / without_ci:.1f}x); CPU time {with_cpu:.2f} s, "
                f"{without_cpu:.2f} s with --bootstrap 0, eccv-caption {theirs_cpu:.2f} s "
                f"({theirs_cpu / with_cpu:.1f}x)")
    share = with_ci / without_ci - 1
    table.add("  the CIs' share of that run (1,000 resamples against --bootstrap 0)",
              f"{share:+.0%} ({with_ci - without_ci:+.2f} s)", f"{without_ci:.2f} s without",
              None, "<= +20%", share <= 0.20,
              f"in CPU time {with_cpu / without_cpu - 1:+.0%} "
              f"({with_cpu - without_cpu:+.2f} s of {without_cpu:.2f} s)")


def in_memory(table: Table, scores: np.ndarray, images: list[int], captions: list[int],
              lists: tuple[dict, dict], sets: list, runs: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from eccv_caption import Metrics
    package = Metrics()

    def ours(bootstrap: int) -> list[dict]:  # a new matrix: nothing sorted beforehand
        directions = scored_directions(scores, tuple(images), tuple(captions))
        return evaluate(directions, positive_sets=sets, bootstrap=bootstrap)

    def clock(work) -> tuple[float, float, object]:
        """(wall seconds, CPU seconds of this process, the result) of one call."""
        start, cpu = time.perf_counter(), time.process_time()
        result = work()
        return time.perf_counter() - start, time.process_time() - cpu, result

    theirs_s = ours_s = without_ci = theirs_cpu = ours_cpu = without_cpu = float("inf")
    for _ in range(runs):  # taking turns
        with contextlib.redirect_stderr(io.StringIO()):  # its progress bars, verbose or not
            seconds, cpu, reference = clock(lambda: package.compute_all_metrics(
                *lists, target_metrics=TARGETS, Ks=(1, 5, 10), verbose=False))
        theirs_s, theirs_cpu = min(theirs_s, seconds), min(theirs_cpu, cpu)
        seconds, cpu, records = clock(lambda: ours(int(BOOTSTRAP)))
        ours_s, ours_cpu = min(ours_s, seconds), min(ours_cpu, cpu)
        seconds, cpu, _ = clock(lambda: ours(0))
        without_ci, without_cpu = min(without_ci, seconds), min(without_cpu, cpu)
    table.speed("the same in memory, from the score matrix (`--scores`: partial sorts "
                "included), default CIs", ours_s, theirs_s, 10,
                f"eccv-caption {package_version('eccv-caption')} compute_all_metrics on the "
                "in-memory lists", f"max |difference| of the metric values "
                f"{largest_difference(records, reference):.1e}; {without_ci:.2f} s with no "
                f"CIs ({theirs_s / without_ci:.1f}x); CPU time {ours_cpu:.2f} s, "
                f"{without_cpu:.2f} s with no CIs, eccv-caption {theirs_cpu:.2f} s "
                f"({theirs_cpu / ours_cpu:.1f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--list-length", type=int, default=1000)
    parser.add_argument("--skip-command-line", action="store_true")
    args = parser.parse_args()
    coco = shipped_positive_set("coco-5k")
    # ascending ids: the lists' ties (by position) are then the score matrix's (by id)
    images, captions = sorted(coco.image_to_captions), sorted(coco.caption_to_images)
    image_index = {image: i for i, image in enumerate(images)}
    own_image = np.array([image_index[coco.caption_to_images[c][0]] for c in captions])
    sets = [("coco-1k", coco_1k_folds(coco)), ("coco-5k", [coco]),
            ("cxc", [shipped_positive_set("cxc")]), ("eccv", [shipped_positive_set("eccv")])]
    scores = make_scores(args.seed, own_image, len(images))
    lists = (ranked_lists(scores, images, captions, args.list_length),
             ranked_lists(scores.T, captions, images, args.list_length))
    load = os.getloadavg()[0]
    table = Table("retrieval_eccv", f"COCO 5K ({len(images):,} images x {len(captions):,} "
                  f"captions), the four shipped positive sets, best of {args.runs}; load "
                  f"average {load:.1f} on {os.cpu_count()} CPUs at the start")
    if not args.skip_command_line:
        command_line(table, lists, args.runs)
    in_memory(table, scores, images, captions, lists, sets, args.runs)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    table.save()


if __name__ == "__main__":
    main()
