"""Retrieval results and model comparisons as terminal tables, Markdown and a τ heat map.
Values print as percentages (RSUM as the sum of six percentages, 0-600); every label that
comes from a file or the database goes through `rubrics.escape` (control characters shown,
never sent) and then `rich.text.Text` (no markup) or Markdown escaping."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from metrics.retrieval.evaluation import ncs_label_suffix
from reports.numbers import is_missing
from reports.plotting import plot_label, pyplot
from reports.terminal import TERMINAL_WIDTH
from rubrics.escape import for_markdown, printable

if TYPE_CHECKING:  # the tables come built; importing pandas would slow every command
    import pandas as pd

COLUMNS = ("i2t", "t2i", "mean")
UNDEFINED = "—"  # a value that cannot be computed (a τ over constant rankings)


def _percent(value: object) -> str:
    if is_missing(value):
        return UNDEFINED
    return f"{100 * float(value):.1f}"


def _cell(record: dict[str, object], separator: str = " ") -> str:
    value = _percent(record["value"])
    if record["ci_low"] is None:
        return value
    mark = " (!)" if record.get("ci_warning") else ""
    return (f"{value}{separator}[{_percent(record['ci_low'])}, "
            f"{_percent(record['ci_high'])}]{mark}")


def _warnings(records: Sequence[dict[str, object]]) -> list[str]:
    """The CI warnings of the records marked (!), one line each."""
    return [f"(!) {warning}" for warning in dict.fromkeys(
        str(r["ci_warning"]) for r in records if r.get("ci_warning"))]


def _signatures(records: Sequence[dict[str, object]]) -> list[str]:
    """The settings that produced the values (positive set and its digest, PMRP cap, NCS
    relevance, bootstrap, seed, version), each distinct one once, in the records' order."""
    return [str(s) for s in dict.fromkeys(r.get("signature") for r in records) if s]


def _metric_name(record: dict[str, object]) -> str:
    """`ncs@5`, `sr@5 m=2`, `ncs@5 eq5` (NCS not averaged as the default, the authors'
    code: the signature says which)."""
    metric = str(record["metric"])
    averaging = ncs_label_suffix(metric, record.get("signature"))
    if record["k"] is not None:
        metric = metric.replace("@k", f"@{record['k']}")
    if record["m"] is not None:
        metric += f" m={record['m']}"
    return f"{metric} {averaging}" if averaging else metric


def result_rows(records: Sequence[dict[str, object]], separator: str = " "
                ) -> list[list[str]]:
    """[model, positives, metric, i2t, t2i, mean-or-both] rows in the records' order."""
    rows: dict[tuple, dict[str, str]] = {}
    for record in records:
        key = tuple(printable(str(part), newlines=False) for part in
                    (record["model"], record["positives"], _metric_name(record)))
        column = "mean" if record["direction"] == "both" else str(record["direction"])
        rows.setdefault(key, {})[column] = _cell(record, separator)
    return [[*map(str, key), *(cells.get(c, "") for c in COLUMNS)]
            for key, cells in rows.items()]


def _title(ci: float, records: Sequence[dict[str, object]]) -> str:
    """What the values are; the CI only where one of `records` has one (not with
    --bootstrap 0)."""
    interval = (f", [{ci:.0%} BCa bootstrap CI over queries]"
                if any(r["ci_low"] is not None for r in records) else "")
    return f"values in %{interval}; rsum: sum of six recalls"


def results_table(records: Sequence[dict[str, object]], *, ci: float,
                  out: Path | None = None) -> None:
    """One table per model (its name in the title), each value over its CI; a model whose
    three columns of values would not fit 80 columns gets one row per value instead."""
    tables: list[object] = []
    for model in dict.fromkeys(r["model"] for r in records):
        of_model = [r for r in records if r["model"] == model]
        title = Text(f"{model}: ")
        title.append(_title(ci, of_model))
        wide = terminal_table(title, ("positives", "metric", *COLUMNS),
                              [row[1:] for row in result_rows(of_model, "\n")], labels=2)
        tables.append(fitted(wide, lambda title=title, of_model=of_model: terminal_table(
            title, ("positives", "metric", "direction", "value [CI]"),
            _result_pairs(of_model), labels=3)))
    tables += [*(Text(line) for line in _warnings(records)), Text("signatures:")]
    _print(Group(*tables), out, [printable(f"  {signature}", newlines=False)
                                 for signature in _signatures(records)])


