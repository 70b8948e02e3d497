"""`thumb report`'s renderers: the tables of a `Report` as Markdown, HTML (with figures) or
JSON. Every number is shown with the signature of the metric that produced it. Stored text
(system and annotator names, signatures) is untrusted: Markdown escapes it for Markdown and
HTML, the HTML page is rendered with raw HTML off and a Content-Security-Policy that runs
no script and loads nothing but its own inline images and style."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from metrics.judgments import STATISTICS
from metrics.signature import signature_labels
from reports.figures import draw_figures
from reports.judgments import JudgmentReport, metrics_hint
from reports.retrieval_text import retrieval_sections
from reports.tables import Report, score_labels
from rubrics import Rubric, for_html, for_markdown

FORMATS = ("md", "html", "json")


def to_json(report: Report) -> str:
    def records(frame: pd.DataFrame) -> list[dict]:
        return json.loads(frame.to_json(orient="records"))

    return json.dumps({
        "header": report.header, "signatures": report.signatures,
        "systems": records(report.systems), "strict": records(report.strict),
        "correlations": records(report.correlations), "williams": records(report.williams),
        "pairwise": records(report.pairwise), "table4": records(report.table4),
        "bison": {name: records(table) for name, table in report.bison.items()},
        "judgments": [judgment_json(judgments) for judgments in report.judgments],
        "retrieval": records(report.retrieval),
        "progress": records(report.progress), "missing": report.missing,
        "broken_images": [{"image": item.key, "flagged_by": item.annotator,
                           "reason": item.reason} for item in report.broken],
        "gold": records(report.gold),
    }, indent=1)


def markdown_table(frame: pd.DataFrame, **options: object) -> str:
    """A Markdown table whose cells cannot break it or inject anything: every text cell
    and column name is escaped for Markdown and HTML, whatever the column's dtype."""
    def cell(value: object) -> object:
        return for_markdown(value, table_cell=True) if isinstance(value, str) else value

    escaped = frame.map(cell)
    escaped.columns = [cell(str(c)) for c in frame.columns]
    escaped.index = pd.Index([cell(v) for v in frame.index], name=cell(frame.index.name))
    return escaped.to_markdown(**options)


def ci_bounds(low: float, high: float, digits: int = 2) -> str:
    """`[low, high]` rounded outwards (down, up) to `digits`: a value printed with more
    digits than its interval must not seem to fall outside it (0.698 [0.70, 1.00])."""
    scale = 10**digits
    # a bound within 1e-9 of a printed step is that step (0.29 * 100 is 28.999...)
    return (f"[{math.floor(low * scale + 1e-9) / scale:.{digits}f}, "
            f"{math.ceil(high * scale - 1e-9) / scale:.{digits}f}]")


class Notes:
    """The numbered notes of one table (the CI warnings of its cells): `mark` gives a
    cell's ` (n)`, `lines` the notes to print under the table."""

    def __init__(self, escape: Callable[[str], str] = str) -> None:
        self.texts: list[str] = []
        self.escape = escape

    def mark(self, text: object) -> str:
        if not isinstance(text, str) or not text:  # None, or NaN from a frame
            return ""
        if text not in self.texts:
            self.texts.append(text)
        return f" ({self.texts.index(text) + 1})"

    def lines(self) -> list[str]:
        return [f"({number}) {self.escape(text)}"
                for number, text in enumerate(self.texts, start=1)]

    def markdown(self) -> str:
        """The notes as Markdown paragraphs below a table ('' when there are none)."""
        return "".join(f"\n\n{line}" for line in self.lines())


def noted(frame: pd.DataFrame, notes: Notes) -> pd.DataFrame:
    """The frame with its `ci_warning` column replaced by a `note` column of marks (none
    when no row has a warning)."""
    if "ci_warning" not in frame:
        return frame
    frame = frame.copy()
    marks = [notes.mark(warning).strip() for warning in frame.pop("ci_warning")]
    if any(marks):
        frame["note"] = marks
    return frame


