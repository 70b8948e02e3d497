"""Write the sample judgment sets (`judgments.csv`, `judgment_pairs.csv`) and the
references file (`references.csv`) from `captions.csv` and `example_ratings.csv`.

Illustrative data for trying `thumb judgments`, not real judgments: three judges score
each caption on 1-4 from the example stage-1 ratings with seeded disagreement, and choose
between caption pairs of an image the same way. Two systems wrote the same text for some
images: the score set tells those captions apart by `caption_id`, and the pairwise set
asks about each pair of distinct texts once. Deterministic; stdlib only."""

from __future__ import annotations

import csv
import itertools
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
JUDGES = ("judge-1", "judge-2", "judge-3")


def main() -> None:
    rng = random.Random(18)
    with open(HERE / "captions.csv", newline="", encoding="utf-8") as handle:
        captions = list(csv.DictReader(handle))
    with open(HERE / "example_ratings.csv", newline="", encoding="utf-8") as handle:
        quality = {(row["image_id"], row["system"]): (int(row["precision"])
                                                      + int(row["recall"])) / 2
                   for row in csv.DictReader(handle) if row["stage"] == "1"}
    with open(HERE / "references.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image_id", "reference"])
        done = set()
        for row in captions:
            if row["image_id"] not in done:
                done.add(row["image_id"])
                for number in range(1, 5):
                    writer.writerow([row["image_id"], row[f"reference_{number}"]])
    with open(HERE / "judgments.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image_id", "caption_id", "caption", "judge", "score"])
        for number, row in enumerate(captions, start=1):
            base = quality[(row["image_id"], row["system"])] * 0.75  # 1-5 onto about 1-4
            for judge in JUDGES:
                score = min(4, max(1, round(base + rng.choice((-1, 0, 0, 0, 1)))))
                writer.writerow([row["image_id"], f"c{number:02d}", row["caption"], judge,
                                 score])
    with open(HERE / "judgment_pairs.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image_id", "caption_a", "caption_b", "judge", "choice", "category"])
        by_image: dict[str, list[dict]] = {}
        for row in captions:
            by_image.setdefault(row["image_id"], []).append(row)
        for image, rows in by_image.items():
            asked = set()
            for a, b in itertools.combinations(rows, 2):
                texts = frozenset((a["caption"], b["caption"]))
                if len(texts) == 1 or texts in asked:
                    continue
                asked.add(texts)
                category = ("human-machine" if "Human" in (a["system"], b["system"])
                            else "machine-machine")
                for judge in JUDGES:
                    gap = (quality[(image, a["system"])] - quality[(image, b["system"])]
                           + rng.gauss(0, 0.6))
                    choice = "tie" if abs(gap) < 0.25 else ("a" if gap > 0 else "b")
                    writer.writerow([image, a["caption"], b["caption"], judge, choice,
                                     category])


if __name__ == "__main__":
    main()
