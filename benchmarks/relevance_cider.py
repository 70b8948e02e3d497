"""The all-pairs CIDEr-D relevance matrix at COCO 5K size: 5,000 images x 25,000 captions
(125 M pairs; the captions are the images' own five references, as in the NCS paper). The
COCO texts are not available offline, so the captions are generated: 8-15 words from a
Zipf-distributed vocabulary of 10,000 words (COCO's has ~10k, with a head of very common
words). Prints the time, the peak memory of this process, and a check against
`metrics.text.cider.cider_d` scoring sampled captions against every image one by one (its time
extrapolated to all captions)."""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from metrics.retrieval.relevance import cider_d_all_pairs  # noqa: E402
from metrics.text.cider import cider_d  # noqa: E402


def corpus(images: int, seed: int = 0) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    vocabulary = np.array([f"w{i}" for i in range(10_000)])
    weights = 1 / np.arange(1, len(vocabulary) + 1) ** 1.1
    weights /= weights.sum()
    lengths = rng.integers(8, 16, size=images * 5)
    words = vocabulary[rng.choice(len(vocabulary), int(lengths.sum()), p=weights)]
    cuts = np.cumsum(lengths)[:-1]
    sentences = [" ".join(part) for part in np.split(words, cuts)]
    return [sentences[5 * i : 5 * i + 5] for i in range(images)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--sample", type=int, default=20)
    args = parser.parse_args()
    references = corpus(args.images)
    captions = [r for refs in references for r in refs]
    start = time.perf_counter()
    matrix = cider_d_all_pairs(captions, references)
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    pairs = matrix.size
    print(f"{args.images} images x {len(captions)} captions = {pairs / 1e6:.0f} M pairs: "
          f"{elapsed:.1f} s, peak memory of the process {peak:.2f} GB")
    rng = np.random.default_rng(1)
    sample = rng.choice(len(captions), args.sample, replace=False)
    start = time.perf_counter()
    worst = 0.0
    for column in sample:
        one = cider_d([captions[column]] * len(references), references)
        worst = max(worst, float(np.abs(one - matrix[:, column]).max()))
    per_caption = (time.perf_counter() - start) / len(sample)
    print(f"check: {len(sample)} captions scored one by one against every image with "
          f"cider_d: max |difference| {worst:.1e}; {per_caption:.2f} s per caption, "
          f"~{per_caption * len(captions) / 3600:.1f} h for all")
    print(f"speedup over the per-caption loop: {per_caption * len(captions) / elapsed:.0f}x")


if __name__ == "__main__":
    main()
