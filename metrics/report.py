"""`thumb report`: final human scores and stored metric scores turned into the THUMB paper's
analyses (Tables 2-4, Figure 2, BISON-style pairwise choices), as Markdown, HTML or JSON.
Every number carries the signature of the metric that produced it."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from sqlalchemy import Engine, select

from metrics.correlation import (
    check_ci,
    correlation_records,
    pairwise_records,
    strict_best_worst,
    system_table,
    williams_records,
)
from metrics.signature import signature_labels
from storage.models import MetricScore
from storage.queries import final_scores

FORMATS = ("md", "html", "json")


@dataclass
class Report:
    header: dict[str, object]
    signatures: dict[str, str]
    systems: pd.DataFrame
    strict: pd.DataFrame
    correlations: pd.DataFrame
    williams: pd.DataFrame
    pairwise: pd.DataFrame
    data: pd.DataFrame = field(repr=False)
    bison: dict[str, pd.DataFrame] = field(default_factory=dict)


def metric_columns(engine: Engine) -> tuple[pd.DataFrame, dict[str, str]]:
    """caption_id x metric label table of stored scores, and label -> signature. A metric
    stored under several signatures gets one column per signature (`bleu`, `bleu#2`…)."""
    table = MetricScore.__table__
    with engine.connect() as connection:
        scores = pd.read_sql(select(table.c.caption_id, table.c.metric, table.c.signature,
                                    table.c.value), connection)
    labels = signature_labels(scores["signature"])
    signatures = {label: signature for signature, label in labels.items()}
    scores["label"] = scores["signature"].map(labels)
    wide = scores.pivot_table(index="caption_id", columns="label", values="value")
    return wide, signatures


def build_report(engine: Engine, *, exclude_systems: list[str] | None = None,
                 bootstrap: int = 1000, ci: float = 0.90, seed: int = 0) -> Report:
    from thumb_tui import __version__

    check_ci(ci)
    human = final_scores(engine)
    if human.empty:
        raise ValueError("no final human scores yet: rate, review or import ratings first")
    wide, signatures = metric_columns(engine)
    data = human.merge(wide, left_on="caption_id", right_index=True, how="left")
    metrics = [m for m in signatures if data[m].notna().all()]
    missing = [m for m in signatures if m not in metrics]
    systems = list(dict.fromkeys(data["system"]))
    if exclude_systems is None:
        exclude_systems = ["Human"] if "Human" in systems else []
    unknown = [s for s in exclude_systems if s not in systems]
    if unknown:
        raise ValueError(f"--exclude-system {unknown[0]!r} is not a system here "
                         f"({', '.join(systems)})")
    subsets = {"all": data["system"].notna()}
    subsets.update({f"without:{s}": data["system"] != s for s in exclude_systems})
    header = {
        "tool": f"thumb-tui {__version__}",
        "captions": len(data), "images": int(data["image_id"].nunique()),
        "systems": systems, "rubric": sorted(data["rubric"].unique()),
        "annotators": _annotators(engine),
        "annotators_of_final_scores": sorted(set(data["annotator"]) | _checkers(engine)),
        "final_scores": data["final_source"].value_counts().to_dict(),
        "bootstrap": bootstrap, "ci": ci, "seed": seed,
        "metrics_skipped": {m: "not computed for every caption" for m in missing},
    }
    return Report(
        header=header,
        signatures={m: signatures[m] for m in metrics},
        systems=system_table(data, metrics, bootstrap=bootstrap, ci=ci, seed=seed),
        strict=strict_best_worst(data),
        correlations=correlation_records(data, metrics, subsets, bootstrap=bootstrap, ci=ci,
                                         seed=seed),
        williams=williams_records(data, metrics, subsets) if len(metrics) > 1
        else pd.DataFrame(),
        pairwise=pairwise_records(data, metrics, bootstrap=bootstrap, ci=ci, seed=seed),
        data=data,
        bison=_bison_tables(engine, bootstrap=bootstrap, ci=ci, seed=seed),
    )


def _annotators(engine: Engine) -> list[str]:
    """Everyone whose work is in the scores: raters at any stage and fluency checkers."""
    from storage.models import Annotator, FluencyCheck, Rating

    annotator = Annotator.__table__
    with engine.connect() as connection:
        return sorted(connection.execute(
            select(annotator.c.name).where(
                annotator.c.id.in_(select(Rating.__table__.c.annotator_id))
                | annotator.c.id.in_(select(FluencyCheck.__table__.c.checker_id)))
        ).scalars())


def _checkers(engine: Engine) -> set[str]:
    """Native speakers whose fluency-round verdicts set final fluency penalties."""
    from storage.models import Annotator, FluencyCheck

    annotator, check = Annotator.__table__, FluencyCheck.__table__
    with engine.connect() as connection:
        return set(connection.execute(
            select(annotator.c.name).join(check, check.c.checker_id == annotator.c.id)
        ).scalars())


def _bison_tables(engine: Engine, **options: object) -> dict[str, pd.DataFrame]:
    """BISON accuracy tables when the project has BISON items, else none."""
    from storage.models import BisonItem

    with engine.connect() as connection:
        if connection.execute(select(BisonItem.__table__.c.id).limit(1)).first() is None:
            return {}
    from metrics.bison import bison_report

    return bison_report(engine, **options)  # type: ignore[arg-type]


def to_json(report: Report) -> str:
    def records(frame: pd.DataFrame) -> list[dict]:
        return json.loads(frame.to_json(orient="records"))

    return json.dumps({
        "header": report.header, "signatures": report.signatures,
        "systems": records(report.systems), "strict": records(report.strict),
        "correlations": records(report.correlations), "williams": records(report.williams),
        "pairwise": records(report.pairwise),
        "bison": {name: records(table) for name, table in report.bison.items()},
    }, indent=1)


def markdown_table(frame: pd.DataFrame, **options: object) -> str:
    """A Markdown table whose cells cannot break it (a `|` inside any text cell is
    escaped, whatever the column's dtype)."""
    escaped = frame.map(lambda v: v.replace("|", "\\|") if isinstance(v, str) else v)
    escaped.columns = [str(c).replace("|", "\\|") for c in frame.columns]
    return escaped.to_markdown(**options)


DIMENSION_SHORT = {"precision": "P", "recall": "R", "total": "Total"}


def _with_ci(value: float, low: float, high: float) -> str:
    return f"{value:.3f}" + ("" if pd.isna(low) else f" [{low:.2f}, {high:.2f}]")


def _systems_tables(systems: pd.DataFrame, metrics: list[str]) -> tuple[str, str]:
    """Table 2 as two narrow tables: the human means (Total with its CI) and the metric
    means, one row per metric and one column per system."""
    human = systems[["system", "n"]].copy()
    for column, label, digits in (("precision", "P", 2), ("recall", "R", 2),
                                  ("fluency", "Fl", 3), ("conciseness", "Con", 3),
                                  ("inclusive", "Inc", 3)):
        human[label] = systems[column].map(lambda v, d=digits: f"{v:.{d}f}")
    human["Total [CI]"] = [f"{total:.2f}" + ("" if pd.isna(low) else
                                             f" [{low:.2f}, {high:.2f}]")
                           for total, low, high in systems[
                               ["total", "total_ci_low", "total_ci_high"]].itertuples(
                               index=False)]
    means = systems.set_index("system")[metrics].T.rename_axis("metric mean")
    return (markdown_table(human, index=False, disable_numparse=True,
                           colalign=("left", *["right"] * 7)),
            markdown_table(means, floatfmt=".3f") if metrics else "no metrics computed")


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


def _bison_sections(bison: dict[str, pd.DataFrame]) -> list[tuple[str, str]]:
    """BISON tables with each model named by a short label; signatures listed below."""
    shown, labels = labelled_bison_tables(bison)
    sections = []
    for name, table in bison.items():
        text = (markdown_table(shown[name], index=False, floatfmt=".3f") if len(table)
                else "none yet")
        if "signature" in table and len(table):
            text += "\n\n" + "\n".join(f"- `{labels[s]}`: `{s}`"
                                        for s in dict.fromkeys(table["signature"]))
        sections.append((f"BISON: {name}", text))
    return sections


def _markdown_tables(report: Report) -> list[tuple[str, str]]:
    """(title, markdown table) sections shared by the Markdown and HTML reports."""
    correlations = report.correlations
    pearson = correlations[correlations["method"] == "pearson"]
    table4 = pearson.pivot_table(index=["metric", "subset"], columns="dimension", values="r",
                                 sort=False)
    table4 = table4.reindex(columns=["precision", "recall", "total"]).reset_index()
    table4.columns = ["metric", "subset", "P", "R", "Total"]
    all_methods = correlations.copy()
    all_methods["dim"] = all_methods["dimension"].map(DIMENSION_SHORT)
    all_methods["r [CI]"] = [_with_ci(*values) for values in all_methods[
        ["r", "ci_low", "ci_high"]].itertuples(index=False)]
    human, means = _systems_tables(report.systems, list(report.signatures))
    sections = [
        ("Systems: human scores (THUMB Table 2; Total CI over images)", human),
        ("Systems: metric means", means),
        ("Strictly best / worst in both P and R (THUMB Table 3)",
         markdown_table(report.strict, index=False)),
        ("Instance-level Pearson r (THUMB Table 4)",
         markdown_table(table4, index=False, floatfmt=".3f")),
        ("All correlations with bootstrap CIs (no CI for Kendall's tau)",
         markdown_table(all_methods[["metric", "dim", "subset", "method", "r [CI]",
                                     "n"]], index=False)),
        ("BISON-style pairwise choices (caption pairs of one image, Totals differ)",
         markdown_table(report.pairwise, index=False, floatfmt=".3f")),
        *_bison_sections(report.bison),
    ]
    if not report.williams.empty:
        significant = report.williams[report.williams["p"] < 0.05].rename(
            columns={"dimension": "dim", "r_metric": "r", "r_versus": "r vs"}).drop(
            columns="n")  # each subset's n is in the correlations table
        significant["dim"] = significant["dim"].map(DIMENSION_SHORT)
        sections.append(("Williams test: metric correlates better than versus (p < 0.05)",
                         markdown_table(significant, index=False, floatfmt=".3f")
                         if len(significant) else "none"))
    return sections


def _header_value(value: object) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{key}: {item}" for key, item in value.items()) or "none"
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value)) or "none"
    return str(value)


