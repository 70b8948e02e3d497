"""A judgment set's report: its judgments and stored metric scores (storage) turned into the
correlation tables of the caption-metric literature, pairwise accuracy and the agreement
among its judges (metrics). Records carry the signature of every metric."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pandas as pd
from sqlalchemy import Engine

from metrics.signature import tool_version
from metrics.stats.agreement import alpha_table
from metrics.stats.confidence import CI_METHOD, check_ci
from metrics.stats.judgments import (
    AGGREGATES,
    TIE_RULE,
    human_scores,
    oriented_votes,
    pairwise_accuracy,
    score_correlations,
)
from reports.scoring import metric_columns, self_reference_notes
from storage.judgments import (
    JudgmentSetInfo,
    judgment_metric_scores,
    judgment_pairs,
    judgment_scores,
    judgment_set,
    judgment_sets,
)

RECORD_COLUMNS = ["judgments", "metric", "signature", "statistic", "aggregate", "category",
                  "value", "ci_low", "ci_high", "n"]


@dataclass
class JudgmentReport:
    info: JudgmentSetInfo
    header: dict[str, object]
    signatures: dict[str, str]  # metric label -> signature
    records: pd.DataFrame  # RECORD_COLUMNS
    differences: pd.DataFrame = field(default_factory=pd.DataFrame)
    agreement: pd.DataFrame = field(default_factory=pd.DataFrame)
    # label -> how many references were their caption itself, beside its signature
    self_references: dict[str, str] = field(default_factory=dict)


def ci_words(report: JudgmentReport, *, paired: bool = False) -> str:
    """How a table's heading names its CIs: `90% BCa CIs over images` (`paired`: `paired
    bootstrap 90% BCa CIs`), or, where --bootstrap 0 computed none, that it has none."""
    if not report.header["bootstrap"]:
        return "no CIs: --bootstrap 0"
    ci = f"{report.header['ci']:.0%} BCa"
    return f"paired bootstrap {ci} CIs" if paired else f"{ci} CIs over images"


def judgment_metric_values(engine: Engine, info: JudgmentSetInfo
                           ) -> tuple[pd.DataFrame, dict[str, str]]:
    """caption_id x metric label table of the set's stored scores, and label -> signature."""
    scores = judgment_metric_scores(engine, info.id)
    if scores.empty:
        return pd.DataFrame(), {}
    return metric_columns(scores)


def _skipped(scores: pd.DataFrame, skipped: list[str], caption_ids: list[int],
             info: JudgmentSetInfo) -> dict[str, str]:
    """label -> why the metric is left out of the tables: not stored for every caption, or
    stored and undefined (for every caption: said why when the set has no references)."""
    if not skipped:
        return {}
    stored = scores.pivot(index="caption_id", columns="label", values="metric").reindex(
        index=caption_ids).notna()
    defined = scores.pivot(index="caption_id", columns="label", values="value").reindex(
        index=caption_ids).notna()
    reasons = {}
    for label in skipped:
        if not stored[label].all():
            reasons[label] = "not computed for every caption"
        elif defined[label].any():
            reasons[label] = (f"undefined for {int((~defined[label]).sum())} of "
                              f"{len(caption_ids)} captions")
        else:
            reasons[label] = "undefined for every caption" + (
                " (no references: import the set again with --references FILE)"
                if info.references_source is None else "")
    return reasons


def metrics_hint(report: JudgmentReport, escape: Callable[[str], str]) -> str | None:
    """Why a judgment set's report has no metric table, and what to run; None when it has
    one. The set's name goes through `escape` for the medium it is shown in."""
    if len(report.records):
        return None
    skipped = report.header.get("metrics_skipped") or {}
    if skipped and all(str(r).startswith("undefined for every caption") for r in
                       skipped.values()):
        return ("no metric has a defined score for this set's captions (see metrics "
                "skipped)" + ("; it has no references: import it again with --references "
                              "FILE under another --name"
                              if report.info.references_source is None else ""))
    return ("no metric scores of this set yet: run thumb metrics compute --judgments "
            + escape(shlex.quote(report.info.name)))


def _chosen(signatures: dict[str, str], wanted: Sequence[str] | None, name: str = "NAME"
            ) -> list[str]:
    """The labels asked for by `--metric` (a label, or a metric name for all its
    signatures); every stored one by default."""
    if not wanted:
        return list(signatures)
    chosen = []
    for name in wanted:
        matches = [label for label, signature in signatures.items()
                   if name in (label, signature.split("|", 1)[0])]
        if not matches:
            known = ", ".join(signatures) or (
                f"none (thumb metrics compute --judgments {shlex.quote(name)})")
            raise ValueError(f"no stored scores of {name!r} for this judgment set; stored: "
                             f"{known}")
        chosen += [label for label in matches if label not in chosen]
    return chosen


def build_judgment_report(engine: Engine, name: str, *, aggregate: str = "flat",
                          metrics: Sequence[str] | None = None, bootstrap: int = 1000,
                          ci: float = 0.90, seed: int = 0) -> JudgmentReport:
    check_ci(ci)
    if aggregate not in AGGREGATES:
        raise ValueError(f"--aggregate must be flat or mean, not {aggregate!r}")
    info = judgment_set(engine, name)
    scores = judgment_metric_scores(engine, info.id)
    values, signatures = metric_columns(scores) if len(scores) else (pd.DataFrame(), {})
    chosen = _chosen(signatures, metrics, info.name)
    judged = judgment_scores(engine, info.id) if info.kind == "score" else judgment_pairs(
        engine, info.id)
    caption_ids = (set(judged["caption_id"]) if info.kind == "score"
                   else set(judged["caption_a_id"]) | set(judged["caption_b_id"]))
    complete = [m for m in chosen
                if values[m].reindex(sorted(caption_ids)).notna().all()]
    header: dict[str, object] = {
        "tool": f"thumb-tui {tool_version()}", "judgments": info.name, "kind": info.kind,
        "scale": info.scale, "source": info.source,
        "references": info.references_source or "none",
        "captions": len(caption_ids), "images": int(judged["image"].nunique()),
        "judges": int(judged["judge"].nunique()), "judgments_count": len(judged),
        "bootstrap": bootstrap, "ci": ci, "ci_method": CI_METHOD, "seed": seed,
        "metrics_skipped": _skipped(scores, [m for m in chosen if m not in complete],
                                    sorted(caption_ids), info),
    }
    reported = {m: signatures[m] for m in complete}
    report = JudgmentReport(info, header, reported, pd.DataFrame(columns=RECORD_COLUMNS),
                            self_references=self_reference_notes(engine, reported, info.id))
    options = {"bootstrap": bootstrap, "ci": ci, "seed": seed}
    if info.kind == "score":
        header["aggregate"] = aggregate
        data = human_scores(judged, aggregate).merge(values[complete], left_on="caption_id",
                                                     right_index=True, how="left")
        if complete:
            records, report.differences = score_correlations(data, complete, **options)
            records["aggregate"], records["category"] = aggregate, None
            report.records = _with_set(records, info, report.signatures)
        levels = ("ordinal", "interval")
        if info.continuous:  # interval data: ordinal alpha would rank every distinct value
            levels = ("interval",)
            header["agreement"] = ("interval Krippendorff's alpha only: the scale is "
                                   "continuous, so ordinal alpha (ranked categories) is "
                                   "not reported")
        report.agreement = alpha_table(judged, "caption_id", "judge", "score", "image",
                                       levels=levels, **options)
    else:
        header["tie_rule"] = TIE_RULE
        if complete:
            records = pairwise_accuracy(judged, values, complete, **options)
            records["statistic"], records["aggregate"] = "accuracy", "majority"
            report.records = _with_set(records, info, report.signatures)
        votes = oriented_votes(judged)
        votes["pair"] = votes["first"].astype(str) + "-" + votes["second"].astype(str)
        report.agreement = alpha_table(votes, "pair", "judge", "vote", "image",
                                       levels=("nominal",), **options)
    return report


def _with_set(records: pd.DataFrame, info: JudgmentSetInfo, signatures: dict[str, str]
              ) -> pd.DataFrame:
    records = records.copy()
    records["judgments"] = info.name
    records["signature"] = records["metric"].map(signatures)
    extra = [c for c in records.columns if c not in RECORD_COLUMNS]
    return records[RECORD_COLUMNS + extra]


def judgment_reports(engine: Engine, **options: object) -> list[JudgmentReport]:
    """One report per judgment set (for `thumb report`)."""
    return [build_judgment_report(engine, info.name, **options)  # type: ignore[arg-type]
            for info in judgment_sets(engine)]
