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
    correlation_records,
    pairwise_records,
    strict_best_worst,
    system_table,
    williams_records,
)
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
    signatures: dict[str, str] = {}
    labels: dict[str, str] = {}
    for (metric, signature), _ in scores.groupby(["metric", "signature"], sort=True):
        count = sum(1 for s in signatures.values() if s.split("|")[0] == metric)
        label = metric if count == 0 else f"{metric}#{count + 1}"
        signatures[label], labels[signature] = signature, label
    scores["label"] = scores["signature"].map(labels)
    wide = scores.pivot_table(index="caption_id", columns="label", values="value")
    return wide, signatures


def build_report(engine: Engine, *, exclude_systems: list[str] | None = None,
                 bootstrap: int = 1000, ci: float = 0.90, seed: int = 0) -> Report:
    from thumb_tui import __version__

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
        "annotators": sorted(data["annotator"].unique()),
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


def _md(frame: pd.DataFrame, **options: object) -> str:
    """A Markdown table whose cells cannot break it (a `|` inside a cell is escaped)."""
    escaped = frame.copy()
    for column in escaped.columns:
        if escaped[column].dtype == object:
            escaped[column] = escaped[column].map(
                lambda v: v.replace("|", "\\|") if isinstance(v, str) else v)
    return escaped.to_markdown(**options)


def _markdown_tables(report: Report) -> list[tuple[str, str]]:
    """(title, markdown table) sections shared by the Markdown and HTML reports."""
    pearson = report.correlations[report.correlations["method"] == "pearson"]
    table4 = pearson.pivot_table(index="metric", columns=["subset", "dimension"], values="r")
    table4.columns = [f"{subset} {dimension[0].upper()}" for subset, dimension in table4.columns]
    all_methods = report.correlations.copy()
    all_methods["r [CI]"] = all_methods.apply(
        lambda r: f"{r['r']:.3f}" + ("" if pd.isna(r["ci_low"])
                                     else f" [{r['ci_low']:.2f}, {r['ci_high']:.2f}]"), axis=1)
    sections = [
        ("Systems (THUMB Table 2; Total CI over images)",
         _md(report.systems, index=False, floatfmt=".3f")),
        ("Strictly best / worst in both P and R (THUMB Table 3)",
         _md(report.strict, index=False)),
        ("Instance-level Pearson r (THUMB Table 4)", _md(table4, floatfmt=".3f")),
        ("All correlations with bootstrap CIs (no CI for Kendall's tau)",
         _md(all_methods[["metric", "dimension", "subset", "method", "r [CI]", "n"]],
             index=False)),
        ("BISON-style pairwise choices (pairs of one image's captions whose Totals differ)",
         _md(report.pairwise, index=False, floatfmt=".3f")),
    ]
    for name, table in report.bison.items():
        sections.append((f"BISON: {name}", _md(table, index=False, floatfmt=".3f")
                         if len(table) else "none yet"))
    if not report.williams.empty:
        significant = report.williams[report.williams["p"] < 0.05]
        sections.append(("Williams test: metric correlates better than versus (p < 0.05)",
                         _md(significant, index=False, floatfmt=".3f")
                         if len(significant) else "none"))
    return sections


def _header_lines(report: Report) -> list[str]:
    header = report.header
    lines = [f"- {key}: {value}" for key, value in header.items()]
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