def _result_pairs(records: Sequence[dict[str, object]]) -> list[list[str]]:
    """The long layout of a model's results: one row per value (positives, metric,
    direction, value [CI])."""
    return [[printable(str(record["positives"]), newlines=False),
             printable(_metric_name(record), newlines=False), str(record["direction"]),
             _cell(record)] for record in records]


def terminal_table(title: str | Text, headers: Sequence[str], rows: Sequence[Sequence[str]],
                   *, labels: int = 1) -> Table:
    """A borderless table whose first `labels` columns hold text (folded where it must
    be) and the others numbers, right-aligned and never wrapped (a number cut in two,
    "1." over "00", reads as two). Cells are shown literally (`rich.text.Text`)."""
    table = Table(title=title, title_justify="left", box=None, pad_edge=False)
    for index, header in enumerate(headers):
        text = index < labels
        table.add_column(Text(header), justify="left" if text else "right",
                         overflow="fold", no_wrap=not text)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    return table


def fitted(wide: Table, long: Callable[[], Table]) -> Table:
    """`wide` where its natural width fits TERMINAL_WIDTH columns, else the table `long`
    makes: the same values one row per pair, whose only wide cells are labels, folded."""
    width = Console(width=10 * TERMINAL_WIDTH).measure(wide).maximum
    return wide if width <= TERMINAL_WIDTH else long()


def _print(renderable: object, out: Path | None, unbroken: Sequence[str] = ()) -> None:
    """`renderable`, then the `unbroken` lines (signatures) each on one line whatever
    the width, so that they can be copied and searched whole."""
    with (nullcontext(None) if out is None else open(out, "w", encoding="utf-8")) as handle:
        console = (Console() if handle is None
                   else Console(file=handle, width=TERMINAL_WIDTH, color_system=None))
        console.print(renderable)
        for line in unbroken:
            console.print(Text(line), soft_wrap=True)


def _markdown(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def cells(row: Sequence[str]) -> str:
        return "| " + " | ".join(for_markdown(cell, table_cell=True) for cell in row) + " |"

    return "\n".join([cells(headers), "|" + "---|" * len(headers), *map(cells, rows)])


def results_markdown(records: Sequence[dict[str, object]], *, ci: float) -> str:
    signatures = "\n".join(f"- {for_markdown(s)}" for s in _signatures(records))
    return f"{_title(ci, records)}\n\n" + _markdown(("model", "positives", "metric", *COLUMNS),
                                          result_rows(records)) + "\n" + "".join(
        f"\n{for_markdown(line)}\n" for line in _warnings(records)) + (
        f"\nSignatures:\n\n{signatures}\n" if signatures else "")


def retrieval_sections(table: pd.DataFrame) -> list[tuple[str, str]]:
    """The report's retrieval section (none when no model was evaluated): every stored
    result, with the signatures that produced them."""
    if table.empty:
        return []
    records = table.astype(object).where(table.notna(), None).to_dict(orient="records")
    text = _markdown(("model", "positives", "metric", *COLUMNS), result_rows(records))
    text += "".join(f"\n\n{for_markdown(line)}" for line in _warnings(records))
    signatures = "\n".join(f"- {for_markdown(s)}" for s in _signatures(records))
    return [("Retrieval (values in %, [bootstrap CI over queries]; level, resamples and kind "
             "(interval) in each signature)",
             f"{text}\n\nSignatures:\n\n{signatures}")]


def _agreement_rows(table: pd.DataFrame) -> list[list[str]]:
    rows = []
    for row in table.to_dict(orient="records"):
        value = UNDEFINED if is_missing(row["r"]) else f"{row['r']:.3f}"
        interval = "" if is_missing(row["ci_low"]) else (
            f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}]"
            + (" (!)" if _has_warning(row) else ""))
        rows.append([str(row["scorer"]), str(row["method"]), value, interval, str(row["n"])])
    return rows


