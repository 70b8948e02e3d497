"""Generated projects of any size for the benchmarks (no anchors needed)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

from PIL import Image

SYSTEMS = ("Human", "Up-Down", "VinVL-base", "VinVL-large", "Unified-VLP")
COLUMNS = ["image", "system", "caption", "reference_1", "reference_2", "reference_3",
           "reference_4", "annotator", "stage", "precision", "recall", "fluency"]


def _png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), (90, 120, 200)).save(buffer, format="PNG")
    return buffer.getvalue()


def _rows(folder: Path, captions: int, rated_every: int) -> Iterator[list[object]]:
    """The rows, writing each image file (a small valid PNG) as it first appears."""
    (folder / "images").mkdir()
    picture = _png()
    for index in range(captions):
        image = f"images/{index // len(SYSTEMS):06d}.png"
        if index % len(SYSTEMS) == 0:
            (folder / image).write_bytes(picture)
        system = SYSTEMS[index % len(SYSTEMS)]
        refs = [f"Reference {k} of image {index // len(SYSTEMS)}." for k in range(4)]
        rating = ["bench", "1", 1 + index % 5, 1 + (index // 5) % 5,
                  "0.1" if index % 17 == 0 else "0"]
        if (index // len(SYSTEMS)) % rated_every:
            rating = [""] * len(rating)
        yield [image, system, f"A caption {index} of a scene.", *refs, *rating]


def generate(folder: Path, captions: int, rated_every: int = 1, fmt: str = "csv") -> Path:
    """A CSV (or JSON-lines) file of `captions` rows: 5 systems per image, 4 references;
    every `rated_every`-th image rated at stage 1 by annotator `bench` (the others stay
    open to anyone)."""
    path = folder / f"captions.{fmt}"
    with path.open("w", encoding="utf-8", newline="") as handle:
        if fmt == "csv":
            writer = csv.writer(handle)
            writer.writerow(COLUMNS)
            writer.writerows(_rows(folder, captions, rated_every))
            return path
        for row in _rows(folder, captions, rated_every):
            record = dict(zip(COLUMNS[:3], row[:3], strict=True))
            record["references"] = row[3:7]
            if row[7]:
                record.update(annotator=row[7], stage=int(row[8]), precision=row[9],
                              recall=row[10], fluency=float(row[11]))
            handle.write(json.dumps(record) + "\n")
    return path
