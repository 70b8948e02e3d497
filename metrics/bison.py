"""BISON (Hu et al. 2019): models and caption-metric baselines choose which of two images a
caption describes; accuracy with bootstrap CIs, and agreement with human answers."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd
from sqlalchemy import Engine, select

from metrics.base import CaptionItem
from metrics.correlation import check_ci, image_weights, percentile_ci
from metrics.signature import format_signature
from rubrics import clean_caption
from storage.models import (
    Annotator,
    BisonAnswer,
    BisonItem,
    BisonPrediction,
    Image,
    ImageReference,
    utcnow,
)


class ImageTextScorer(Protocol):
    """Anything that scores how well a text describes an image (higher = better)."""

    name: str

    def signature(self) -> str: ...

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray: ...


class ClipScorer:
    """Cosine similarity of CLIP image and text embeddings (each distinct image and text
    embedded once, shared with the CLIP metrics)."""

    name = "clip"

    def __init__(self, model: str, device: str = "auto", batch_size: int = 64) -> None:
        from metrics.clip import embedder
        from metrics.torch_device import model_label, resolve_device

        self.clip = embedder(model, resolve_device(device), batch_size)
        self._model = model_label(model)

    def signature(self) -> str:
        return format_signature("bison-clip", {"model": self._model, "sim": "cosine",
                                               "prefix": "none"})

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        images = self.clip.images([image for image, _ in pairs])
        texts = self.clip.texts([text for _, text in pairs])
        return np.einsum("ij,ij->i", images, texts)


@dataclass(frozen=True)
class Item:
    id: int
    query: str
    image_a: int
    image_b: int
    true_image: int


def load_items(engine: Engine) -> tuple[list[Item], dict[int, tuple[str | None, list[str]]]]:
    """All items, and image id -> (path, references)."""
    item, image, ref = BisonItem.__table__, Image.__table__, ImageReference.__table__
    with engine.connect() as connection:
        items = [Item(r.id, r.query, r.image_a_id, r.image_b_id, r.true_image_id)
                 for r in connection.execute(select(item).order_by(item.c.id))]
        images = {r.id: (r.path, []) for r in connection.execute(select(image.c.id,
                                                                        image.c.path))}
        for r in connection.execute(select(ref.c.image_id, ref.c.text)
                                    .order_by(ref.c.image_id, ref.c.position)):
            images[r.image_id][1].append(r.text)
    return items, images


def _store(engine: Engine, scorer: str, signature: str, items: Sequence[Item],
           scores_a: np.ndarray, scores_b: np.ndarray) -> int:
    table = BisonPrediction.__table__
    with engine.begin() as connection:
        done = set(connection.execute(select(table.c.item_id).where(
            table.c.signature == signature)).scalars())
        rows = [
            {"item_id": item.id, "scorer": scorer, "signature": signature,
             "score_a": float(a), "score_b": float(b), "computed_at": utcnow(),
             "chosen_image_id": None if a == b else (item.image_a if a > b else item.image_b)}
            for item, a, b in zip(items, scores_a, scores_b, strict=True) if item.id not in done
        ]
        if rows:
            connection.execute(table.insert(), rows)
    return len(rows)


def evaluate(engine: Engine, scorer: ImageTextScorer) -> tuple[str, int]:
    """Score both candidates of every item not yet predicted under this signature; store
    the choices. Returns (signature, items scored)."""
    items, images = load_items(engine)
    signature = scorer.signature()
    table = BisonPrediction.__table__
    with engine.connect() as connection:
        done = set(connection.execute(select(table.c.item_id).where(
            table.c.signature == signature)).scalars())
    todo = [item for item in items if item.id not in done]
    if not todo:
        return signature, 0
    missing = [images[i][0] for item in todo for i in (item.image_a, item.image_b)
               if not images[i][0] or not Path(images[i][0]).is_file()]
    if missing:
        raise RuntimeError(f"{len(missing)} candidate image files not found, e.g. {missing[0]}")
    pairs = [(images[image][0], item.query) for item in todo
             for image in (item.image_a, item.image_b)]
    scores = scorer.score(pairs)  # type: ignore[arg-type]
    return signature, _store(engine, scorer.name, signature, todo, scores[0::2], scores[1::2])


def baseline(engine: Engine, metric_name: str, *, seed: int = 0, sampled: int = 4,
             options: object | None = None) -> tuple[str, int]:
    """BISON section 6: pick the image whose reference captions give the query the higher
    metric score. The query is removed from its own image's references; `sampled`
    references are drawn (seeded) for the other image."""
    from metrics.registry import MetricOptions, build_metric

    metric = build_metric(metric_name, options or MetricOptions())  # type: ignore[arg-type]
    items, images = load_items(engine)
    rng = random.Random(seed)
    candidates = []
    for item in items:
        query = clean_caption(item.query)
        for image in (item.image_a, item.image_b):
            refs = [clean_caption(r) for r in images[image][1]]
            if image == item.true_image:
                refs = [r for r in refs if r.casefold() != query.casefold()]
            else:
                refs = rng.sample(refs, min(sampled, len(refs)))
            if not refs:
                raise RuntimeError(f"image {image} of BISON item {item.id} has no references")
            # one "system" for all candidates: CIDEr-D's corpus is the whole item set
            candidates.append(CaptionItem(len(candidates), str(image), images[image][0],
                                          "bison", query, tuple(refs)))
    scores = metric.score(candidates)
    signature = format_signature(f"bison-baseline-{metric.name}", {
        "metric": metric.signature(candidates, "candidate-image").replace("|", ";"),
        "sampled": str(sampled), "seed": str(seed)})
    return signature, _store(engine, f"baseline-{metric.name}", signature, items,
                             scores[0::2], scores[1::2])


def bison_report(engine: Engine, *, bootstrap: int = 1000, ci: float = 0.90,
                 seed: int = 0) -> dict[str, pd.DataFrame]:
    """Tidy tables: human accuracy per annotator, accuracy of each model/baseline
    signature, and human-model agreement, with bootstrap CIs over items."""
    check_ci(ci)
    item, answer, prediction, annotator = (BisonItem.__table__, BisonAnswer.__table__,
                                           BisonPrediction.__table__, Annotator.__table__)
    with engine.connect() as connection:
        items = pd.read_sql(select(item.c.id.label("item_id"), item.c.image_a_id,
                                   item.c.image_b_id, item.c.true_image_id), connection)
        answers = pd.read_sql(
            select(answer.c.item_id, answer.c.answer, answer.c.left_image_id,
                   answer.c.seconds, annotator.c.name.label("annotator"))
            .join(annotator, answer.c.annotator_id == annotator.c.id)
            .where(answer.c.answer.is_not(None)), connection)
        predictions = pd.read_sql(select(prediction.c.item_id, prediction.c.scorer,
                                         prediction.c.signature,
                                         prediction.c.chosen_image_id), connection)
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
        low = high = float("nan")
        if bootstrap and len(values):
            weights = image_weights(frame["item_id"].to_numpy(), bootstrap, seed)
            low, high = percentile_ci(weights @ values / weights.sum(axis=1), ci)
        return {"accuracy": float(values.mean()) if len(values) else float("nan"),
                "ci_low": low, "ci_high": high, "n": len(values)}

    human = [{"annotator": name, **accuracy(part),
              "both": int((part["answer"] == "both").sum()),
              "neither": int((part["answer"] == "neither").sum()),
              "mean_seconds": float(part["seconds"].mean())}
             for name, part in [("all", answers), *answers.groupby("annotator")]
             if len(part)]
    models = [{"scorer": part["scorer"].iloc[0], "signature": signature, **accuracy(part),
               "ties": int(part["chosen_image_id"].isna().sum())}
              for signature, part in predictions.groupby("signature")]
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
