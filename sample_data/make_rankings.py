"""Two retrieval "models" for the sample project that the NCS paper's Figure 1 tells apart:
both put every query's own items first (so R@1, R@5 and mAP@R are perfect for both), then
model A continues with the items most relevant to the query and model B with the least
relevant ones. Relevance comes from `thumb retrieval relevance` (CIDEr-D of each caption
against each image's references).

Usage::

    python sample_data/make_rankings.py relevance-cider-d.npz OUT_DIR

writes OUT_DIR/{A,B}_{i2t,t2i}.json in the eccv-caption layout.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def ranked(relevance: np.ndarray, own: np.ndarray, items: list[str], best_first: bool
           ) -> list[str]:
    """The query's own items (most relevant first), then the rest by relevance."""
    sign = -1 if best_first else 1
    order = np.lexsort((np.arange(len(items)), sign * relevance, ~own))
    return [items[j] for j in order]


def main(relevance_file: Path, out: Path) -> None:
    data = np.load(relevance_file)
    values = data["values"]
    images, captions = data["image_ids"].tolist(), data["caption_ids"].tolist()
    truth = {(str(i), str(c)) for i, c in data["ground_truth"]}
    own = np.array([[(i, c) in truth for c in captions] for i in images])
    out.mkdir(parents=True, exist_ok=True)
    for model, best_first in (("A", True), ("B", False)):
        i2t = {i: ranked(values[row], own[row], captions, best_first)
               for row, i in enumerate(images)}
        t2i = {c: ranked(values[:, col], own[:, col], images, best_first)
               for col, c in enumerate(captions)}
        for direction, lists in (("i2t", i2t), ("t2i", t2i)):
            (out / f"{model}_{direction}.json").write_text(json.dumps(lists, indent=1),
                                                           encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
