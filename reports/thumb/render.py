"""`thumb report`'s renderers: the tables of a `Report` as Markdown, HTML (with figures) or
JSON. Every number is shown with the signature of the metric that produced it. Stored text
(system and annotator names, signatures) is untrusted: Markdown escapes it for Markdown and
HTML, the HTML page is rendered with raw HTML off and a Content-Security-Policy that runs
no script and loads nothing but its own inline images and style.

Both documents open with the summary (`reports.thumb.summary`); the HTML page adds a title with
the project's name and date, a table of contents, the figures in a grid with captions and
a print stylesheet: pure HTML and CSS."""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from pathlib import Path

import pandas as pd

from metrics.stats.judgments import STATISTICS
from metrics.stats.significance import LEVEL, MIN_UNITS, NOISE_SES, Verdict, p_value_call
from reports.bison import labelled_bison_tables
from reports.judgments import JudgmentReport, ci_words, metrics_hint
from reports.numbers import ci_bounds, json_records, mean_with_ci
from reports.thumb.figures import WrittenFigure, draw_figures
from reports.thumb.summary import counted, header_count, subset_words, summarize
from reports.thumb.tables import Report, score_labels
from rubrics import Rubric, for_html, for_markdown

FORMATS = ("md", "html", "json")


def to_json(report: Report) -> str:
    return json.dumps({
        "header": report.header, "signatures": report.signatures,
        "self_references": report.self_references,
        "summary": summarize(report).sentences(),
        "systems": json_records(report.systems),
        "differences": json_records(report.differences),
        "strict": json_records(report.strict),
        "correlations": json_records(report.correlations),
        "williams": json_records(report.williams),
        "pairwise": json_records(report.pairwise), "table4": json_records(report.table4),
        "bison": {name: json_records(table) for name, table in report.bison.items()},
        "judgments": [judgment_json(judgments) for judgments in report.judgments],
        "retrieval": json_records(report.retrieval),
        "agreement": json_records(report.agreement),
        "progress": json_records(report.progress), "missing": report.missing,
        "broken_images": [{"image": item.key, "flagged_by": item.annotator,
                           "reason": item.reason} for item in report.broken],
        "gold": json_records(report.gold),
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


def with_intervals(frame: pd.DataFrame, value: str, notes: Notes) -> pd.DataFrame:
    """The frame with `value` shown as `value [CI]` (and the mark of its CI warning) in
    place of the `value`, `ci_low`, `ci_high` and `ci_warning` columns; named `value`
    alone where no row has a CI (`--bootstrap 0`)."""
    shown = frame.copy()
    shown[value] = _cells(frame, value, notes)
    any_ci = "ci_low" in frame and frame["ci_low"].notna().any()
    return shown.drop(columns=["ci_low", "ci_high", "ci_warning"], errors="ignore").rename(
        columns={value: f"{value} [CI]" if any_ci else value})


def _means(systems: pd.DataFrame, column: str, digits: int, notes: Notes, *,
           with_ci: bool = True) -> list[str]:
    """Each system's mean of `column`, with its CI (and the mark of its CI warning) where
    the systems table has one for that column and `with_ci` asks for it."""
    interval = [f"{column}_ci_low", f"{column}_ci_high", f"{column}_ci_warning"]
    rows = systems.reindex(columns=[column, *interval]).astype(
        {column: float, interval[0]: float, interval[1]: float})
    if not with_ci:
        return [mean_with_ci(mean, math.nan, math.nan, digits) for mean in rows[column]]
    return [mean_with_ci(mean, low, high, digits) + notes.mark(warning)
            for mean, low, high, warning in rows.itertuples(index=False)]


def _has_ci(systems: pd.DataFrame, column: str) -> bool:
    return f"{column}_ci_low" in systems and systems[f"{column}_ci_low"].notna().any()


def _systems_tables(systems: pd.DataFrame, metrics: list[str], rubric: Rubric, *,
                    every_ci: bool) -> tuple[str, str]:
    """Table 2 as two narrow tables: the human means of the rubric's scores and penalties
    and the metric means, one row per metric and one column per system; each mean with
    the CI the systems table computed for it (with `every_ci` off, Total's only: so the
    tables fit an 80-column terminal)."""
    human = systems[["system", "n"]].copy()
    notes = Notes(for_markdown)
    columns = [(d.key, d.short, 2) for d in rubric.dimensions]
    columns += [(p.key, p.abbreviation, 3) for p in rubric.penalties]
    for column, label, digits in [*columns, ("total", "Total", 2)]:
        with_ci = _has_ci(systems, column) and (column == "total" or every_ci)
        shown = f"{label} [CI]" if with_ci else label
        human[shown] = _means(systems, column, digits, notes, with_ci=with_ci)
    means = pd.DataFrame({metric: _means(systems, metric, 3, notes, with_ci=every_ci)
                          for metric in metrics},
                         index=systems["system"]).T.rename_axis("metric mean")
    return (markdown_table(human, index=False, disable_numparse=True,
                           colalign=("left", *["right"] * (len(human.columns) - 1)))
            + notes.markdown(),
            markdown_table(means, disable_numparse=True,
                           colalign=("left", *["right"] * len(means.columns)))
            if metrics else "no metrics computed")


def _with_cis(report: Report) -> bool:
    """Whether the report's numbers have CIs (`--bootstrap 0` leaves them out, and the
    headings must not promise them)."""
    return int(report.header.get("bootstrap", 0) or 0) > 0


def differences_frame(report: Report, notes: Notes) -> tuple[str, pd.DataFrame]:
    """Every pair of systems: the difference of mean Totals with its paired CI, and the
    call on it (`metrics.stats.significance`); with the sentence that says how it was
    computed and when a difference is called."""
    table = report.differences
    ci = f"{float(report.header.get('ci', 0.9)):.0%}"
    if not _with_cis(report):
        return ("Differences of mean Totals over the images both systems captioned (no CIs: "
                "--bootstrap 0, so none is called significant).",
                pd.DataFrame({"system": table["system"], "versus": table["versus"],
                              "Δ Total": _cells(table, "difference", notes),
                              "images": table["images"].astype(str)}))
    return ("Paired bootstrap over the images both systems captioned: a difference is "
            f"significant when its BCa CI leaves out 0, over {MIN_UNITS} images or more "
            "(fewer: too few), with neither limit within "
            f"{NOISE_SES:g} Monte-Carlo standard errors of 0 (borderline: another --seed "
            "may call it either way).", pd.DataFrame({
                "system": table["system"], "versus": table["versus"],
                f"Δ Total [{ci} CI]": _cells(table, "difference", notes),
                "images": table["images"].astype(str),
                "significant": [VERDICT_CELLS.get(verdict, "—")
                                for verdict in table["verdict"]]}))


# the differences table's "significant" column for each call (`metrics.stats.significance`)
VERDICT_CELLS = {Verdict.SIGNIFICANT: "yes", Verdict.NOT_SIGNIFICANT: "no",
                 Verdict.BORDERLINE: "borderline", Verdict.TOO_FEW: "too few images"}


def _differences_table(report: Report) -> str:
    """The differences between systems as a Markdown section: how, table, notes."""
    notes = Notes(for_markdown)
    how, shown = differences_frame(report, notes)
    return (how + "\n\n" + markdown_table(
        shown, index=False, disable_numparse=True,
        colalign=("left", "left", "right", "right", "left")[:len(shown.columns)])
        + notes.markdown())


def _bison_sections(bison: dict[str, pd.DataFrame]) -> list[tuple[str, str]]:
    """The BISON tables that have rows, each model named by a short label with its
    signature listed below (an empty table is a line under "Not computed yet")."""
    shown, labels = labelled_bison_tables(bison)
    sections = []
    for name, table in bison.items():
        if table.empty:
            continue
        notes = Notes(for_markdown)
        value = "accuracy" if "accuracy" in table else None
        shown_table = (with_intervals(shown[name], value, notes) if value
                       else noted(shown[name], notes))
        text = (markdown_table(shown_table, index=False, floatfmt=".3f")
                + notes.markdown())
        if "signature" in table:
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


def _markdown_tables(report: Report, figures: Sequence[tuple[str, str]] = (), *,
                     every_ci: bool = False) -> list[tuple[str, str]]:
    """(title, body) sections shared by the Markdown and HTML reports, each only where it
    has something to show: the progress first while no caption has a complete human
    rating (last once one has), the `figures` section after the systems tables, the
    tables not computed yet last. `every_ci`: every mean of the systems table with its CI
    (the HTML page has the width; an 80-column terminal has not)."""
    progress = _progress_sections(report)
    rating = any(note["key"] in ("captions", "human") for note in report.missing)
    early, late = (progress, []) if rating else ([], progress)
    return [*early, *_computed_tables(report, figures, every_ci=every_ci),
            *_gold_sections(report),
            *_broken_sections(report), *late, *_missing_sections(report)]


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


# the correlation methods in the order of their columns, with their names in a table
METHOD_NAMES = {"pearson": "Pearson r", "spearman": "Spearman ρ", "kendall-b": "τ-b",
                "kendall-c": "τ-c"}


def _correlation_sections(report: Report) -> list[tuple[str, str]]:
    """Every correlation, one section per human score: per subset, the metrics (rows) by
    method (columns), each value with its BCa CI (Kendall's tau has none); n in the
    heading, or a column where metrics are defined for different captions."""
    labels, ci = score_labels(report.rubric), f"{report.header.get('ci', 0.9):.0%}"
    sections = []
    for dimension, of_dimension in report.correlations.groupby("dimension", sort=False):
        parts = []
        for subset, rows in of_dimension.groupby("subset", sort=False):
            notes = Notes(for_markdown)
            methods = [m for m in METHOD_NAMES if m in set(rows["method"])]
            table = rows.assign(cell=_cells(rows, "r", notes)).pivot(
                index="metric", columns="method", values="cell").reindex(
                index=list(dict.fromkeys(rows["metric"])), columns=methods)
            table.columns = [METHOD_NAMES[m] for m in methods]
            counts = rows.groupby("metric", sort=False)["n"].max()
            if counts.nunique() > 1:
                table["n"] = counts.astype(str)
            count = f" (n = {counts.iloc[0]})" if counts.nunique() == 1 else ""
            words = subset_words(str(subset))
            parts.append(f"**{for_markdown(words[:1].upper() + words[1:])}**{count}"
                         "\n\n" + markdown_table(table.rename_axis("metric").reset_index(),
                                                 index=False, disable_numparse=True)
                         + notes.markdown())
        label = labels.get(str(dimension), str(dimension))
        methods = (f"Pearson r and Spearman ρ with {ci} BCa CIs over images; Kendall τ-b "
                   "and τ-c as point estimates." if _with_cis(report) else
                   "Pearson r, Spearman ρ, Kendall τ-b and τ-c as point estimates (no CIs: "
                   "--bootstrap 0).")
        sections.append((f"Correlation with {for_markdown(label)}",
                         "\n\n".join([methods, *parts])))
    return sections


def _retrieval_sections(table: pd.DataFrame) -> list[tuple[str, str]]:
    """The retrieval section, its module (and the retrieval metrics it brings) loaded only
    for a project that evaluated a model."""
    if table.empty:
        return []
    from reports.retrieval_text import retrieval_sections

    return retrieval_sections(table)


def _computed_tables(report: Report, figures: Sequence[tuple[str, str]] = (), *,
                     every_ci: bool) -> list[tuple[str, str]]:
    missing = {note["key"] for note in report.missing}
    others = [*_bison_sections(report.bison),
              *[section for judgments in report.judgments
                for section in judgment_sections(judgments)],
              *_retrieval_sections(report.retrieval)]
    if report.data.empty:  # no caption scored yet: only what else the project holds
        return others
    pairwise_notes = Notes(for_markdown)
    human, means = _systems_tables(report.systems, list(report.signatures), report.rubric,
                                   every_ci=every_ci)
    first, second = (d.short for d in report.rubric.dimensions)
    strict = ([] if report.strict.empty else [
        (f"Strictly best / worst in both {for_markdown(first)} and {for_markdown(second)} "
         "(THUMB Table 3)", markdown_table(report.strict, index=False))])
    correlation_sections = [
        ("Instance-level Pearson r (THUMB Table 4)",
         markdown_table(report.table4.assign(subset=report.table4["subset"].map(subset_label)),
                        index=False, floatfmt=".3f")),
        *_correlation_sections(report),
        *([] if report.pairwise.empty else [
            ("BISON-style pairwise choices (caption pairs of one image, Totals differ)",
             markdown_table(with_intervals(report.pairwise, "accuracy", pairwise_notes),
                            index=False, floatfmt=".3f") + pairwise_notes.markdown())]),
    ]
    # a table that cannot be computed yet is named under "Not computed yet" instead
    sections = [
        *([] if "human" in missing else [
            ("Systems: human scores (THUMB Table 2"
             + ("; CIs over images)" if _with_cis(report) else ")"), human)]),
        *([] if "human" in missing or report.differences.empty else [
            ("Differences between systems (human Total)", _differences_table(report))]),
        *([] if "metrics" in missing else [("Systems: metric means", means)]),
        *([] if "human" in missing else strict),
        *figures,
        *([] if "correlations" in missing else correlation_sections),
        *others,
    ]
    if not report.williams.empty:
        significant = williams_table(report)
        sections.append((WILLIAMS_TITLE, (
            markdown_table(significant, index=False, floatfmt=".3f", colalign=WILLIAMS_ALIGN)
            + "\n\n" + WILLIAMS_NOTE
            if len(significant) else no_williams(report))))
    return sections


WILLIAMS_TITLE = (f"Williams test: metric correlates better than versus (p < {LEVEL:g}, "
                  f"{MIN_UNITS} captions or more)")
WILLIAMS_NOTE = ("n: each pair of metrics is tested on the captions both score, so where a "
                 "metric is undefined for some captions its r here may differ from Table 4's, "
                 "which uses every caption that metric scores.")
# text left, r and p right, n left under its one-letter heading (the note explains it)
WILLIAMS_ALIGN = ("left", "left", "left", "left", "right", "right", "left", "right")


def no_williams(report: Report) -> str:
    """Why the Williams table lists no test: every test has too few captions to call
    (`metrics.stats.significance.p_value_call`), or none is significant."""
    if (report.williams["n"] < MIN_UNITS).all():
        return (f"Too few captions to call any Williams test (fewer than {MIN_UNITS} that "
                "both metrics score).")
    return "No metric's correlation with a human score is significantly higher than another's."


def subset_label(subset: str) -> str:
    """`all systems`, `w/o Human`: a correlation subset as every table names it (the
    paper's Table 4 wording; a sentence says it in words, `subset_words`)."""
    return "all systems" if subset == "all" else "w/o " + subset.removeprefix("without:")


def williams_table(report: Report) -> pd.DataFrame:
    """The significant Williams tests (`metrics.stats.significance.p_value_call`: p below its
    level over enough captions) as the report shows them: metric, versus, dim, subset, r,
    r vs, n (the captions both metrics score), p; t is in the JSON (80 columns)."""
    called = [p_value_call(p, n).significant
              for p, n in zip(report.williams["p"], report.williams["n"], strict=True)]
    significant = report.williams[called].rename(
        columns={"dimension": "dim", "r_metric": "r", "r_versus": "r vs"})
    significant = significant[["metric", "versus", "dim", "subset", "r", "r vs", "n", "p"]]
    return significant.assign(dim=significant["dim"].map(score_labels(report.rubric)),
                              subset=significant["subset"].map(subset_label))


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
                  + _beside(report.self_references.get(label), for_markdown)
                  for label, signature in report.signatures.items()]
    return lines


def _beside(note: str | None, escape: Callable[[str], str]) -> str:
    """A count of the data shown after a signature, in parentheses: never part of it
    (`48 self-references excluded`, `reports.scoring.self_reference_notes`)."""
    return f" ({escape(note)})" if note else ""


def _summary_markdown(report: Report) -> str:
    return "\n".join(f"- {for_markdown(sentence)}" for sentence in summarize(report).sentences())


def _figures_markdown(figures: Sequence[WrittenFigure]) -> str:
    """A link to each figure's file beside the report (a link, not an image: the Markdown
    makes no request of its own when rendered) with its numbered caption."""
    return "\n".join(f"- *Figure {number}.* {for_markdown(figure.data.caption)} "
                     f"[{figure.path.name}]({figure.path.name})"  # our file names
                     for number, figure in enumerate(figures, start=1))


def _title(report: Report) -> str:
    return str(report.header.get("project") or "thumb-tui project")


def to_markdown(report: Report, figures: Sequence[WrittenFigure] = (),
                generated: date | None = None) -> str:
    generated = generated or datetime.now(UTC).date()
    lines = [f"# thumb-tui report: {for_markdown(_title(report))}", "",
             f"Written {generated.isoformat()}.", "", "## Summary", "",
             _summary_markdown(report), "", "## Settings", "", *_header_lines(report), ""]
    figures_section = [("Figures", _figures_markdown(figures))] if figures else []
    for title, table in _markdown_tables(report, figures_section):
        lines += [f"## {title}", "", table, ""]
    return "\n".join(lines) + "\n"


def _figures_html(figures: Sequence[WrittenFigure]) -> str:
    """The figures in a grid, each inlined as a data: image (the only images the policy
    allows) with its numbered caption; a figure of several panels spans the grid."""
    items = []
    for number, figure in enumerate(figures, start=1):
        encoded = base64.b64encode(figure.path.read_bytes()).decode("ascii")
        wide = ' class="wide"' if len(figure.data.bars) > 1 else ""
        items.append(f'<figure{wide}><img alt="{for_html(figure.data.title)}" '
                     f'src="data:image/svg+xml;base64,{encoded}"><figcaption><b>Figure '
                     f'{number}.</b> {for_html(figure.data.caption)}</figcaption></figure>')
    return f'<div class="figures">{"".join(items)}</div>'


class _Html(str):
    """A section body built here as HTML from escaped parts (every other body is Markdown,
    rendered with raw HTML off)."""


def _anchor(index: int, title: str) -> str:
    """A section's id: its number and the ASCII words of its title."""
    words = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:40].rstrip("-")
    return f"s{index}-{words}" if words else f"s{index}"