def _header_lines(report: Report) -> list[str]:
    lines = [f"- {key.replace('_', ' ')}: {_header_value(value)}"
             for key, value in report.header.items()]
    lines += ["", "Signatures:", ""]
    lines += [f"- `{label}`: `{signature}`" for label, signature in report.signatures.items()]
    return lines


def to_markdown(report: Report, figures: dict[str, Path]) -> str:
    lines = ["# thumb-tui report", "", *_header_lines(report), ""]
    for title, table in _markdown_tables(report):
        lines += [f"## {title}", "", table, ""]
    if figures:
        lines += ["## Figures", ""]
        lines += [f"- {name}: [{path.name}]({path.name})" for name, path in figures.items()]
    return "\n".join(lines) + "\n"


def to_html(report: Report, figures: dict[str, Path]) -> str:
    import markdown_it

    renderer = markdown_it.MarkdownIt("commonmark").enable("table")
    body = [renderer.render("# thumb-tui report\n\n" + "\n".join(_header_lines(report)))]
    for title, table in _markdown_tables(report):
        body.append(renderer.render(f"## {title}\n\n{table}\n"))
    for name, path in figures.items():
        encoded = base64.b64encode(path.read_bytes()).decode("ascii")
        body.append(f'<h2>{name}</h2><img alt="{name}" src="data:image/png;base64,'
                    f'{encoded}">')
    style = ("body{font-family:sans-serif;max-width:70em;margin:auto}table{border-collapse:"
             "collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>thumb-tui report"
            f"</title><style>{style}</style></head><body>{''.join(body)}</body></html>\n")


