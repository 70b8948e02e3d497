"""Run metrics over captions: which captions need scoring under a signature, scoring them
chunk by chunk, and handing each chunk to a sink that stores it. No database here: the
caller says what is stored already and where scores go."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from metrics.base import CaptionItem, Metric
from rubrics import clean_caption

Progress = Callable[[str, int, int], None]  # (metric, done, total)
# (metric, signature, items, values, reasons): a value is NaN where its reason says why
ScoreSink = Callable[[str, str, Sequence[CaptionItem], np.ndarray, list[str | None]], None]
STORE_CHUNK = 512


@dataclass(frozen=True)
class MetricRun:
    metric: str
    signature: str
    computed: int
    reused: int
    seconds: float


def caption_items(captions: Iterable[Any], references: dict[int, list[str]],
                  keep_self_references: bool = False) -> tuple[list[CaptionItem], str]:
    """Every caption (rows with attributes caption_id, image_id, image_key, path, system,
    text), cleaned,
    with its image's cleaned references minus the caption itself (unless
    `keep_self_references`, which reproduces scores computed on data where a caption is also
    one of its own references, as THUMB 1.0's were). Also returns the reference description
    that goes into each signature."""
    cleaned = {image: [clean_caption(text) for text in texts]
               for image, texts in references.items()}
    items, excluded, counts = [], 0, set()
    for row in captions:
        text = clean_caption(row.text)
        refs = cleaned.get(row.image_id, [])
        kept = tuple(r for r in refs if r.casefold() != text.casefold())
        excluded += len(refs) - len(kept)
        if keep_self_references:
            kept = tuple(refs)
        counts.add(len(refs))
        items.append(CaptionItem(int(row.caption_id), row.image_key, row.path, row.system,
                                 text, kept))
    nrefs = "-".join(str(c) for c in sorted({min(counts), max(counts)})) if counts else "0"
    self_refs = f"{'kept' if keep_self_references else 'excluded'}({excluded})"
    return items, f"image|nrefs:{nrefs}|self:{self_refs}|clean:thumb"


def run_metric(
    metric: Metric, items: Sequence[CaptionItem], references: str,
    stored: Callable[[str], set[int]], sink: ScoreSink, progress: Progress | None = None,
) -> MetricRun:
    """Score the captions that `stored(signature)` does not list and pass each chunk to
    `sink(metric, signature, items, values, reasons)` as soon as it is scored; `reasons`
    says why a value is undefined (NaN), None where it is defined."""
    start = time.perf_counter()
    signature = metric.signature(items, references)
    done = stored(signature)
    todo = [item for item in items if item.caption_id not in done]
    if todo and metric.corpus_level:
        # statistics come from the whole corpus: score it all, store what is missing
        values = metric.score(items)
        wanted = {item.caption_id for item in todo}
        keep = [i for i, item in enumerate(items) if item.caption_id in wanted]
        chunk = [items[i] for i in keep]
        sink(metric.name, signature, chunk, values[keep], _reasons(metric, chunk))
        if progress:
            progress(metric.name, len(todo), len(todo))
    else:
        for start_at in range(0, len(todo), STORE_CHUNK):
            chunk = todo[start_at:start_at + STORE_CHUNK]
            sink(metric.name, signature, chunk, metric.score(chunk), _reasons(metric, chunk))
            if progress:
                progress(metric.name, start_at + len(chunk), len(todo))
    return MetricRun(metric.name, signature, len(todo), len(items) - len(todo),
                     time.perf_counter() - start)


def _reasons(metric: Metric, items: Sequence[CaptionItem]) -> list[str | None]:
    return [metric.undefined_reason(item) for item in items]
