"""Scoring a project: captions and stored scores come from storage, the metrics run in
`metrics`, and every chunk of scores is stored as soon as it is computed."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sqlalchemy import Engine

from metrics.base import CaptionItem
from metrics.registry import MetricOptions, build_metric
from metrics.runner import MetricRun, Progress, caption_items, run_metric
from storage.readers import caption_rows, store_metric_scores, stored_caption_ids


def load_items(engine: Engine, keep_self_references: bool = False
               ) -> tuple[list[CaptionItem], str]:
    """Every caption of the project as the metrics take it, and the reference description
    of the signatures (see `metrics.runner.caption_items`)."""
    return caption_items(*caption_rows(engine), keep_self_references)


def compute_metrics(
    engine: Engine, names: Sequence[str], options: MetricOptions | None = None,
    progress: Progress | None = None,
) -> list[MetricRun]:
    """Compute (or reuse) each named metric for every caption; commits chunk by chunk."""
    options = options or MetricOptions()
    metrics = [build_metric(name, options) for name in names]
    items, references = load_items(engine, options.keep_self_references)

    def sink(metric: str, signature: str, chunk: Sequence[CaptionItem],
             values: np.ndarray) -> None:
        store_metric_scores(engine, metric, signature, [item.caption_id for item in chunk],
                            values)

    return [run_metric(metric, items, references, lambda s: stored_caption_ids(engine, s),
                       sink, progress) for metric in metrics]
