"""LaTeX for a paper: `booktabs` tables of the report (THUMB Tables 2, 3 and 4 in the
paper's layout, the metric means, every correlation with its CI), of the agreement, of a
judgment set and of a retrieval comparison, and the documents that hold or `\\input` them.
Every stored text (system, metric, annotator and set names, notes) goes through
`rubrics.escape.for_latex`; the documents compile with pdflatex (T1 fonts, utf8 input)
and need only packages of a basic TeX installation."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from reports.judgments import JudgmentReport
from reports.numbers import ci_bounds, is_missing
from reports.retrieval_text import rank_rows, tau_rows
from reports.thumb.figures import FigureData
from reports.thumb.render import (
    WILLIAMS_NOTE,
    WILLIAMS_TITLE,
    Notes,
    differences_frame,
    header_value,
    judgment_frames,
    no_williams,
    subset_label,
    williams_table,
    with_intervals,
)
from reports.thumb.summary import summarize
from reports.thumb.tables import Report, reference_systems, score_labels
from reports.thumb.text import (
    KIND_LABELS,
    NO_PAIRS,
    confusion_axes,
    confusion_matrices,
    dimension_labels,
    pair_blocks,
    pair_label,
    statistics_rows,
)
from rubrics import Rubric
from rubrics.escape import for_latex

PREAMBLE = "\n".join([
    r"\documentclass{article}",
    r"\usepackage[T1]{fontenc}",
    r"\usepackage[utf8]{inputenc}",
    r"\usepackage[margin=2cm]{geometry}",
    r"\usepackage{booktabs}",
    r"\usepackage{longtable}",
    r"\usepackage{graphicx}",
])
LONG_ROWS = 30  # a table with more rows is a longtable, which breaks across pages
TABLES_FOLDER = "tables"
REPORT_FILE = "report.tex"
# The report's tables in the order report.tex inputs them (each written when it can be
# computed): tables/NAME.tex
REPORT_TABLES = ("table2", "differences", "metric-means", "table3", "table4", "correlations",
                 "pairwise", "williams")


@dataclass(frozen=True)
class LatexTable:
    """One booktabs table. Every text is LaTeX already: stored text went through
    `for_latex`. `groups` is a header row above `header` ((title, columns spanned), each
    titled one underlined by a \\cmidrule); `notes` are printed under the table."""

    name: str
    caption: str
    header: Sequence[str]
    rows: Sequence[Sequence[str]]
    groups: Sequence[tuple[str, int]] = ()
    notes: Sequence[str] = ()
    align: str = ""  # one letter per column; default: l, then r for each other

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.header):
                raise ValueError(f"table {self.name}: a row has {len(row)} cells, the header "
                                 f"{len(self.header)}")

    def latex(self) -> str:
        align = self.align or "l" + "r" * (len(self.header) - 1)
        head = [r"\toprule"]
        if self.groups:
            head.append(" & ".join(rf"\multicolumn{{{span}}}{{c}}{{{title}}}" if title
                                   else " & ".join([""] * span)
                                   for title, span in self.groups) + r" \\")
            start, rules = 1, []
            for title, span in self.groups:
                if title:
                    rules.append(rf"\cmidrule(lr){{{start}-{start + span - 1}}}")
                start += span
            head.append(" ".join(rules))
        head += [" & ".join(self.header) + r" \\", r"\midrule"]
        body = [" & ".join(row) + r" \\" for row in self.rows]
        label = rf"\label{{tab:{self.name}}}"
        notes = [r"\par\smallskip{\footnotesize " + r"\\ ".join(self.notes) + "}"
                 ] if self.notes else []
        if len(self.rows) > LONG_ROWS:
            return "\n".join([
                # the caption and its label once, over the first page's head; the head
                # repeated on each later page says it continues
                rf"\begin{{longtable}}{{{align}}}", rf"\caption{{{self.caption}}}{label} \\",
                *head, r"\endfirsthead", r"\caption[]{(continued)} \\", *head, r"\endhead",
                r"\bottomrule", r"\endfoot", *body,
                r"\end{longtable}", *notes, ""])
        return "\n".join([
            r"\begin{table}[htbp]", r"\centering", rf"\caption{{{self.caption}}}{label}",
            rf"\begin{{tabular}}{{{align}}}", *head, *body, r"\bottomrule",
            r"\end{tabular}", *notes, r"\end{table}", ""])


def bold(cell: str) -> str:
    return rf"\textbf{{{cell}}}"


def best_rows(values: Sequence[float], *, among: Sequence[bool], higher: bool = True
              ) -> set[int]:
    """The rows whose value is the best (ties included) among the rows `among` marks;
    none when no such row has a value, or when all of them tie (no penalty at all)."""
    candidates = [(v, i) for i, (v, counted) in enumerate(zip(values, among, strict=True))
                  if counted and not is_missing(v)]
    if len({v for v, _ in candidates}) < 2 and len(candidates) > 1:
        return set()
    best = (max if higher else min)((v for v, _ in candidates), default=None)
    return {i for v, i in candidates if v == best}



_MINUS = re.compile(r"(?<![\w.])-(?=\d)")  # a hyphen that begins a number


def numeric(text: str) -> str:
    """A cell of numbers (a value, its CI, a note's mark) as LaTeX: a minus sign, not a
    hyphen, before a negative number."""
    return _MINUS.sub("$-$", for_latex(text))


def _number(value: float, digits: int) -> str:
    return "--" if is_missing(value) else numeric(f"{value:.{digits}f}")


def _column(values: Sequence[float], digits: int, among: Sequence[bool], *,
            higher: bool = True) -> list[str]:
    """The values printed to `digits`, the best among `among` in bold."""
    best = best_rows([round(v, digits) if not is_missing(v) else v for v in values],
                     among=among, higher=higher)
    return [bold(_number(v, digits)) if i in best else _number(v, digits)
            for i, v in enumerate(values)]


def _rows(columns: Sequence[Sequence[str]]) -> list[list[str]]:
    """A table's rows from its columns."""
    return [list(row) for row in zip(*columns, strict=True)]


def _note_lines(notes: Notes) -> list[str]:
    """A table's numbered notes (CI warnings), escaped."""
    return [for_latex(line) for line in notes.lines()]


def _machines(systems: Sequence[str]) -> list[bool]:
    """Which rows compete for bold: every system but the reference (human captions)."""
    reference = set(reference_systems(list(systems)))
    return [system not in reference for system in systems]


def _bold_rule(systems: Sequence[str]) -> str:
    reference = reference_systems(list(systems))
    return (f"bold: the best system other than {', '.join(map(for_latex, reference))}"
            if reference else "bold: the best system")


def _captions_per_system(counts: pd.Series) -> str:
    low, high = int(counts.min()), int(counts.max())
    return f"$n = {low}$" if low == high else f"$n = {low}$--${high}$"


def table2(report: Report) -> LatexTable:
    """THUMB Table 2: each system's mean of the rubric's scores and penalties, and Total
    with its CI, the machines' best in bold (highest score, smallest penalty)."""
    systems, rubric = report.systems, report.rubric
    names = list(systems["system"])
    among = _machines(names)
    columns = [[for_latex(name) for name in names]]
    header = ["System"]
    for dimension in rubric.dimensions:
        header.append(for_latex(dimension.short))
        columns.append(_column(list(systems[dimension.key]), 2, among))
    for penalty in rubric.penalties:
        header.append(for_latex(penalty.abbreviation))
        columns.append(_column(list(systems[penalty.key]), 3, among, higher=False))
    notes = Notes()
    totals = _column(list(systems["total"]), 2, among)
    intervals = systems.reindex(columns=["total_ci_low", "total_ci_high", "total_ci_warning"])
    # Total and its CI printed to the same digits: the rounding keeps Total inside
    columns.append([total if is_missing(low) else
                    total + numeric(f" [{low:.2f}, {high:.2f}]{notes.mark(warning)}")
                    for total, (low, high, warning) in zip(
                        totals, intervals.itertuples(index=False), strict=True)])
    ci = report.header.get("ci")
    header.append("Total" + (for_latex(f" [{ci:.0%} CI]") if isinstance(ci, float)
                             and "total_ci_low" in systems else ""))
    caption = (f"Human evaluation: each system's mean scores and penalties "
               f"({_captions_per_system(systems['n'])} captions per system; the CI of "
               f"Total is BCa bootstrap over images; {_bold_rule(names)}).")
    return LatexTable("table2", caption, header, _rows(columns),
                      notes=_note_lines(notes))


def metric_means(report: Report) -> LatexTable:
    """Each system's mean score under every metric (columns), the machines' best in
    bold: what the automatic metrics say next to Table 2."""
    systems = report.systems
    names = list(systems["system"])
    among = _machines(names)
    metrics = list(report.signatures)
    columns = [[for_latex(name) for name in names],
               *(_column(list(systems[metric]), 3, among) for metric in metrics)]
    return LatexTable("metric-means", "Automatic metrics: each system's mean score "
                      f"({_bold_rule(names)}; signatures in the report).",
                      ["System", *map(for_latex, metrics)],
                      _rows(columns))


def table3(report: Report) -> LatexTable:
    """THUMB Table 3: how often each system is strictly best and strictly worst in its
    image's caption set, in both of the rubric's scores."""
    first, second = (for_latex(d.short) for d in report.rubric.dimensions[:2])
    rows = [[for_latex(str(row.system)), str(row.best), str(row.worst)]
            for row in report.strict.itertuples(index=False)]
    return LatexTable("table3", f"Times each system is strictly best and strictly worst in "
                      f"its image's caption set, in both {first} and {second}.",
                      ["System", "Best", "Worst"], rows)


def table4(report: Report) -> LatexTable:
    """THUMB Table 4: instance-level Pearson r of each metric with the rubric's scores and
    Total, one column group per subset (all systems, without Human), each column's
    highest r in bold."""
    pearson, labels = report.table4, list(score_labels(report.rubric).values())
    subsets = list(dict.fromkeys(pearson["subset"]))
    metrics = list(dict.fromkeys(pearson["metric"]))
    by_key = pearson.set_index(["metric", "subset"])
    columns = [[for_latex(str(metric)) for metric in metrics]]
    for subset in subsets:
        for label in labels:
            values = [by_key[label].get((metric, subset), float("nan")) for metric in metrics]
            columns.append(_column(values, 2, [True] * len(metrics)))
    return LatexTable(
        "table4", "Instance-level Pearson correlation $r$ of each metric with the human "
        "scores (bold: the highest in each column).",
        ["Metric", *(for_latex(label) for _ in subsets for label in labels)],
        _rows(columns),
        groups=[("", 1), *((for_latex(subset_label(s)), len(labels)) for s in subsets)])


def correlations(report: Report) -> LatexTable:
    """Every correlation the report computed (Pearson, Spearman, Kendall; each subset),
    with its BCa CI (Kendall's has none)."""
    labels = score_labels(report.rubric)
    notes = Notes()
    rows = []
    for record in report.correlations.to_dict(orient="records"):
        cell = "--" if is_missing(record["r"]) else f"{record['r']:.3f}"
        if not is_missing(record.get("ci_low")):
            cell += f" {ci_bounds(record['ci_low'], record['ci_high'])}"
        rows.append([for_latex(str(record["metric"])),
                     for_latex(labels.get(record["dimension"], str(record["dimension"]))),
                     for_latex(subset_label(str(record["subset"]))),
                     for_latex(str(record["method"])),
                     numeric(cell + notes.mark(record.get("ci_warning"))),
                     str(record["n"])])
    ci = report.header.get("ci")
    level = for_latex(f"{ci:.0%} ") if isinstance(ci, float) else ""
    return LatexTable("correlations", f"Metric--human correlations with {level}BCa "
                      "bootstrap CIs over images (none for Kendall's $\\tau$).",
                      ["Metric", "Score", "Systems", "Method", "$r$ [CI]", "$n$"], rows,
                      align="llllrr", notes=_note_lines(notes))


def frame_table(name: str, caption: str, frame: pd.DataFrame, notes: Sequence[str] = (),
                text_columns: Sequence[str] = ()) -> LatexTable:
    """A table the Markdown report shows, from its frame of cells (stored text not
    escaped yet): the first column and `text_columns` escaped as text, the others as
    numbers (a minus sign before a negative one)."""
    text = [index == 0 or column in text_columns for index, column in enumerate(frame.columns)]
    return LatexTable(
        name, for_latex(caption), [for_latex(str(column)) for column in frame.columns],
        [[(for_latex if is_text else numeric)("" if is_missing(cell) else str(cell))
          for cell, is_text in zip(row, text, strict=True)]
         for row in frame.itertuples(index=False)],
        notes=[for_latex(note) for note in notes],
        align="".join("l" if is_text else "r" for is_text in text))


def differences(report: Report) -> LatexTable:
    """Every pair of systems: the difference of mean Totals with its paired CI."""
    notes = Notes()
    how, frame = differences_frame(report, notes)
    return frame_table("differences", f"Differences between systems (human Total). {how}",
                       frame, notes.lines(), text_columns=("versus", "significant"))


def pairwise(report: Report) -> LatexTable:
    """BISON-style pairwise choices: how often each metric prefers the caption of higher
    human Total."""
    notes = Notes()
    return frame_table("pairwise", "BISON-style pairwise choices (caption pairs of one "
                       "image whose Totals differ): each metric's accuracy.",
                       with_intervals(report.pairwise, "accuracy", notes),
                       notes.lines())


def williams(report: Report) -> LatexTable:
    """The significant Williams tests, with n: the captions both metrics score."""
    frame = williams_table(report)
    frame[["r", "r vs", "p"]] = frame[["r", "r vs", "p"]].map("{:.3f}".format)
    return frame_table("williams", f"{WILLIAMS_TITLE}. {WILLIAMS_NOTE}", frame,
                       text_columns=("versus", "dim", "subset"))


def report_tables(report: Report) -> list[LatexTable]:
    """The report's tables that can be computed, in the order of REPORT_TABLES."""
    if report.data.empty:
        return []
    missing = {note["key"] for note in report.missing}
    builders: dict[str, Callable[[Report], LatexTable]] = {
        "table2": table2, "differences": differences, "metric-means": metric_means,
        "table3": table3, "table4": table4, "correlations": correlations,
        "pairwise": pairwise, "williams": williams}
    needs = {"table2": "human", "differences": "human", "metric-means": "metrics",
             "table3": "human", "table4": "correlations", "correlations": "correlations",
             "pairwise": "correlations", "williams": "correlations"}
    frames = {"differences": report.differences, "pairwise": report.pairwise,
              "williams": report.williams}
    tables = [builders[name](report) for name in REPORT_TABLES
              if needs[name] not in missing and not frames.get(name, report.data).empty]
    return [table for table in tables if table.rows]


def omitted_sections(report: Report, *, with_figures: bool = False) -> list[str]:
    """The sections of the Markdown and HTML reports that the LaTeX report leaves out
    (named in report.tex and on stderr, never dropped silently); the figures are in it
    `with_figures` (--print-figures)."""
    sections = [("the BISON tables", bool(report.bison)),
                ("the retrieval results", not report.retrieval.empty),
                ("the gold items' accuracy", not report.gold.empty),
                ("the progress per stage", not report.progress.empty
                 and bool(report.header.get("images"))),
                ("the figures", not report.data.empty and not with_figures)]
    return [f"{name}: thumb report --format md or html has them"
            for name, there in sections if there]


def document(title: str, body: Iterable[str]) -> str:
    """A complete document: the preamble, a title, then `body` (LaTeX)."""
    return "\n".join([PREAMBLE, r"\begin{document}", rf"\section*{{{title}}}", *body,
                      r"\end{document}", ""])


def _itemize(lines: Sequence[str]) -> list[str]:
    return [r"\begin{itemize}", *(rf"\item {line}" for line in lines), r"\end{itemize}"
            ] if lines else []


def _signature_items(signatures: dict[str, str], beside: dict[str, str]) -> list[str]:
    """Each metric's label and signature, typewriter type that may break after a `|`, and
    in parentheses after it the count of the data it leaves out (`beside`: label -> `48
    self-references excluded`)."""
    # ragged right: typewriter type breaks only after a `|`, and a justified line that
    # cannot be filled runs into the margin instead (a spice-approx signature by 84 pt)
    return [r"{\raggedright", *_itemize([
        rf"{for_latex(label)}: \texttt{{" + for_latex(signature).replace("|", r"|\allowbreak{}")
        + "}" + (f" ({for_latex(beside[label])})" if label in beside else "")
        for label, signature in signatures.items()]), r"\par}"]


def _figure(figure: FigureData) -> str:
    """A print figure's PDF, at the text's width (a scatter plot no taller than half a
    page), under its caption. Its file name is ours, letters, digits, `.` and `-` only
    (`reports.thumb.figures`); its caption holds stored names: escaped."""
    return "\n".join([
        r"\begin{figure}[htbp]", r"\centering",
        rf"\includegraphics[width=\linewidth,height=0.5\textheight,keepaspectratio]"
        rf"{{{figure.stem}.pdf}}",
        rf"\caption{{{for_latex(figure.caption)}}}\label{{fig:{figure.stem}}}",
        r"\end{figure}"])


def report_document(report: Report, tables: Sequence[LatexTable],
                    figures: Sequence[FigureData] = ()) -> str:
    """report.tex: what the report covers, each table \\input from tables/, each print
    figure written beside it, the metrics' signatures, and what cannot be computed
    yet."""
    from reports.thumb.render import header_value, missing_lines

    # the whole header, as the other formats give it: project, systems, rubric, raters,
    # which final scores, CIs and version
    facts = [f"{key.replace('_', ' ')}: {header_value(value)}"
             for key, value in report.header.items()]
    body = [r"\subsection*{Summary}",
            *_itemize([for_latex(line) for line in summarize(report).sentences()]),
            r"\subsection*{Settings}", *_itemize([for_latex(fact) for fact in facts])]
    body += [rf"\input{{{TABLES_FOLDER}/{table.name}}}" for table in tables]
    body += [_figure(figure) for figure in figures]
    if not report.williams.empty and "williams" not in {table.name for table in tables}:
        body += [for_latex(f"{WILLIAMS_TITLE}: {no_williams(report)}")]
    for number, judgments in enumerate(report.judgments, start=1):
        body += [rf"\subsection*{{{for_latex(f'Judgment set {judgments.info.name}')}}}",
                 *_judgment_body(judgments, f"judgments-{number}", "subsubsection")]
    if report.broken:
        body += [r"\subsection*{Images flagged as broken (left out of the tables)}",
                 *_itemize([for_latex(f"{item.key}: {item.reason} (flagged by "
                                      f"{item.annotator})") for item in report.broken])]
    if report.signatures:
        body += [r"\subsection*{Signatures}",
                 *_signature_items(report.signatures, report.self_references)]
    if report.missing:
        body += [r"\subsection*{Not computed yet}",
                 *_itemize([for_latex(line) for line in missing_lines(report)])]
    if omitted := omitted_sections(report, with_figures=bool(figures)):
        body += [r"\subsection*{Not in this LaTeX report}",
                 *_itemize([for_latex(line) for line in omitted])]
    return document("thumb-tui report", body)


def write_report(report: Report, folder: Path, tables_folder: Path, *,
                 print_figures: bool = False) -> Path:
    """Write report.tex into `folder` and each table that can be computed into
    `tables_folder` (tables/ beside report.tex once in place), and with `print_figures`
    each figure as PDF and PNG beside report.tex, which includes the PDFs; return
    report.tex."""
    tables = report_tables(report)
    for table in tables:
        (tables_folder / f"{table.name}.tex").write_text(table.latex(), encoding="utf-8")
    figures: list[FigureData] = []
    if print_figures:
        from reports.thumb.figures import figure_data
        from reports.thumb.print_figures import write_print_figures

        figures = figure_data(report)
        write_print_figures(figures, folder)
    path = folder / REPORT_FILE
    path.write_text(report_document(report, tables, figures), encoding="utf-8")
    return path


def agreement_document(agreement: pd.DataFrame, *, ci: float, bootstrap: int,
                       rubric: Rubric) -> str:
    """`thumb agreement` as a document: for each kind of pair and each pair, the
    statistics by dimension (value [CI]) and the confusion matrices."""
    labels = dimension_labels(rubric)
    intro = (f"{ci:.0%} BCa bootstrap CIs over images, {bootstrap} resamples." if bootstrap
             else "No CIs (--bootstrap 0).")
    body = [for_latex(intro), *([] if len(agreement) else ["", for_latex(NO_PAIRS)])]
    number = 0
    for kind, of_kind in agreement.groupby("kind", sort=False):
        body.append(rf"\subsection*{{{for_latex(KIND_LABELS.get(str(kind), str(kind)))}}}")
        for annotators, part in pair_blocks(of_kind):
            number += 1
            first = part.iloc[0]
            confusion = part["statistic"].str.startswith("confusion:")
            rows, notes = statistics_rows(part[~confusion], labels)
            body.append(LatexTable(
                f"agreement-{number}",
                for_latex(f"{pair_label(annotators)}: {first['n']} captions, "
                          f"{first['images']} images"),
                ["Statistic", *map(for_latex, labels.values())],
                [[for_latex(row[0]), *map(numeric, row[1:])] for row in rows],
                notes=[for_latex(f"({i}) {note}") for i, note in enumerate(notes, 1)]
            ).latex())
            for index, (label, names, counts) in enumerate(
                    confusion_matrices(part[confusion], rubric, labels)):
                body.append(LatexTable(
                    f"agreement-{number}-confusion-{index + 1}",
                    for_latex(f"{label}, {pair_label(annotators)} "
                              f"({confusion_axes(str(kind), annotators)})"),
                    [for_latex(label), *map(for_latex, names)],
                    [[for_latex(str(cell)) for cell in row] for row in counts]).latex())
    return document("Agreement between annotators", body)


def judgment_document(report: JudgmentReport) -> str:
    """`thumb judgments report` as a document: each of its tables (values with their
    BCa CIs), its header and the metrics' signatures."""
    return document(for_latex(f"Judgment set {report.info.name}"),
                    _judgment_body(report, "judgments", "subsection"))


def _judgment_body(report: JudgmentReport, name: str, heading: str) -> list[str]:
    """A judgment set's header, each of its tables (named `name-1`, ...) and its metrics'
    signatures under a `heading` (a LaTeX sectioning command): its own document, or a
    section of `thumb report`'s."""
    header = [for_latex(f"{key.replace('_', ' ')}: {header_value(value)}")
              for key, value in report.header.items()]
    body = _itemize(header)
    for number, (title, frame, notes) in enumerate(judgment_frames(report, str), start=1):
        # the first column names a metric or a statistic, "note" says why: text; the
        # others hold numbers
        body.append(frame_table(f"{name}-{number}", title, frame, notes,
                                text_columns=("note",)).latex())
    if report.signatures:
        body += [rf"\{heading}*{{Signatures}}",
                 *_signature_items(report.signatures, report.self_references)]
    return body


def comparison_document(ranks: pd.DataFrame, tau: pd.DataFrame) -> str:
    """`thumb retrieval compare` as a document: the models under every metric (value,
    rank; each metric's first in bold) and Kendall's τ-b between the metrics' rankings
    (an undefined τ as a dash)."""
    headers, rows = rank_rows(ranks)
    ranked = [[for_latex(row[0]), *(bold(numeric(cell)) if cell.endswith("(#1)")
                                     else numeric(cell) for cell in row[1:])]
              for row in rows]
    tau_headers, tau_cells = tau_rows(tau)
    return document("Retrieval models compared", [
        LatexTable("retrieval-ranks", r"Models under every metric (value in \%, rank; "
                   "bold: first).", list(map(for_latex, headers)), ranked).latex(),
        LatexTable("retrieval-tau", r"Kendall's $\tau_b$ between the metrics' rankings of "
                   "the models (metrics numbered as in Table~\\ref{tab:retrieval-ranks}).",
                   list(map(for_latex, tau_headers)),
                   [[for_latex(row[0]), *map(numeric, row[1:])] for row in tau_cells]
                   ).latex()])
