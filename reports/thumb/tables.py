"""`thumb report`'s tables: final human scores and stored metric scores (storage) turned
into the THUMB paper's analyses (Tables 2-4, Figure 2, BISON-style pairwise choices) by the
statistics in `metrics`. Every number carries the signature of the metric behind it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import pandas as pd
from sqlalchemy import Engine

from metrics.signature import (
    current_form,
    tool_version,
)
from metrics.stats.confidence import CI_METHOD, check_ci
from metrics.stats.correlation import (
    correlation_records,
    pairwise_records,
    strict_best_worst,
    system_differences,
    system_table,
    williams_records,
)
from rubrics import THUMB_1_0, Rubric
from storage.bison import has_bison_items
from storage.metric_scores import caption_rows, metric_scores, signatures_computed_at
from storage.rating.dashboard import ProjectSize, pipeline_stages, project_size
from storage.rating.image_flags import broken_images
from storage.rating.rating_frames import (
    captions_per_image,
    contributing_annotators,
    final_scores,
    fluency_checkers,
)
from storage.retrieval import has_results
from storage.rubric_registry import stored_rubrics


def score_labels(rubric: Rubric) -> dict[str, str]:
    """Column labels of the human scores in the report tables: the rubric's short names of
    its dimensions (P, R for THUMB), and Total."""
    return {**{d.key: d.short for d in rubric.dimensions}, "total": "Total"}


def pearson_table(correlations: pd.DataFrame, rubric: Rubric) -> pd.DataFrame:
    """THUMB Table 4: instance-level Pearson r of each metric and subset with P, R, Total."""
    labels = score_labels(rubric)
    if correlations.empty:
        return pd.DataFrame(columns=["metric", "subset", *labels.values()])
    pearson = correlations[correlations["method"] == "pearson"]
    table = pearson.pivot_table(index=["metric", "subset"], columns="dimension", values="r",
                                sort=False)
    table = table.reindex(columns=list(labels)).reset_index()
    table.columns = ["metric", "subset", *labels.values()]
    return table


def reference_systems(systems: list[str]) -> list[str]:
    """The systems the machines are measured against: human captions (a system named Human,
    as in THUMB 1.0). The report's second set of correlations leaves them out by default,
    and a LaTeX table's bold best values are the machines' best."""
    return ["Human"] if "Human" in systems else []


def report_rubric(engine: Engine, signatures: list[str]) -> Rubric:
    """The one rubric of the final scores (as the database stores it): scores on
    different scales cannot share one table."""
    if len(signatures) != 1:
        raise ValueError(f"the final scores were made under several rubrics "
                         f"({', '.join(signatures)}); report each project apart")
    return stored_rubrics(engine)[signatures[0]]


@dataclass
class Report:
    header: dict[str, object]
    signatures: dict[str, str]
    systems: pd.DataFrame
    strict: pd.DataFrame
    correlations: pd.DataFrame
    williams: pd.DataFrame
    pairwise: pd.DataFrame
    table4: pd.DataFrame
    rubric: Rubric
    data: pd.DataFrame = field(repr=False)
    bison: dict[str, pd.DataFrame] = field(default_factory=dict)
    judgments: list = field(default_factory=list)  # a JudgmentReport per judgment set
    retrieval: pd.DataFrame = field(default_factory=pd.DataFrame)
    # images flagged as broken (storage.rating.image_flags.BrokenImage): out of every table above,
    # listed apart with who flagged them and why
    broken: list = field(default_factory=list)
    progress: pd.DataFrame = field(default_factory=pd.DataFrame)  # PROGRESS_COLUMNS
    # the tables that cannot be computed yet: key, tables, missing, command
    missing: list[dict[str, str]] = field(default_factory=list)
    # gold items (storage.rating.gold), where there are any: per annotator answered, correct,
    # accuracy; never part of the tables above
    gold: pd.DataFrame = field(default_factory=pd.DataFrame)
    # agreement between annotators (metrics.stats.agreement's records), point estimates only:
    # its bootstrap would cost more than the rest of the report; `thumb agreement` has CIs
    agreement: pd.DataFrame = field(default_factory=pd.DataFrame)
    # every pair of systems: the difference of mean Totals with a paired bootstrap CI
    # (metrics.stats.correlation.system_differences)
    differences: pd.DataFrame = field(default_factory=pd.DataFrame)
    # label -> how many references were their caption itself (`48 self-references
    # excluded`): shown beside its signature, never in it (reports.scoring)
    self_references: dict[str, str] = field(default_factory=dict)


CORPUS_PREFIX = "corpus:"  # a corpus-level metric's field: `corpus:per-system#c513e19dc3`


def _corpus(signature: str) -> str | None:
    """A signature's corpus field value (`per-system#c513e19dc3`), None for a metric that
    scores each caption on its own."""
    return next((part.removeprefix(CORPUS_PREFIX) for part in signature.split("|")
                 if part.startswith(CORPUS_PREFIX)), None)


def _without_corpus_digest(signature: str) -> str:
    """The signature with its corpus digest cut (`corpus:per-system`): two signatures equal
    under it are one metric with the same settings, computed on two corpora."""
    return "|".join(part.split("#", 1)[0] if part.startswith(CORPUS_PREFIX) else part
                    for part in signature.split("|"))


def earlier_corpora(computed_at: dict[str, datetime]) -> dict[str, str]:
    """superseded signature -> the one that replaces it. The rule: of a metric's signatures
    that differ only in their corpus digest, the one that stored a score last is current
    (`thumb metrics compute` after captions were imported); the others were computed on
    an earlier corpus and are left out of every table. An old-form signature (with the
    data counts, `metrics.signature.current_form`) is grouped with the current form of the
    same settings."""
    groups: dict[str, list[str]] = {}
    for signature in computed_at:
        if "#" in (_corpus(signature) or ""):
            key = _without_corpus_digest(current_form(signature))
            groups.setdefault(key, []).append(signature)
    superseded = {}
    for group in groups.values():
        newest = max(group, key=lambda signature: (computed_at[signature], signature))
        superseded.update({signature: newest for signature in group if signature != newest})
    return superseded


def _superseded_notes(superseded: dict[str, str]) -> dict[str, str]:
    """`cider-d (per-system#c513e19dc3)` -> what replaced it, for the report's settings."""
    return {f"{old.split('|', 1)[0]} ({_corpus(old)})":
            f"computed on an earlier corpus, superseded by {_corpus(new)}; left out"
            for old, new in superseded.items()}


