"""BISON (Hu et al. 2019): models and caption-metric baselines choose which of two images a
caption describes; accuracy with bootstrap CIs, and agreement with human answers."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd

from metrics.base import CaptionItem, Metric
from metrics.signature import format_signature
from metrics.stats.confidence import Interval, check_ci
from metrics.stats.correlation import bca, image_weights
from rubrics import clean_caption


class ImageTextScorer(Protocol):
    """Anything that scores how well a text describes an image (higher = better)."""

    name: str

    def signature(self) -> str: ...

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray: ...


class ClipScorer:
    """Cosine similarity of CLIP image and text embeddings (each distinct image and text
    embedded once, shared with the CLIP metrics)."""

    name = "clip"

    def __init__(self, model: str, device: str = "auto", batch_size: int | None = None
                 ) -> None:
        from metrics.models.clip import embedder
        from metrics.models.torch_device import model_label, resolve_device

        self.clip = embedder(model, resolve_device(device), batch_size)
        self._model = model_label(model)

    def signature(self) -> str:
        return format_signature("bison-clip", {"model": self._model, "sim": "cosine",
                                               "prefix": "none"})

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        images = self.clip.images([image for image, _ in pairs])
        texts = self.clip.texts([text for _, text in pairs])
        return np.einsum("ij,ij->i", images, texts)


def choices(items: pd.DataFrame, scores_a: np.ndarray, scores_b: np.ndarray
            ) -> pd.DataFrame:
    """Each item's choice: the image with the higher score, none on a tie."""
    chosen = np.where(scores_a > scores_b, items["image_a"], items["image_b"]).astype(float)
    chosen[scores_a == scores_b] = np.nan
    return pd.DataFrame({"item_id": items["item_id"].to_numpy(), "score_a": scores_a,
                         "score_b": scores_b, "chosen_image_id": chosen})


def model_choices(items: pd.DataFrame, image_paths: dict[int, str | None],
                  scorer: ImageTextScorer) -> pd.DataFrame:
    """Score both candidate images of every item with the model; its choices."""
    missing = [image_paths[i] for pair in items[["image_a", "image_b"]].itertuples(index=False)
               for i in pair if not image_paths[i] or not Path(image_paths[i]).is_file()]
    if missing:
        raise RuntimeError(f"{len(missing)} candidate image files not found, e.g. {missing[0]}")
    pairs = [(image_paths[image], query)
             for query, a, b in items[["query", "image_a", "image_b"]].itertuples(index=False)
             for image in (a, b)]
    scores = scorer.score(pairs)  # type: ignore[arg-type]
    return choices(items, scores[0::2], scores[1::2])


def baseline_choices(items: pd.DataFrame, images: dict[int, tuple[str | None, list[str]]],
                     metric: Metric,
                     *, seed: int = 0, sampled: int = 4) -> tuple[str, pd.DataFrame]:
    """BISON section 6: pick the image whose reference captions give the query the higher
    metric score. The query is removed from both images' references (it is one of its
    own image's; the baseline never looks at which image is true); then both candidates
    are scored against the same number of references (`sampled`, or fewer where a
    candidate has fewer), each candidate's drawn by its own generator seeded with (`seed`,
    item, image): so neither image gets more references than the other, and swapping an
    item's two images swaps its choice. Query and references get THUMB's
    clean-up, as `thumb metrics compute` gives them (`clean:thumb`). Returns (signature,
    choices)."""
    candidates = []
    for row in items.itertuples(index=False):
        query = clean_caption(row.query)
        item_name = getattr(row, "item_key", row.item_id)  # (named by their keys, if given)
        pair = ((row.image_a, getattr(row, "image_a_key", row.image_a)),
                (row.image_b, getattr(row, "image_b_key", row.image_b)))
        pool = {image: _reference_pool(images[image][1], query) for image, _ in pair}
        for image, image_name in pair:
            if not pool[image]:
                raise RuntimeError(
                    f"BISON item {item_name!r}: image {image_name!r} has no reference "
                    "captions (other than the query) to score the query against (import "
                    "the project's captions with their references first: thumb import "
                    "FILE)")
        count = min(sampled, *(len(refs) for refs in pool.values()))
        for image, image_name in pair:
            generator = random.Random(repr((seed, str(item_name), str(image_name))))
            drawn = generator.sample(pool[image], count)
            # one "system" for all candidates: CIDEr-D's corpus is the whole item set
            candidates.append(CaptionItem(len(candidates), str(image), images[image][0], "bison",
                                          query, tuple(drawn)))
    scores = metric.score(candidates)
    signature = format_signature(f"bison-baseline-{metric.name}", {
        "metric": metric.signature(candidates, "candidate-image").replace("|", ";"),
        "query": "not-own-reference", "refs": f"up-to-{sampled}-same-for-both",
        "draw": "seeded-per-item-image", "seed": str(seed), "clean": "thumb"})
    return signature, choices(items, scores[0::2], scores[1::2])


