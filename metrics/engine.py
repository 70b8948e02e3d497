"""Score every caption with the chosen metrics and store the scores with their signatures.
A (caption, signature) pair already stored is never computed again."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Engine, select

from metrics.base import CaptionItem, Metric
from metrics.registry import MetricOptions, build_metric
from rubrics import clean_caption
from storage.models import Caption, Image, ImageReference, MetricScore, utcnow

Progress = Callable[[str, int, int], None]  # (metric, done, total)
STORE_CHUNK = 512


@dataclass(frozen=True)
class MetricRun:
    metric: str
    signature: str
    computed: int
    reused: int
    seconds: float


def load_items(
    engine: Engine, keep_self_references: bool = False
) -> tuple[list[CaptionItem], str]:
    """Every caption, cleaned, with its image's cleaned references minus the caption itself
    (unless `keep_self_references`, which reproduces scores computed on data where a
    caption is also one of its own references, as THUMB 1.0's were). Also returns the
    reference description that goes into each signature."""
    caption, image, ref = Caption.__table__, Image.__table__, ImageReference.__table__
    with engine.connect() as connection:
        references: dict[int, list[str]] = {}
        for row in connection.execute(
            select(ref.c.image_id, ref.c.text).order_by(ref.c.image_id, ref.c.position)
        ):
            references.setdefault(row.image_id, []).append(clean_caption(row.text))
        rows = connection.execute(
            select(caption.c.id, caption.c.image_id, caption.c.system, caption.c.text,
                   image.c.key, image.c.path)
            .join(image, caption.c.image_id == image.c.id)
            .order_by(caption.c.id)
        ).all()
    items, excluded, counts = [], 0, set()
    for row in rows:
        text = clean_caption(row.text)
        refs = references.get(row.image_id, [])
        kept = tuple(r for r in refs if r.casefold() != text.casefold())
        excluded += len(refs) - len(kept)
        if keep_self_references:
            kept = tuple(refs)
        counts.add(len(refs))
        items.append(CaptionItem(row.id, row.key, row.path, row.system, text, kept))
    nrefs = "-".join(str(c) for c in sorted({min(counts), max(counts)})) if counts else "0"
    self_refs = f"{'kept' if keep_self_references else 'excluded'}({excluded})"
    return items, f"image|nrefs:{nrefs}|self:{self_refs}|clean:thumb"


def _stored_ids(engine: Engine, signature: str) -> set[int]:
    score = MetricScore.__table__
    with engine.connect() as connection:
        return set(connection.execute(
            select(score.c.caption_id).where(score.c.signature == signature)
        ).scalars())


def _store(engine: Engine, metric: str, signature: str, items: Sequence[CaptionItem],
           values: np.ndarray) -> None:
    now = utcnow()
    with engine.begin() as connection:
        connection.execute(
            MetricScore.__table__.insert(),
            [{"caption_id": item.caption_id, "metric": metric, "signature": signature,
              "value": float(value), "computed_at": now}
             for item, value in zip(items, values, strict=True)],
        )


def run_metric(
    engine: Engine, metric: Metric, items: Sequence[CaptionItem], references: str,
    progress: Progress | None = None,
) -> MetricRun:
    start = time.perf_counter()
    signature = metric.signature(items, references)
    done = _stored_ids(engine, signature)
    todo = [item for item in items if item.caption_id not in done]
    if todo and metric.corpus_level:
        # statistics come from the whole corpus: score it all, store what is missing
        values = metric.score(items)
        wanted = {item.caption_id for item in todo}
        keep = [i for i, item in enumerate(items) if item.caption_id in wanted]
        _store(engine, metric.name, signature, [items[i] for i in keep], values[keep])
        if progress:
            progress(metric.name, len(todo), len(todo))
    else:
        for start_at in range(0, len(todo), STORE_CHUNK):
            chunk = todo[start_at:start_at + STORE_CHUNK]
            _store(engine, metric.name, signature, chunk, metric.score(chunk))
            if progress:
                progress(metric.name, start_at + len(chunk), len(todo))
    return MetricRun(metric.name, signature, len(todo), len(items) - len(todo),
                     time.perf_counter() - start)


def compute_metrics(
    engine: Engine, names: Sequence[str], options: MetricOptions | None = None,
    progress: Progress | None = None,
) -> list[MetricRun]:
    """Compute (or reuse) each named metric for every caption; commits chunk by chunk."""
    options = options or MetricOptions()
    metrics = [build_metric(name, options) for name in names]
    items, references = load_items(engine, options.keep_self_references)
    return [run_metric(engine, metric, items, references, progress) for metric in metrics]