def out_of_date(scores: pd.DataFrame, labels: dict[str, str], captions: int
                ) -> dict[str, str]:
    """label -> why the metric's stored scores are out of date and the command that
    updates them: it scores fewer than the project's `captions` (captions were imported
    after it ran), and for a corpus-level metric that means every score shown comes from
    a corpus that is no longer the project's."""
    counts = scores.groupby("signature")["caption_id"].nunique()
    notes = {}
    for signature, count in counts.items():
        if count >= captions:
            continue
        name = str(signature).split("|", 1)[0]
        corpus = ("; its corpus is no longer the project's (or its last run was "
                  "interrupted), so every score shown may change"
                  if _corpus(str(signature)) is not None else "")
        notes[labels[signature]] = (f"scores {count} of the project's {captions} captions"
                                    f"{corpus}; update: thumb metrics compute --metric {name}")
    return notes


def _undefined_counts(scores: pd.DataFrame, captions: pd.Series) -> dict[str, str]:
    """label -> 'undefined for N captions (reason)' among the reported captions."""
    undefined = scores[scores["undefined"].notna() & scores["caption_id"].isin(captions)]
    return {label: f"undefined for {len(rows)} captions "
                   f"({', '.join(sorted(set(rows['undefined'])))})"
            for label, rows in undefined.groupby("label")}