def draw_figures(report: Report, folder: Path) -> dict[str, Path]:
    """Figure 2 (P and R histograms, human vs machine captions) and metric-vs-Total
    scatter plots, as PNG files in `folder`. None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {}
    data = report.data
    figures: dict[str, Path] = {}
    human = data["system"] == "Human"
    figure, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for axis, dimension in zip(axes, ("precision", "recall"), strict=True):
        bins = [0.5 + i for i in range(6)]
        axis.hist([data.loc[~human, dimension], data.loc[human, dimension]], bins=bins,
                  density=True, label=["machine", "Human"])
        axis.set_title(dimension.capitalize())
        axis.set_xlabel("score")
        axis.set_ylabel("share of captions")
    axes[0].legend()
    figure.tight_layout()
    figures["Precision and recall: human vs machine captions"] = folder / "figure2.png"
    figure.savefig(figures["Precision and recall: human vs machine captions"], dpi=100)
    plt.close(figure)
    for metric in report.signatures:
        figure, axis = plt.subplots(figsize=(4, 3.5))
        axis.scatter(data[metric], data["total"], s=6, alpha=0.4)
        axis.set_xlabel(metric)
        axis.set_ylabel("human Total")
        figure.tight_layout()
        path = folder / f"scatter-{metric.replace('#', '-')}.png"
        figure.savefig(path, dpi=100)
        plt.close(figure)
        figures[f"{metric} vs human Total"] = path
    return figures


def write_report(report: Report, folder: Path, fmt: str) -> Path:
    """Write the report (and its figures) into `folder`; return the main file."""
    if fmt not in FORMATS:
        raise ValueError(f"report format must be one of {', '.join(FORMATS)}")
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "json":
        path = folder / "report.json"
        path.write_text(to_json(report), encoding="utf-8")
        return path
    figures = draw_figures(report, folder)
    path = folder / f"report.{fmt}"
    text = to_markdown(report, figures) if fmt == "md" else to_html(report, figures)
    path.write_text(text, encoding="utf-8")
    return path