def _with_ci(value: float, low: float, high: float, mark: str = "") -> str:
    return f"{value:.3f}" + ("" if pd.isna(low) else f" {ci_bounds(low, high)}") + mark


def _systems_tables(systems: pd.DataFrame, metrics: list[str], rubric: Rubric
                    ) -> tuple[str, str]:
    """Table 2 as two narrow tables: the human means of the rubric's scores and penalties
    (Total with its CI) and the metric means, one row per metric and one column per
    system."""
    human = systems[["system", "n"]].copy()
    columns = [(d.key, d.short, 2) for d in rubric.dimensions]
    columns += [(p.key, p.abbreviation, 3) for p in rubric.penalties]
    for column, label, digits in columns:
        human[label] = systems[column].map(lambda v, d=digits: "-" if pd.isna(v) else
                                           f"{v:.{d}f}")
    notes = Notes(for_markdown)
    # Total and its CI printed to the same digits: the rounding keeps Total inside
    human["Total [CI]"] = ["-" if pd.isna(total) else f"{total:.2f}" + ("" if pd.isna(low) else
                                             f" [{low:.2f}, {high:.2f}]") + notes.mark(warning)
                           for total, low, high, warning in systems.reindex(  # no CI:
                               columns=["total", "total_ci_low", "total_ci_high",  # --bootstrap 0
                                        "total_ci_warning"]).itertuples(index=False)]
    means = systems.set_index("system")[metrics].T.rename_axis("metric mean")
    return (markdown_table(human, index=False, disable_numparse=True,
                           colalign=("left", *["right"] * (len(human.columns) - 1)))
            + notes.markdown(),
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
        notes = Notes(for_markdown)
        text = (markdown_table(noted(shown[name], notes), index=False, floatfmt=".3f")
                + notes.markdown() if len(table) else "none yet")
        if "signature" in table and len(table):
            text += "\n\n" + "\n".join(f"- {for_markdown(labels[s])}: {for_markdown(s)}"
                                        for s in dict.fromkeys(table["signature"]))
        sections.append((f"BISON: {name}", text))
    return sections


def _progress_sections(report: Report) -> list[tuple[str, str]]:
    """Where each stage of the pipeline stands (none for a project without images)."""
    if report.progress.empty or not report.header.get("images", 1):
        return []
    progress = report.progress
    table = pd.DataFrame({"stage": progress["stage"] + " (" + progress["unit"] + ")",
                          "waiting": progress["waiting"],
                          "started": progress["in_progress"], "done": progress["done"],
                          "not ready": progress["not_ready"]})  # 80 columns wide at most
    return [("Progress per stage (as `thumb status` shows it; started: begun, not finished)",
             markdown_table(table, index=False))]


def missing_lines(report: Report) -> list[str]:
    """One line per group of tables not computed yet: what is missing, what to run."""
    return [f"{note['tables']}: {note['missing']}; run {note['command']}"
            for note in report.missing]


def _missing_sections(report: Report) -> list[tuple[str, str]]:
    if not report.missing:
        return []
    return [("Not computed yet", "\n".join(f"- {for_markdown(line)}"
                                            for line in missing_lines(report)))]


def _markdown_tables(report: Report) -> list[tuple[str, str]]:
    """(title, markdown table) sections shared by the Markdown and HTML reports: the
    progress first, the tables not computed yet last."""
    return (_progress_sections(report) + _computed_tables(report)
            + _gold_sections(report) + _broken_sections(report) + _missing_sections(report))


def _gold_sections(report: Report) -> list[tuple[str, str]]:
    """Each annotator's gold accuracy, where the project has gold items (they are in no
    other table)."""
    if report.gold.empty and "gold" not in report.header:
        return []
    gold = report.header.get("gold", {})
    title = (f"Gold items ({gold.get('captions')} gold captions, seeded at a rate of "
             f"{gold.get('rate', 0):g}; in no other table)")
    if report.gold.empty:
        return [(title, "No gold answers yet.")]
    table = report.gold.assign(accuracy=report.gold["accuracy"].map("{:.0%}".format))
    return [(title, markdown_table(table, index=False))]


def _broken_sections(report: Report) -> list[tuple[str, str]]:
    """The images flagged as broken, which every table above leaves out: who flagged each
    and why (`thumb image unflag IMAGE` puts one back)."""
    if not report.broken:
        return []
    table = pd.DataFrame([(item.key, item.annotator, item.reason) for item in report.broken],
                         columns=["image", "flagged by", "reason"])
    return [("Images flagged as broken (left out of the tables above)",
             markdown_table(table, index=False))]


def _computed_tables(report: Report) -> list[tuple[str, str]]:
    missing = {note["key"] for note in report.missing}
    others = [*_bison_sections(report.bison),
              *[section for judgments in report.judgments
                for section in judgment_sections(judgments)],
              *retrieval_sections(report.retrieval)]
    if report.data.empty:  # no caption scored yet: only what else the project holds
        return others
    labels = score_labels(report.rubric)
    all_methods = report.correlations.copy()
    all_methods["dim"] = all_methods["dimension"].map(labels)
    correlation_notes, pairwise_notes = Notes(for_markdown), Notes(for_markdown)
    all_methods["r [CI]"] = [_with_ci(r, low, high, correlation_notes.mark(warning))
                             for r, low, high, warning in all_methods.reindex(
                                 columns=["r", "ci_low", "ci_high", "ci_warning"]).itertuples(
                                 index=False)]
    human, means = _systems_tables(report.systems, list(report.signatures), report.rubric)
    first, second = (d.short for d in report.rubric.dimensions)
    human_sections = [
        ("Systems: human scores (THUMB Table 2; Total CI over images)", human),
        (f"Strictly best / worst in both {for_markdown(first)} and {for_markdown(second)} "
         "(THUMB Table 3)",
         markdown_table(report.strict, index=False)),
    ]
    correlation_sections = [
        ("Instance-level Pearson r (THUMB Table 4)",
         markdown_table(report.table4, index=False, floatfmt=".3f")),
        ("All correlations with BCa bootstrap CIs (no CI for Kendall's tau)",
         markdown_table(all_methods[["metric", "dim", "subset", "method", "r [CI]",
                                     "n"]], index=False) + correlation_notes.markdown()),
        ("BISON-style pairwise choices (caption pairs of one image, Totals differ)",
         markdown_table(noted(report.pairwise, pairwise_notes), index=False, floatfmt=".3f")
         + pairwise_notes.markdown()),
    ]
    # a table that cannot be computed yet is named under "Not computed yet" instead
    sections = [
        *([] if "human" in missing else human_sections[:1]),
        *([] if "metrics" in missing else [("Systems: metric means", means)]),
        *([] if "human" in missing else human_sections[1:]),
        *([] if "correlations" in missing else correlation_sections),
        *others,
    ]
    if not report.williams.empty:
        significant = report.williams[report.williams["p"] < 0.05].rename(
            columns={"dimension": "dim", "r_metric": "r", "r_versus": "r vs"}).drop(
            columns="n")  # each subset's n is in the correlations table
        significant["dim"] = significant["dim"].map(labels)
        sections.append(("Williams test: metric correlates better than versus (p < 0.05)",
                         markdown_table(significant, index=False, floatfmt=".3f")
                         if len(significant) else "none"))
    return sections


def header_value(value: object) -> str:
    """A header value as plain text (it lists stored names: escape it for the output)."""
    if isinstance(value, dict):
        return ", ".join(f"{key}: {item}" for key, item in value.items()) or "none"
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value)) or "none"
    return str(value)