PROGRESS_COLUMNS = ["stage", "unit", "waiting", "in_progress", "done", "not_ready"]
RATE_COMMAND = ("thumb annotate --annotator ANNOTATOR (then thumb review), or thumb import "
                "RATINGS.csv")


def _progress(engine: Engine) -> pd.DataFrame:
    """Each stage of the pipeline (as `thumb status` shows it)."""
    from dataclasses import asdict

    return pd.DataFrame([asdict(stage) for stage in pipeline_stages(engine)],
                        columns=PROGRESS_COLUMNS)


def size_header(size: ProjectSize, rated: pd.DataFrame | None) -> dict[str, object]:
    """The header's size of the project: its captions, images and systems, each beside
    those `rated` so far (the final human scores in the tables, so none of a flagged
    image): an early report says how far the rating has come, not only what it has."""
    none = rated is None or rated.empty
    return {"captions": size.captions, "rated_captions": 0 if none else len(rated),
            "images": size.images,
            "rated_images": 0 if none else int(rated["image_id"].nunique()),
            "systems": size.systems,
            "rated_systems": [] if none else list(dict.fromkeys(rated["system"]))}


def missing_tables(images: int, has_human: bool, has_metrics: bool) -> list[dict[str, str]]:
    """For each group of tables that cannot be computed yet: what is missing and the
    command that produces it (none when every table can be)."""
    if images == 0:
        return [{"key": "captions", "tables": "the THUMB tables (systems, metric means, "
                                              "correlations, agreement)",
                 "missing": "no captions yet", "command": "thumb import CAPTIONS.csv"}]
    notes = []
    if not has_human:
        notes.append({"key": "human", "tables": "human scores per system, strictly best / "
                                                "worst in both scores",
                      "missing": "no caption has a complete human rating yet",
                      "command": RATE_COMMAND})
    if not has_metrics:
        notes.append({"key": "metrics", "tables": "metric means per system",
                      "missing": "no metric has scored every caption yet",
                      "command": "thumb metrics compute"})
    if not (has_human and has_metrics):
        needs = [what for what, there in (("complete human ratings", has_human),
                                          ("metric scores", has_metrics)) if not there]
        notes.append({"key": "correlations",
                      "tables": "metric-human correlations (Pearson r, all methods with "
                                "CIs, Williams tests) and pairwise choices",
                      "missing": f"they need {' and '.join(needs)}",
                      "command": "the commands above" if len(needs) == 2
                      else notes[0]["command"]})
    return notes


def project_name(engine: Engine) -> str:
    """The project's name as the report's title shows it: its database file's name without
    the extension (or the server database's name)."""
    from pathlib import Path

    return Path(engine.url.database or "").stem or "thumb-tui project"


