"""BISON's caption-metric baseline (Hu et al. 2019, section 6) is fair to both images: each
is scored against the same number of its references, sampled the same way, the query
left out of both: which image is the true one never reaches the choice."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest

from metrics.base import CaptionItem
from metrics.registry import MetricOptions, build_metric
from metrics.retrieval.bison import baseline_choices
from metrics.signature import parse_signature

REFERENCES = ["a red ball on the grass", "two balls lying on a lawn",
              "a blue sky over a field", "a small cloud in the sky",
              "a sunny day in the park", "green grass and a red toy",
              "a toy ball outside", "an empty lawn on a bright day"]
QUERIES = ["a red ball lying on green grass", "balls on a lawn", "blue sky and a field",
           "a cloud in a blue sky", "a sunny park", "a red toy on the grass",
           "a ball outside", "a bright empty lawn", "two red balls on grass",
           "a toy in the park", "a lawn under the sky", "a ball in the park"]


class CountingMetric:
    """Scores a query by how many references it was given: any difference in what the two
    candidates get shows as a choice."""

    name = "count"

    def signature(self, items: Sequence[CaptionItem], references: str) -> str:
        return f"count|refs:{references}"

    def score(self, items: Sequence[CaptionItem]) -> np.ndarray:
        return np.array([len(item.references) for item in items], dtype=float)


def _items(queries: list[str], true_images: list[int]) -> pd.DataFrame:
    """One item per query, each between images 1 and 2 (keys A and B)."""
    return pd.DataFrame({"item_id": range(len(queries)), "query": queries,
                         "image_a": 1, "image_b": 2, "true_image": true_images,
                         "item_key": [f"b{n}" for n in range(len(queries))],
                         "image_a_key": "A", "image_b_key": "B"})


def _bleu():
    return build_metric("bleu", MetricOptions())


@pytest.mark.parametrize("true_refs,other_refs", [
    (REFERENCES, REFERENCES[:5]),                      # both more than four
    ([*REFERENCES[:3], QUERIES[0]], REFERENCES),       # the query leaves 3 on its own image
    (REFERENCES[:2], REFERENCES[2:]),                  # the true image has fewer
])
def test_both_candidates_get_the_same_number_of_references(true_refs, other_refs):
    items = _items([QUERIES[0]], [1])
    _, chosen = baseline_choices(items, {1: (None, true_refs), 2: (None, other_refs)},
                                 CountingMetric())  # type: ignore[arg-type]
    expected = min(4, len([r for r in true_refs if r != QUERIES[0]]), len(other_refs))
    assert chosen["score_a"].tolist() == chosen["score_b"].tolist() == [expected]
    assert chosen["chosen_image_id"].isna().all()  # a tie: neither is favoured


def test_with_identical_references_which_image_is_true_does_not_change_the_choice():
    """The trial's case: both images have the same eight references, none the query. The
    baseline cannot know which is true, so flipping every item's true image leaves every
    choice as it was: whatever it gets right in one run it gets wrong in the other."""
    images = {1: (None, REFERENCES), 2: (None, list(REFERENCES))}
    flipped = []
    for true_images in ([1, 2] * 6, [2, 1] * 6):
        _, chosen = baseline_choices(_items(QUERIES, true_images), images, _bleu())
        flipped.append(chosen["chosen_image_id"])
    assert flipped[0].equals(flipped[1])  # ties (NaN) included
    assert flipped[0].notna().any()  # some items decided: draws differ per image


def test_the_choice_never_depends_on_which_image_is_true():
    """The query is one of image 1's references (as a COCO-BISON query is one of its true
    image's captions), the images' references differ: the query leaves both pools alike,
    so flipping every item's true image changes no choice (the baseline cannot see it)."""
    own = [*REFERENCES[:4], *QUERIES]
    images = {1: (None, own), 2: (None, [*REFERENCES[3:], *QUERIES[6:]])}
    runs = [baseline_choices(_items(QUERIES, true_images), images, _bleu())[1]
            for true_images in ([1] * 12, [2] * 12)]
    assert runs[0][["score_a", "score_b"]].equals(runs[1][["score_a", "score_b"]])
    assert runs[0]["chosen_image_id"].equals(runs[1]["chosen_image_id"])
    assert runs[0]["score_a"].ne(runs[0]["score_b"]).any()  # not all ties: it can fail


def test_swapping_the_two_images_swaps_the_scores_and_keeps_the_choice():
    images = {1: (None, REFERENCES[:6]), 2: (None, [*REFERENCES[2:], "a dog on a sofa"])}
    items = _items(QUERIES, [1, 2] * 6)
    swapped = items.assign(image_a=items["image_b"], image_b=items["image_a"],
                           image_a_key=items["image_b_key"], image_b_key=items["image_a_key"])
    _, chosen = baseline_choices(items, images, _bleu())
    _, chosen_swapped = baseline_choices(swapped, images, _bleu())
    assert chosen["score_a"].tolist() == chosen_swapped["score_b"].tolist()
    assert chosen["score_b"].tolist() == chosen_swapped["score_a"].tolist()
    assert chosen["chosen_image_id"].equals(chosen_swapped["chosen_image_id"])
    assert chosen["score_a"].ne(chosen["score_b"]).any()  # not all ties: the test can fail


def test_the_signature_says_how_references_were_drawn_and_the_seed_changes_the_draw():
    images = {1: (None, REFERENCES), 2: (None, list(REFERENCES))}
    items = _items(QUERIES, [1, 2] * 6)
    signatures, choices = zip(*(baseline_choices(items, images, _bleu(), seed=seed)
                                for seed in (0, 1)), strict=True)
    fields = parse_signature(signatures[0])
    assert fields["refs"] == "up-to-4-same-for-both"
    assert fields["draw"] == "seeded-per-item-image" and fields["seed"] == "0"
    assert fields["query"] == "not-own-reference"
    assert parse_signature(signatures[1])["seed"] == "1"
    assert not choices[0]["score_a"].equals(choices[1]["score_a"])