def _meta_line(report: Report, generated: date) -> str:
    """Under the title: the date, rubric and size of the project, with how much of it is
    rated while that is not all (escaped)."""
    header = report.header
    parts = [generated.isoformat(), *[f"rubric {r}" for r in header.get("rubric") or []]]
    for key in ("captions", "images", "systems", "annotators"):
        count = header_count(header, key)
        if not count and key in ("systems", "annotators"):
            continue
        part = counted(count, key[:-1])
        if f"rated_{key}" in header and (rated := header_count(header, f"rated_{key}")) < count:
            part += f" ({rated} rated)"
        parts.append(part)
    parts.append(str(header.get("tool", "thumb-tui")))
    return " · ".join(for_html(str(part)) for part in parts)


def to_html(report: Report, figures: Sequence[WrittenFigure] = (),
            generated: date | None = None) -> str:
    import markdown_it

    generated = generated or datetime.now(UTC).date()
    # raw HTML off: whatever the Markdown holds is shown as text, never parsed as a tag
    renderer = markdown_it.MarkdownIt("commonmark", {"html": False}).enable("table")
    sections = _markdown_tables(report, [("Figures", _Html(_figures_html(figures)))]
                                if figures else [], every_ci=True)
    sections.append(("Settings and metric signatures", "\n".join(_header_lines(report))))
    contents, body = [], []
    for index, (title, text) in enumerate(sections, start=1):
        anchor, heading = _anchor(index, title), renderer.renderInline(title)
        html = text if isinstance(text, _Html) else renderer.render(text)
        # a wide table scrolls in its own box: the page never grows wider than the window
        html = html.replace("<table>", '<div class="table-wrap"><table>').replace(
            "</table>", "</table></div>")
        contents.append(f'<li><a href="#{anchor}">{heading}</a></li>')
        body.append(f'<section id="{anchor}"><h2>{heading}</h2>{html}</section>')
    summary = "".join(f"<li>{for_html(sentence)}</li>"
                      for sentence in summarize(report).sentences())
    page = (f'<header><p class="kicker">thumb-tui report · THUMB caption evaluation</p>'
            f"<h1>{for_html(_title(report))}</h1>"
            f'<p class="meta">{_meta_line(report, generated)}</p></header>'
            f'<section id="summary" class="summary"><h2>Summary</h2><ul>{summary}</ul>'
            f'</section><nav class="contents" aria-label="Contents"><h2>Contents</h2><ol>'
            f'{"".join(contents)}</ol></nav>{"".join(body)}')
    return HTML_PAGE.format(policy=CONTENT_SECURITY_POLICY, style=STYLE,
                            title=for_html(f"{_title(report)} · thumb-tui report"), body=page)