def build_report(engine: Engine, *, exclude_systems: list[str] | None = None,
                 bootstrap: int = 1000, ci: float = 0.90, seed: int = 0) -> Report:
    from reports.agreement import agreement_report
    from reports.judgments import judgment_reports
    from reports.scoring import metric_columns, self_reference_notes

    check_ci(ci)
    size = project_size(engine)
    human = final_scores(engine, flagged=False)  # a flagged image is out of the report
    broken = broken_images(engine)
    scores = metric_scores(engine)
    superseded = earlier_corpora(signatures_computed_at(engine))
    scores = scores[~scores["signature"].isin(superseded)].copy()
    wide, signatures = metric_columns(scores)
    scores = scores[scores["label"].notna()]  # without the superseded old-form signatures
    has_human = not human.empty
    if not has_human:
        if not signatures:
            report = _report_without_captions(engine, bootstrap=bootstrap, ci=ci, seed=seed)
            report.broken = broken
            return report
        human = _captions_without_scores(engine)
        human = human[~human["image_id"].isin({item.key for item in broken})]
    data = human.merge(wide, left_on="caption_id", right_index=True, how="left")
    stored = scores.pivot(index="caption_id", columns="label", values="metric")
    complete = stored.reindex(data["caption_id"]).notna().all()
    metrics = [m for m in signatures if complete[m]]
    missing = [m for m in signatures if m not in metrics]
    undefined = _undefined_counts(scores, data["caption_id"])
    systems = list(dict.fromkeys(data["system"]))
    if exclude_systems is None:
        exclude_systems = reference_systems(systems)
    unknown = [s for s in exclude_systems if s not in systems]
    if unknown:
        raise ValueError(f"--exclude-system {unknown[0]!r} is not a system here "
                         f"({', '.join(systems)})")
    rubric = report_rubric(engine, sorted(data["rubric"].unique())) if has_human else THUMB_1_0
    subsets = {"all": data["system"].notna()}
    # without the only system there is nothing left to correlate
    subsets.update({f"without:{s}": data["system"] != s for s in exclude_systems
                    if (data["system"] != s).any()})
    header = {
        "project": project_name(engine), "tool": f"thumb-tui {tool_version()}",
        **size_header(size, data if has_human else None),
        "rubric": sorted(r for r in data["rubric"].unique() if r),
        "annotators": contributing_annotators(engine),
        "annotators_of_final_scores": sorted((set(data["annotator"]) - {""})
                                             | fluency_checkers(engine)),
        "final_scores": data["final_source"].value_counts().to_dict(),
        "bootstrap": bootstrap, "ci": ci, "ci_method": CI_METHOD, "seed": seed,
        "metrics_skipped": {m: "not computed for every caption" for m in missing},
        "metrics_undefined": {m: undefined[m] for m in metrics if m in undefined},
    }
    if not has_human:
        header["final_scores"] = "none yet: metric means only"
    compared = metrics if has_human else []  # nothing human to correlate with
    correlations = correlation_records(data, compared, subsets, bootstrap=bootstrap, ci=ci,
                                       seed=seed)
    stale = out_of_date(scores, {s: label for label, s in signatures.items()},
                        size.captions)
    if stale:
        header["metrics_out_of_date"] = stale
    if superseded:
        header["metrics_superseded"] = _superseded_notes(superseded)
    bison = _bison_tables(engine, bootstrap=bootstrap, ci=ci, seed=seed)
    reported = {m: signatures[m] for m in metrics}
    return Report(
        progress=_progress(engine), header=header, broken=broken,
        missing=[*missing_tables(size.images, has_human, bool(metrics)),
                 *bison_missing(bison)],
        signatures=reported, self_references=self_reference_notes(engine, reported),
        systems=system_table(data, metrics, scores=[*rubric.score_keys, *rubric.penalty_keys],
                             bootstrap=bootstrap, ci=ci, seed=seed),
        strict=strict_best_worst(data, captions_per_image(engine)) if has_human else pd.DataFrame(
            columns=["system", "best", "worst"]),
        correlations=correlations,
        table4=pearson_table(correlations, rubric),
        rubric=rubric,
        williams=williams_records(data, compared, subsets) if len(compared) > 1
        else pd.DataFrame(),
        pairwise=pairwise_records(data, compared, bootstrap=bootstrap, ci=ci, seed=seed),
        data=data, bison=bison,
        judgments=judgment_reports(engine, bootstrap=bootstrap, ci=ci, seed=seed),
        retrieval=_retrieval_table(engine), gold=gold_table(engine, header),
        agreement=agreement_report(engine, bootstrap=0) if has_human else pd.DataFrame(),
        differences=system_differences(data, bootstrap=bootstrap, ci=ci, seed=seed)
        if has_human else pd.DataFrame(),
    )