def _reference_pool(references: list[str], query: str) -> list[str]:
    """An image's cleaned references to sample from, without the query (one of the true
    image's captions: scoring it against itself would give the answer away). Taken from
    both images alike, so the baseline never looks at which one is true."""
    cleaned = [clean_caption(reference) for reference in references]
    return [reference for reference in cleaned if reference.casefold() != query.casefold()]


def _coverage_warning(chosen: int, items: int) -> str | None:
    """Why a model's accuracy may not compare with the others': it chose for fewer items
    than the project has now (items imported after it ran)."""
    if chosen >= items:
        return None
    return (f"chose an image for {chosen} of the {items} items: the items imported after "
            "it are missing (`thumb bison evaluate` again scores them; a baseline whose "
            "corpus they change gets a new signature instead)")


def bison_tables(items: pd.DataFrame, answers: pd.DataFrame, predictions: pd.DataFrame, *,
                 bootstrap: int = 1000, ci: float = 0.90, seed: int = 0
                 ) -> dict[str, pd.DataFrame]:
    """Tidy tables: human accuracy per annotator, accuracy of each model/baseline
    signature, and human-model agreement, with BCa bootstrap CIs over items (and
    `ci_warning` where one deserves less trust).

    `items`: item_id, image_a_id, image_b_id, true_image_id; `answers`: item_id, answer
    (left/right/both/neither), left_image_id, seconds, annotator; `predictions`: item_id,
    scorer, signature, chosen_image_id."""
    check_ci(ci)
    answers = answers.merge(items, on="item_id")
    right_image = np.where(answers["left_image_id"] == answers["image_a_id"],
                           answers["image_b_id"], answers["image_a_id"])
    answers["chosen"] = np.select(
        [answers["answer"] == "left", answers["answer"] == "right"],
        [answers["left_image_id"], right_image], default=-1)
    answers["correct"] = (answers["chosen"] == answers["true_image_id"]).astype(float)
    predictions = predictions.merge(items, on="item_id")
    predictions["correct"] = (predictions["chosen_image_id"] == predictions["true_image_id"]
                              ).astype(float)

    def accuracy(frame: pd.DataFrame, value: str = "correct") -> dict[str, object]:
        values = frame[value].to_numpy()
        estimate = float(values.mean()) if len(values) else float("nan")
        interval = Interval(float("nan"), float("nan"))
        if bootstrap and len(values):
            weights = image_weights(frame["item_id"].to_numpy(), bootstrap, seed,
                                    jackknife=True)
            interval = bca(weights @ values / weights.sum(axis=1), estimate, bootstrap, ci,
                           unit="items")
        return {"accuracy": estimate, "ci_low": interval.low, "ci_high": interval.high,
                "n": len(values), "ci_warning": interval.warning}

    human = [{"annotator": name, **accuracy(part),
              "both": int((part["answer"] == "both").sum()),
              "neither": int((part["answer"] == "neither").sum()),
              "mean_seconds": float(part["seconds"].mean())}
             for name, part in [("all", answers), *answers.groupby("annotator")]
             if len(part)]
    models = []
    for signature, part in predictions.groupby("signature"):
        row = {"scorer": part["scorer"].iloc[0], "signature": signature, **accuracy(part),
               "ties": int(part["chosen_image_id"].isna().sum())}
        row["ci_warning"] = "; ".join(filter(None, [_coverage_warning(len(part), len(items)),
                                                    row["ci_warning"]])) or None
        models.append(row)
    agreement = []
    decided = answers[answers["answer"].isin(["left", "right"])]
    for signature, part in predictions.groupby("signature"):
        joined = decided.merge(part[["item_id", "chosen_image_id"]], on="item_id")
        joined["same"] = (joined["chosen"] == joined["chosen_image_id"]).astype(float)
        for name, group in [("all", joined), *joined.groupby("annotator")]:
            if len(group):
                agreement.append({"annotator": name, "signature": signature,
                                  **accuracy(group, "same")})
    return {"human": pd.DataFrame(human), "models": pd.DataFrame(models),
            "agreement": pd.DataFrame(agreement)}