def _has_warning(row: dict[str, object]) -> bool:
    warning = row.get("ci_warning")
    return isinstance(warning, str) and bool(warning)


def _agreement_warnings(table: pd.DataFrame) -> list[str]:
    return _warnings([row for row in table.to_dict(orient="records") if _has_warning(row)])


AGREEMENT_HEADERS = ("relevance", "method", "r", "CI", "pairs")


def _agreement_title(ci: float) -> str:
    return f"correlation with human grades ({ci:.0%} BCa bootstrap CIs resampling images)"


def agreement_markdown(table: pd.DataFrame, ci: float) -> str:
    return (f"{_agreement_title(ci)}\n\n{_markdown(AGREEMENT_HEADERS, _agreement_rows(table))}"
            "\n" + "".join(f"\n{for_markdown(line)}\n"
                           for line in _agreement_warnings(table)))


def agreement_table(table: pd.DataFrame, ci: float, *, out: Path | None = None) -> None:
    rich_table = terminal_table(_agreement_title(ci), AGREEMENT_HEADERS,
                                _agreement_rows(table), labels=2)
    _print(Group(rich_table, *(Text(line) for line in _agreement_warnings(table))), out)


def rank_rows(ranks: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    models = list(dict.fromkeys(ranks["model"]))
    rows = []
    for number, (metric, part) in enumerate(ranks.groupby("metric", sort=False)):
        by_model = part.set_index("model")
        rows.append([f"({number + 1}) {printable(str(metric), newlines=False)}", *(
            f"{_percent(by_model.loc[m, 'value'])} (#{by_model.loc[m, 'rank']:g})"
            if m in by_model.index else UNDEFINED for m in models)])
    return ["metric", *(printable(str(m), newlines=False) for m in models)], rows


def tau_rows(tau: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Rows and columns numbered as in the ranks table (labels would not fit 80 columns)."""
    numbered = [f"({i + 1})" for i in range(len(tau))]
    rows = [[n, *(UNDEFINED if is_missing(v) else f"{v:.2f}" for v in tau.loc[label])]
            for n, label in zip(numbered, tau.index, strict=True)]
    return ["τ-b", *numbered], rows


RANKS_TITLE = "Models under every metric (value %, rank)"
TAU_TITLE = "Kendall τ-b between the metrics' rankings"


def comparison_markdown(ranks: pd.DataFrame, tau: pd.DataFrame) -> str:
    parts = []
    for title, (headers, rows) in ((RANKS_TITLE, rank_rows(ranks)),
                                   (TAU_TITLE, tau_rows(tau))):
        parts.append(f"### {title}\n\n{_markdown(headers, rows)}\n")
    return "\n".join(parts)


def _rank_pairs(ranks: pd.DataFrame) -> list[list[str]]:
    """The long layout of the ranks: one row per metric and model."""
    numbers = {metric: number for number, metric in
               enumerate(dict.fromkeys(ranks["metric"]), start=1)}
    return [[f"({numbers[row.metric]}) {printable(str(row.metric), newlines=False)}",
             printable(str(row.model), newlines=False), _percent(row.value),
             f"#{row.rank:g}"] for row in ranks.itertuples(index=False)]


def _tau_pairs(tau: pd.DataFrame) -> list[list[str]]:
    """The long layout of the τ matrix: one row per pair of metrics (each pair once)."""
    labels = [f"({i + 1}) {printable(str(label), newlines=False)}"
              for i, label in enumerate(tau.index)]
    values = tau.to_numpy(dtype=float)
    return [[labels[i], labels[j], UNDEFINED if math.isnan(values[i, j])
             else f"{values[i, j]:.2f}"]
            for i in range(len(labels)) for j in range(i + 1, len(labels))]


def comparison_tables(ranks: pd.DataFrame, tau: pd.DataFrame) -> list[Table]:
    """The ranks (metrics by models) and the τ matrix, each as wide as 80 columns allow:
    a table that would be wider has one row per pair instead."""
    headers, rows = rank_rows(ranks)
    ranked = fitted(terminal_table(RANKS_TITLE, headers, rows),
                    lambda: terminal_table(RANKS_TITLE, ("metric", "model", "value", "rank"),
                                           _rank_pairs(ranks), labels=2))
    headers, rows = tau_rows(tau)
    matrix = fitted(terminal_table(TAU_TITLE, headers, rows),
                    lambda: terminal_table(TAU_TITLE, ("metric", "versus", "τ-b"),
                                           _tau_pairs(tau), labels=2))
    return [ranked, matrix]


def comparison_table(ranks: pd.DataFrame, tau: pd.DataFrame, *, out: Path | None = None
                     ) -> None:
    _print(Group(*comparison_tables(ranks, tau)), out)


def versions_note(versions: dict[str, list[tuple[str, list[str]]]]) -> str | None:
    """Which models were scored on which version of a set, where a set has several
    (`reports.retrieval.ModelComparison.versions`), or None."""
    if not versions:
        return None
    lines = ["note: results computed on different versions of a set are ranked apart:"]
    for versioned in versions.values():
        lines += [f"  {printable(label, newlines=False)}: "
                  + ", ".join(printable(model, newlines=False) for model in models)
                  for label, models in versioned]
    lines.append("a version scored for fewer than two models is not ranked; evaluate the "
                 "models on the set as it is now to compare them all")
    return "\n".join(lines)


def json_text(payload: object) -> str:
    """JSON that every parser reads: a NaN or infinity left in `payload` is a bug caught
    here (ValueError), never written as `NaN`, which is not JSON."""
    return json.dumps(payload, indent=1, allow_nan=False)


def unranked_note(unranked: dict[str, str]) -> str | None:
    """Which metrics the comparison leaves out, scored for one model only (an Eq. 5
    NCS next to ones averaged as the authors' code, say), or None: said, never dropped
    without a word."""
    if not unranked:
        return None
    listed = "; ".join(f"{printable(metric, newlines=False)} (only "
                       f"{printable(model, newlines=False)})"
                       for metric, model in unranked.items())
    return (f"not ranked, scored for one model only: {listed}; evaluate another model with "
            "the same settings to compare them")


def tau_warning(ranks: pd.DataFrame) -> str | None:
    """Why the τ values say little, or None: over two models every defined τ is +1 or -1
    (the two rankings agree or not)."""
    models = ranks["model"].nunique()
    if models >= 3:
        return None
    return (f"warning: only {models} models are compared, so every Kendall τ-b is +1 or -1 "
            "(or undefined where a metric ties them); compare three or more for a τ that "
            "says how far two metrics agree")


UNDEFINED_COLOUR = "lightgrey"  # an undefined τ's cell in the heat map, hatched
def draw_tau(tau: pd.DataFrame, path: Path) -> None:
    """A heat map of the τ matrix (needs matplotlib, in the `metrics` extra; labels from
    files and the database are drawn safely by `reports.plotting`). An undefined τ is a
    grey hatched cell, apart from every colour of the scale (τ = 0 is white)."""
    size = max(4.0, 0.5 * len(tau) + 2)
    with pyplot("--plot") as plt:
        from matplotlib.patches import Patch, Rectangle

        figure, axes = plt.subplots(figsize=(size + 1, size))
        try:
            values = tau.to_numpy(dtype=float)
            image = axes.imshow(values, vmin=-1, vmax=1, cmap="RdBu")
            for row, column in np.argwhere(np.isnan(values)):
                axes.add_patch(Rectangle((column - 0.5, row - 0.5), 1, 1, hatch="//",
                                         facecolor=UNDEFINED_COLOUR, edgecolor="grey"))
            if np.isnan(values).any():
                axes.legend(handles=[Patch(hatch="//", facecolor=UNDEFINED_COLOUR,
                                           edgecolor="grey", label="τ undefined")],
                            loc="upper center", bbox_to_anchor=(0.5, -0.08), frameon=False)
            axes.set_xticks(range(len(tau)), [str(i + 1) for i in range(len(tau))])
            axes.set_yticks(range(len(tau)), [f"({i + 1}) {plot_label(str(label))}"
                                              for i, label in enumerate(tau.index)])
            figure.colorbar(image, ax=axes, label="Kendall τ-b")
            figure.tight_layout()
            figure.savefig(path, bbox_inches="tight")  # else the bar's label is cut off
        finally:
            plt.close(figure)
