"""Exports with metric scores: the project's captions and a judgment set's judgments as
tidy tables, with one column per stored metric (`metric:` + the label reports use) and the
signatures behind those columns in a side file `<out>.signatures.json`."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from sqlalchemy import Engine

from reports.judgments import judgment_metric_values
from reports.scoring import metric_columns
from storage.exporter import export_ratings, write_frame
from storage.imports.import_rows import METRIC_COLUMN_PREFIX
from storage.judgments import (
    judgment_image_paths,
    judgment_pairs,
    judgment_scores,
    judgment_set,
)
from storage.metric_scores import metric_scores


def signatures_path(out: Path) -> Path:
    return out.with_name(out.name + ".signatures.json")


def _prefixed(values: pd.DataFrame, signatures: dict[str, str]
              ) -> tuple[pd.DataFrame, dict[str, str]]:
    columns = {label: METRIC_COLUMN_PREFIX + label for label in values.columns}
    return values.rename(columns=columns), {columns[label]: signatures[label]
                                            for label in values.columns}


def _write_signatures(path: Path, signatures: dict[str, str]) -> Path | None:
    if not signatures:
        return None
    path.write_text(json.dumps(signatures, indent=1, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    return path


def export_project(engine: Engine, out: Path, fmt: str, *, raw: bool = False,
                   signatures_out: Path | None = None) -> tuple[int, Path | None]:
    """`thumb export` (csv, jsonl, parquet) with each caption's stored metric scores.
    Returns the rows written and the signatures file (None without metric scores), which
    is `signatures_out` (default: `signatures_path(out)`). `raw`: CSV text cells are not
    escaped for spreadsheets."""
    scores = metric_scores(engine)
    if scores.empty:
        return export_ratings(engine, out, fmt, raw=raw), None
    values, signatures = _prefixed(*metric_columns(scores))
    rows = export_ratings(engine, out, fmt, extra=values, raw=raw)
    return rows, _write_signatures(signatures_out or signatures_path(out), signatures)


def export_judgment_set(engine: Engine, name: str, out: Path, fmt: str, *, raw: bool = False,
                        signatures_out: Path | None = None) -> tuple[int, Path | None]:
    """A judgment set as the tidy table it was imported from (so it imports again), with
    each caption's metric scores: one column per metric for a score set, `…:a` and `…:b`
    for the two captions of a pairwise set. The signatures go to `signatures_out`
    (default: `signatures_path(out)`)."""
    info = judgment_set(engine, name)
    values, signatures = judgment_metric_values(engine, info)
    values, signatures = _prefixed(values, signatures) if len(values) else (values, {})
    if info.kind == "score":
        merged = judgment_scores(engine, info.id).merge(values, left_on="caption_id",
                                                       right_index=True, how="left")
        frame = merged.drop(columns="caption_id").rename(
            columns={"image": "image_id", "caption_key": "caption_id"})
        frame = frame[["image_id", "caption_id", "caption", "system", "judge", "score",
                       "note", *values.columns]]
    else:
        pairs = judgment_pairs(engine, info.id)
        for side in ("a", "b") if len(values.columns) else ():
            pairs = pairs.merge(values.add_suffix(f":{side}"), left_on=f"caption_{side}_id",
                                right_index=True, how="left")
        frame = pairs.drop(columns=["caption_a_id", "caption_b_id"]).rename(
            columns={"image": "image_id"})
        signatures = {f"{column}:{side}": signature
                      for column, signature in signatures.items() for side in ("a", "b")}
    if paths := judgment_image_paths(engine, info.id, out.resolve().parent):
        frame.insert(1, "image", frame["image_id"].map(paths))  # their files import again
    write_frame(frame, out, fmt, raw=raw)
    return len(frame), _write_signatures(signatures_out or signatures_path(out), signatures)
