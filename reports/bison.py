"""BISON over a project: items and answers from storage, choices and statistics from
`metrics.retrieval.bison`, choices stored under their signatures."""

from __future__ import annotations

import pandas as pd
from sqlalchemy import Engine

from metrics.registry import MetricOptions, build_metric
from metrics.retrieval.bison import ImageTextScorer, baseline_choices, bison_tables, model_choices
from metrics.signature import signature_labels
from metrics.stats.confidence import CI_METHOD
from storage.bison import (
    bison_frames,
    bison_items,
    predicted_item_ids,
    store_bison_predictions,
)


def evaluate(engine: Engine, scorer: ImageTextScorer) -> tuple[str, int]:
    """Score both candidates of every item not yet predicted under this signature; store
    the choices. Returns (signature, items scored)."""
    items, images = bison_items(engine)
    signature = scorer.signature()
    todo = items[~items["item_id"].isin(predicted_item_ids(engine, signature))]
    if todo.empty:
        return signature, 0
    chosen = model_choices(todo, {image: path for image, (path, _) in images.items()}, scorer)
    return signature, store_bison_predictions(engine, scorer.name, signature, chosen)


def baseline(engine: Engine, metric_name: str, *, seed: int = 0, sampled: int = 4,
             options: MetricOptions | None = None) -> tuple[str, int]:
    """A caption metric's choices (BISON section 6), stored under their signature."""
    metric = build_metric(metric_name, options or MetricOptions())
    items, images = bison_items(engine)
    signature, chosen = baseline_choices(items, images, metric, seed=seed, sampled=sampled)
    return signature, store_bison_predictions(engine, f"baseline-{metric.name}", signature,
                                              chosen)


def bison_report(engine: Engine, *, bootstrap: int = 1000, ci: float = 0.90,
                 seed: int = 0) -> dict[str, pd.DataFrame]:
    """Human, model and baseline accuracy and human-model agreement (metrics.retrieval.bison)."""
    return bison_tables(*bison_frames(engine), bootstrap=bootstrap, ci=ci, seed=seed)


def bison_header(*, bootstrap: int, ci: float, seed: int) -> dict[str, object]:
    """The CI settings a BISON report states, named as the other reports' headers name
    them."""
    return {"bootstrap": bootstrap, "ci": ci, "ci_method": CI_METHOD, "seed": seed}


def bison_json(tables: dict[str, pd.DataFrame], header: dict[str, object]
               ) -> dict[str, object]:
    """The report as JSON: its header, then each table's records, every model also named
    (`model`) by the label the table output gives it."""
    from reports.numbers import json_records

    _, labels = labelled_bison_tables(tables)
    named = {name: table if "signature" not in table
             else table.assign(model=table["signature"].map(labels))
             for name, table in tables.items()}
    return {"header": header, **{name: json_records(table) for name, table in named.items()}}


def labelled_bison_tables(bison: dict[str, pd.DataFrame]
                          ) -> tuple[dict[str, pd.DataFrame], dict[str, str]]:
    """The BISON tables with each model named by a short label instead of its long
    signature (and without the scorer the label repeats), and signature -> label, so a
    report lists each signature once."""
    labels = signature_labels([s for table in bison.values() if "signature" in table
                               for s in table["signature"]])
    shown = {}
    for name, table in bison.items():
        table = table.copy()
        if "signature" in table:
            table.insert(0, "model", table.pop("signature").map(labels))
            table = table.drop(columns=["scorer"], errors="ignore")
        shown[name] = table
    return shown, labels