# No script runs, nothing is fetched: only the page's own style and its data: images.
CONTENT_SECURITY_POLICY = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
                           "base-uri 'none'; form-action 'none'")
STYLE = """
:root{--ink:#1d2330;--muted:#5b6475;--rule:#d9dee7;--accent:#0072B2;--band:#f3f6fa}
*{box-sizing:border-box}
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,
sans-serif;color:var(--ink);max-width:1180px;margin:0 auto;padding:28px 40px 64px}
header{border-bottom:3px solid var(--accent);padding-bottom:12px;margin-bottom:20px}
.kicker{text-transform:uppercase;letter-spacing:.08em;font-size:12px;color:var(--accent);
margin:0}
h1{font-size:30px;line-height:1.2;margin:4px 0 6px;overflow-wrap:anywhere}
.meta{color:var(--muted);margin:0}
h2{font-size:20px;margin:34px 0 10px;padding-bottom:4px;border-bottom:1px solid var(--rule)}
h2 code,nav code{font-size:inherit}
.summary{background:var(--band);border-left:4px solid var(--accent);border-radius:4px;
padding:2px 22px 10px}
.summary h2{border:0;margin:14px 0 4px}
.summary ul{margin:0;padding-left:20px}
.summary li{margin:6px 0}
nav.contents ol{columns:2;column-gap:48px;margin:0;padding-left:24px}
nav.contents li{margin:2px 0;break-inside:avoid}
a{color:var(--accent);text-decoration:none}
a:hover{text-decoration:underline}
.table-wrap{overflow-x:auto;margin:8px 0 6px}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;font-size:14px}
th,td{padding:4px 12px;border-bottom:1px solid var(--rule);text-align:right;
white-space:nowrap}
th{border-bottom:2px solid var(--ink);font-weight:600;vertical-align:bottom}
th:first-child,td:first-child{text-align:left}
tbody tr:nth-child(even){background:#fafbfd}
section p{margin:8px 0;overflow-wrap:anywhere}
section ul{overflow-wrap:anywhere}
section:last-of-type>ul:first-of-type{columns:3;column-gap:32px}
.figures{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:18px}
figure{margin:0;border:1px solid var(--rule);border-radius:4px;padding:10px;
background:#fff}
figure.wide{grid-column:1/-1}
figure img{display:block;width:100%;height:auto}
figure.wide img{max-width:900px;margin:auto}
figcaption{font-size:13px;color:var(--muted);margin-top:6px}
@media print{
@page{margin:16mm 14mm}
body{font-size:10pt;max-width:none;padding:0}
h2{break-after:avoid}
table,figure,.summary{break-inside:avoid}
.table-wrap{overflow:visible}
th,td{padding:2px 8px}
tbody tr:nth-child(even){background:none}
nav.contents a{color:inherit}
a{color:inherit}
}
"""
HTML_PAGE = ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
             "<meta http-equiv='Content-Security-Policy' content=\"{policy}\">"
             "<meta name='viewport' content='width=device-width, initial-scale=1'>"
             "<title>{title}</title><style>{style}</style></head>"
             "<body>{body}</body></html>\n")