def _header_lines(report: Report | JudgmentReport) -> list[str]:
    """A report's header and its metric signatures, as Markdown list items (escaped)."""
    lines = [f"- {key.replace('_', ' ')}: {for_markdown(header_value(value))}"
             for key, value in report.header.items()]
    if report.signatures:
        lines += ["", "Signatures:", ""]
        lines += [f"- {for_markdown(label)}: {for_markdown(signature)}"
                  for label, signature in report.signatures.items()]
    return lines


def to_markdown(report: Report, figures: dict[str, Path]) -> str:
    lines = ["# thumb-tui report", "", *_header_lines(report), ""]
    for title, table in _markdown_tables(report):
        lines += [f"## {title}", "", table, ""]
    if figures:
        lines += ["## Figures", ""]
        lines += [f"- {for_markdown(name)}: [{path.name}]({path.name})"  # our file names
                  for name, path in figures.items()]
    return "\n".join(lines) + "\n"


def to_html(report: Report, figures: dict[str, Path]) -> str:
    import markdown_it

    # raw HTML off: whatever the Markdown holds is shown as text, never parsed as a tag
    renderer = markdown_it.MarkdownIt("commonmark", {"html": False}).enable("table")
    body = [renderer.render("# thumb-tui report\n\n" + "\n".join(_header_lines(report)))]
    for title, table in _markdown_tables(report):
        body.append(renderer.render(f"## {title}\n\n{table}\n"))
    for name, path in figures.items():
        encoded = base64.b64encode(path.read_bytes()).decode("ascii")
        body.append(f'<h2>{for_html(name)}</h2><img alt="{for_html(name)}" '
                    f'src="data:image/svg+xml;base64,{encoded}">')
    return HTML_PAGE.format(policy=CONTENT_SECURITY_POLICY, style=STYLE, body="".join(body))


