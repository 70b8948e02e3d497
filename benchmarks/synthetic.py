"""Generated projects of any size for the benchmarks (no anchors needed)."""

from __future__ import annotations

import csv
from pathlib import Path

SYSTEMS = ("Human", "Up-Down", "VinVL-base", "VinVL-large", "Unified-VLP")


def generate(folder: Path, captions: int, rated_every: int = 1) -> Path:
    """A CSV of `captions` rows: 5 systems per image, 4 references; every `rated_every`-th
    image rated at stage 1 by annotator `bench` (the others stay open to anyone)."""
    images = folder / "images"
    images.mkdir()
    path = folder / "captions.csv"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image", "system", "caption", "reference_1", "reference_2",
                         "reference_3", "reference_4", "annotator", "stage", "precision",
                         "recall", "fluency"])
        for index in range(captions):
            image = f"images/{index // len(SYSTEMS):06d}.png"
            if index % len(SYSTEMS) == 0:
                (folder / image).touch()
            system = SYSTEMS[index % len(SYSTEMS)]
            refs = [f"Reference {k} of image {index // len(SYSTEMS)}." for k in range(4)]
            rating = ["bench", "1", 1 + index % 5, 1 + (index // 5) % 5,
                      "0.1" if index % 17 == 0 else "0"]
            if (index // len(SYSTEMS)) % rated_every:
                rating = [""] * len(rating)
            writer.writerow([image, system, f"A caption {index} of a scene.", *refs,
                             *rating])
    return path