def write_report(report: Report, folder: Path, fmt: str, *,
                 print_figures: bool = False) -> Path:
    """Write the report (and its figures: SVG, and with `print_figures` also PDF and
    300-dpi PNG) into `folder`; return the main file."""
    if fmt not in FORMATS:
        raise ValueError(f"report format must be one of {', '.join(FORMATS)}")
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "json":
        path = folder / "report.json"
        path.write_text(to_json(report), encoding="utf-8")
        return path
    figures = draw_figures(report, folder)
    if print_figures:
        from reports.thumb.print_figures import write_print_figures

        write_print_figures([figure.data for figure in figures], folder)
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
    records = report.records.copy()
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
                       f"{records['n'].iloc[0]}; {ci_words(report)})",
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
            frames.append((f"{name}: differences between metrics "
                           f"({ci_words(report, paired=True)}; Williams' test one-sided, "
                           "for Pearson)",
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
        frames.append((f"{name}: accuracy against the majority human choice "
                       f"({ci_words(report)})", table.reset_index(), notes.lines()))
    agreement = report.agreement
    if len(agreement):
        notes = Notes(escape)
        table = pd.DataFrame({
            "statistic": agreement["statistic"],
            "value": _cells(agreement.fillna({"value": float("nan")}), "value", notes),
            "targets": agreement["n"], "judges": agreement["raters"],
            "note": agreement["note"].fillna("").map(escape)})
        frames.append((f"{name}: agreement among the judges (Krippendorff's alpha, "
                       f"{ci_words(report)})", table, notes.lines()))
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
    return {"header": report.header, "signatures": report.signatures,
            "self_references": report.self_references,
            "records": json_records(report.records),
            "differences": json_records(report.differences),
            "agreement": json_records(report.agreement)}