# No script runs, nothing is fetched: only the page's own style and its data: images.
CONTENT_SECURITY_POLICY = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
                           "base-uri 'none'; form-action 'none'")
STYLE = ("body{font-family:sans-serif;max-width:70em;margin:auto}table{border-collapse:"
         "collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}")
HTML_PAGE = ("<!doctype html><html><head><meta charset='utf-8'>"
             "<meta http-equiv='Content-Security-Policy' content=\"{policy}\">"
             "<title>thumb-tui report</title><style>{style}</style></head>"
             "<body>{body}</body></html>\n")


def write_report(report: Report, folder: Path, fmt: str) -> Path:
    """Write the report (and its figures) into `folder`; return the main file."""
    if fmt not in FORMATS:
        raise ValueError(f"report format must be one of {', '.join(FORMATS)}")
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "json":
        path = folder / "report.json"
        path.write_text(to_json(report), encoding="utf-8")
        return path
    figures = draw_figures(report, folder) if len(report.data) else {}
    path = folder / f"report.{fmt}"
    text = to_markdown(report, figures) if fmt == "md" else to_html(report, figures)
    path.write_text(text, encoding="utf-8")
    return path


def _cell(value: float, low: float, high: float, mark: str = "") -> str:
    if pd.isna(value):
        return "undefined"
    return f"{value:.3f}" + ("" if pd.isna(low) else f" {ci_bounds(low, high)}") + mark


def _cells(frame: pd.DataFrame, value: str, notes: Notes) -> list[str]:
    """Each row's value with its CI and the mark of its CI warning."""
    return [_cell(v, low, high, notes.mark(warning)) for v, low, high, warning in
            frame.reindex(columns=[value, "ci_low", "ci_high", "ci_warning"]).astype(
                {value: float, "ci_low": float, "ci_high": float}).itertuples(index=False)]


