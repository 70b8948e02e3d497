"""Scoring a project or a judgment set: captions and stored scores come from storage, the
metrics run in `metrics`, and every chunk of scores is stored as soon as it is computed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from sqlalchemy import Engine, Row
from sqlmodel import SQLModel

from metrics.base import CaptionItem, ReferenceRule, self_reference_note
from metrics.registry import MetricOptions, build_metric
from metrics.runner import CLEAN_UPS, MetricRun, Progress, caption_items, run_metric
from metrics.signature import parse_signature, signature_labels, superseded_signatures
from storage.judgments import judgment_caption_rows, judgment_reference_ids, judgment_set
from storage.metric_scores import caption_rows, store_metric_scores, stored_scores
from storage.models import JudgmentMetricScore, MetricScore

if TYPE_CHECKING:
    import pandas as pd


def load_items(engine: Engine, keep_self_references: bool = False
               ) -> tuple[list[CaptionItem], ReferenceRule]:
    """Every caption of the project as the metrics take it, and the reference rule of the
    signatures (see `metrics.runner.caption_items`)."""
    return caption_items(*caption_rows(engine), keep_self_references)


def self_reference_notes(engine: Engine, signatures: Mapping[str, str],
                         judgment_set_id: int | None = None) -> dict[str, str]:
    """label -> `48 self-references excluded` (or `kept`) for each signature with a `self:`
    rule: the count a report shows beside the signature, never in it (a signature names
    rules, not counts of the data: `metrics.base.ReferenceRule`). Counted as `thumb metrics
    compute` counts it, on the captions as they are now under the signature's clean-up:
    the project's, or those of the judgment set with its reference ids. An old-form
    signature carries its own count (`self:excluded(3)`) and gets no note."""
    rules: dict[str, tuple[str, str]] = {}  # label -> (self rule, clean-up)
    for label, signature in signatures.items():
        fields = parse_signature(signature)
        rule, clean = fields.get("self"), fields.get("clean")
        if rule is not None and "(" not in rule and clean in CLEAN_UPS:
            rules[label] = (rule, clean)
    if not rules:
        return {}
    if judgment_set_id is None:
        rows, reference_ids = caption_rows(engine), None
    else:
        rows = judgment_caption_rows(engine, judgment_set_id)
        reference_ids = judgment_reference_ids(engine, judgment_set_id)
    counts = {clean: caption_items(*rows, clean=clean, reference_ids=reference_ids)[1]
              .self_reference_count for clean in {clean for _, clean in rules.values()}}
    return {label: self_reference_note(counts[clean], rule)
            for label, (rule, clean) in rules.items()}


def _compute(engine: Engine, rows: tuple[list[Row], dict[int, list[str]]],
             scores: type[SQLModel], names: Sequence[str], options: MetricOptions | None,
             progress: Progress | None, *, clean: str,
             reference_ids: dict[int, list[str | None]] | None = None
             ) -> list[ScoringRun]:
    options = options or MetricOptions()
    metrics = [build_metric(name, options) for name in names]
    items, references = caption_items(*rows, options.keep_self_references,
                                      clean=options.clean or clean,
                                      reference_ids=reference_ids)

    undefined: dict[str, Counter[str]] = {}

    def sink(metric: str, signature: str, chunk: Sequence[CaptionItem],
             values: np.ndarray, reasons: list[str | None], replacing: set[int]) -> None:
        store_metric_scores(engine, metric, signature, [item.caption_id for item in chunk],
                            values, scores, reasons, replacing)
        undefined.setdefault(signature, Counter()).update(r for r in reasons if r)

    runs = [run_metric(metric, items, references,
                       lambda s: stored_scores(engine, s, scores), sink, progress)
            for metric in metrics]
    return [ScoringRun(**vars(run), undefined=dict(undefined.get(run.signature, {})))
            for run in runs]


@dataclass(frozen=True)
class ScoringRun(MetricRun):
    """A metric's run, with how many of the captions it computed are undefined, by
    reason (`no references`)."""

    undefined: dict[str, int] = field(default_factory=dict)

    @property
    def summary(self) -> str:
        """`bleu: computed 6, reused 0 (0.1 s)`, with the undefined among the computed; `bleu:
        6 captions, all undefined (no references)` when none has a score."""
        reasons = "; ".join(sorted(self.undefined))
        count = sum(self.undefined.values())
        if self.computed and count == self.computed:
            return (f"{self.metric}: {self.computed} caption{'' if count == 1 else 's'}, all "
                    f"undefined ({reasons})")
        undefined = f" ({count} undefined: {reasons})" if count else ""
        return (f"{self.metric}: computed {self.computed}{undefined}, reused {self.reused} "
                f"({self.seconds:.1f} s)")


def compute_metrics(
    engine: Engine, names: Sequence[str], options: MetricOptions | None = None,
    progress: Progress | None = None,
) -> list[ScoringRun]:
    """Compute (or reuse) each named metric for every caption; commits chunk by chunk.
    The texts get THUMB's clean-up unless `options.clean` says `none`."""
    return _compute(engine, caption_rows(engine), MetricScore, names, options, progress,
                    clean="thumb")


def compute_judgment_metrics(
    engine: Engine, name: str, names: Sequence[str], options: MetricOptions | None = None,
    progress: Progress | None = None,
) -> list[ScoringRun]:
    """The same for the captions of the judgment set `name`, against its own references
    (a corpus-level metric's corpus is the set). The texts are scored as released unless
    `options.clean` asks for THUMB's clean-up; a reference with the caption's own id (when
    the files give ids) is the caption itself."""
    set_id = judgment_set(engine, name).id
    return _compute(engine, judgment_caption_rows(engine, set_id), JudgmentMetricScore,
                    names, options, progress, clean="none",
                    reference_ids=judgment_reference_ids(engine, set_id))


def metric_columns(scores: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """caption_id x metric label table of stored scores (NaN where a score is undefined),
    and label -> signature. A metric stored under several signatures gets one column per
    signature, labelled by what distinguishes them (`cider-d (pooled)`, `cider-d
    (per-system)`). Scores under an old-form signature that a current one supersedes
    (`metrics.signature.superseded_signatures`) are left out: their `label` is NaN."""
    stored = set(scores["signature"].unique())  # a few, not one per score
    labels = signature_labels(stored - superseded_signatures(stored))
    signatures = {label: signature for signature, label in labels.items()}
    scores["label"] = scores["signature"].map(labels)
    wide = scores[scores["label"].notna()].pivot(index="caption_id", columns="label",
                                                 values="value")
    return wide, signatures