def _report_without_captions(engine: Engine, *, bootstrap: int, ci: float, seed: int
                             ) -> Report:
    """A project whose captions have neither human nor metric scores yet: where each stage
    stands, what is missing for the THUMB tables, and whatever else the project holds
    (retrieval results, judgment sets, BISON items)."""
    from reports.judgments import judgment_reports

    options = {"bootstrap": bootstrap, "ci": ci, "seed": seed}
    bison = _bison_tables(engine, **options)
    size = project_size(engine)
    header = {"project": project_name(engine), "tool": f"thumb-tui {tool_version()}",
              **size_header(size, None),
              "final_scores": "none yet: no caption has a human or metric score"
              if size.captions else "none: the project has no captions of its own",
              **options, "ci_method": CI_METHOD}
    return Report(header=header, signatures={}, systems=pd.DataFrame(),
                  strict=pd.DataFrame(), correlations=pd.DataFrame(), williams=pd.DataFrame(),
                  pairwise=pd.DataFrame(), table4=pd.DataFrame(), rubric=THUMB_1_0,
                  data=pd.DataFrame(), bison=bison,
                  judgments=judgment_reports(engine, **options),
                  retrieval=_retrieval_table(engine), progress=_progress(engine),
                  missing=[*missing_tables(size.images, False, False),
                           *bison_missing(bison)],
                  gold=gold_table(engine, header))


def gold_table(engine: Engine, header: dict[str, object]) -> pd.DataFrame:
    """Each annotator's gold accuracy (answered, correct, accuracy), with the gold
    settings in the header; an empty frame (and no header entry) without gold items."""
    from storage.rating.gold import gold_accuracy, gold_count, gold_settings

    with engine.connect() as connection:
        captions = gold_count(connection)
    if not captions:
        return pd.DataFrame()
    settings = gold_settings(engine)
    header["gold"] = {"captions": captions, "rate": settings.rate,
                      "feedback": "on" if settings.feedback else "off"}
    return pd.DataFrame([(row.annotator, row.answered, row.correct, row.accuracy)
                         for row in gold_accuracy(engine)],
                        columns=["annotator", "answered", "correct", "accuracy"])


def _captions_without_scores(engine: Engine) -> pd.DataFrame:
    """Every caption in the shape of `final_scores`, its human columns empty: a project
    with metric scores and no final human scores yet still gets its metric means."""
    rows, _ = caption_rows(engine)
    frame = pd.DataFrame([row._asdict() for row in rows],
                         columns=["caption_id", "image_id", "system", "text", "image_key", "path"])
    frame = frame.rename(columns={"image_id": "image_pk", "image_key": "image_id",
                                  "text": "caption"})
    for column in (*THUMB_1_0.score_keys, *THUMB_1_0.penalty_keys, "total"):
        frame[column] = float("nan")
    frame["annotator"], frame["rubric"], frame["final_source"] = "", "", "none"
    return frame


def _retrieval_table(engine: Engine) -> pd.DataFrame:
    """Stored retrieval results when a model was evaluated, else none (the retrieval
    modules, a tenth of a second to import, load only then)."""
    if not has_results(engine):
        return pd.DataFrame()
    from reports.retrieval import retrieval_table

    return retrieval_table(engine)


BISON_MISSING = {
    "human": ("human accuracy", "no annotator has answered an item yet",
              "thumb bison annotate --annotator ANNOTATOR"),
    "models": ("model accuracy", "no model or baseline has chosen yet",
               "thumb bison evaluate --scorer METRIC"),
    "agreement": ("human-model agreement", "it needs human answers and model choices",
                  "thumb bison annotate and thumb bison evaluate"),
}


def bison_missing(bison: dict[str, pd.DataFrame]) -> list[dict[str, str]]:
    """A note per BISON table without rows (the project has items): what it lacks and the
    command that fills it."""
    return [{"key": f"bison-{name}", "tables": f"BISON {tables}", "missing": missing,
             "command": command}
            for name, (tables, missing, command) in BISON_MISSING.items()
            if name in bison and bison[name].empty]


def _bison_tables(engine: Engine, **options: object) -> dict[str, pd.DataFrame]:
    """BISON accuracy tables when the project has BISON items, else none (their modules
    load only then)."""
    if not has_bison_items(engine):
        return {}
    from reports.bison import bison_report

    return bison_report(engine, **options)  # type: ignore[arg-type]