def judgment_frames(report: JudgmentReport, escape: Callable[[object], str]
                    ) -> list[tuple[str, pd.DataFrame, list[str]]]:
    """(title, table, notes) of a judgment set's report, every cell text (a value with its
    BCa CI, and a numbered mark where its CI has a warning: the notes, numbered, go under
    the table); stored text (set name, categories, metric labels, notes) goes through
    `escape` for the medium it is rendered in."""
    records, ci = report.records.copy(), f"{report.header['ci']:.0%} BCa"
    name = escape(report.info.name)
    records["metric"] = records["metric"].map(escape)
    records["category"] = records["category"].map(lambda c: c if c is None else escape(c))
    labels = [escape(label) for label in report.signatures]
    frames = []
    if report.info.kind == "score" and len(records):
        aggregate = report.header["aggregate"]
        how = ("flat: one pair per judgment" if aggregate == "flat"
               else "mean: one pair per caption, its judges' mean")
        notes = Notes(escape)
        table = records.assign(cell=_cells(records, "value", notes)).pivot(
            index="metric", columns="statistic", values="cell").reindex(
            index=labels, columns=list(STATISTICS.values()))
        frames.append((f"{name}: metric-human correlation ({how}; n = "
                       f"{records['n'].iloc[0]}; {ci} CIs over images)",
                       table.reset_index(), notes.lines()))
        if len(report.differences):
            differences = report.differences.copy()
            for column in ("metric", "versus"):
                differences[column] = differences[column].map(escape)
            notes = Notes(escape)
            table = differences.assign(
                pair=differences["metric"] + " − " + differences["versus"],
                cell=_cells(differences, "difference", notes)).pivot(
                index="pair", columns="statistic", values="cell").reindex(
                columns=list(STATISTICS.values()))
            pearson = differences[differences["statistic"] == "pearson"]
            pearson = pearson.set_index(pearson["metric"] + " − " + pearson["versus"])
            table["Williams p"] = pearson["williams_p"].map(
                lambda p: "" if pd.isna(p) else f"{p:.3f}")
            frames.append((f"{name}: differences between metrics (paired bootstrap "
                           f"{ci} CIs; Williams' test one-sided, for Pearson)",
                           table.reset_index().rename(columns={"pair": "metric − versus"}),
                           notes.lines()))
    elif len(records):
        notes = Notes(escape)
        table = records.assign(cell=_cells(records, "value", notes)).pivot(
            index="metric", columns="category", values="cell")
        categories = ["all", *[c for c in dict.fromkeys(records["category"]) if c != "all"]]
        table = table.reindex(index=labels, columns=categories)
        counts = records.drop_duplicates("category").set_index("category")
        table.loc["pairs (no majority)"] = [
            f"{counts.loc[c, 'n']} ({counts.loc[c, 'no_majority']})" for c in categories]
        frames.append((f"{name}: accuracy against the majority human choice ({ci} CIs "
                       "over images)", table.reset_index(), notes.lines()))
    agreement = report.agreement
    if len(agreement):
        notes = Notes(escape)
        table = pd.DataFrame({
            "statistic": agreement["statistic"],
            "value": _cells(agreement.fillna({"value": float("nan")}), "value", notes),
            "targets": agreement["n"], "judges": agreement["raters"],
            "note": agreement["note"].fillna("").map(escape)})
        frames.append((f"{name}: agreement among the judges (Krippendorff's alpha, {ci} "
                       "CIs over images)", table, notes.lines()))
    return frames


def judgment_sections(report: JudgmentReport) -> list[tuple[str, str]]:
    """(title, Markdown) sections of a judgment set, for its own report and `thumb
    report`."""
    sections = [(f"Judgment set {for_markdown(report.info.name)}",
                 "\n".join(_header_lines(report)))]
    if (hint := metrics_hint(report, for_markdown)) is not None:
        sections.append(("Metrics", hint))
    for title, frame, notes in judgment_frames(
            report, lambda text: for_markdown(str(text), table_cell=True)):
        # stored text is escaped already (`|` included): no second escaping of cells
        sections.append((title, frame.to_markdown(index=False, disable_numparse=True)
                         + "".join(f"\n\n{note}" for note in notes)))
    return sections


def judgment_json(report: JudgmentReport) -> dict[str, object]:
    def records(frame: pd.DataFrame) -> list[dict]:
        # 15 decimals (pandas' default is 10): the statistics as computed, to 1e-15
        return json.loads(frame.to_json(orient="records", double_precision=15)
                          ) if len(frame) else []

    return {"header": report.header, "signatures": report.signatures,
            "records": records(report.records), "differences": records(report.differences),
            "agreement": records(report.agreement)}
