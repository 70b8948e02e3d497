"""Terminal renderings of the agreement, BISON and judgment-set tables: 80 columns wide
(a table that would be wider gets one row per pair of statistic and score, or is split),
with long signatures and explanations moved under the tables instead of into every row."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterator

import pandas as pd
from rich.cells import cell_len
from tabulate import tabulate

from metrics.stats.agreement import PAIR_COLUMNS, over_every_pair
from reports.bison import labelled_bison_tables
from reports.judgments import JudgmentReport, metrics_hint
from reports.numbers import ci_bounds, is_missing
from reports.terminal import TERMINAL_WIDTH, fitted, text_width
from reports.thumb.render import (
    Notes,
    header_value,
    judgment_frames,
    markdown_table,
    with_intervals,
)
from rubrics import THUMB_1_0, Rubric
from rubrics.escape import for_markdown, printable

KIND_LABELS = {
    "blind": "blind double rating: two independent stage-1 ratings",
    "stage1-vs-stage2": "stage 1 vs stage 2: the second annotator SAW the first's scores",
}
NO_PAIRS = "No pairs of ratings to compare yet (blind double ratings or stage 2)."
STATISTICS = ("kappa", "kappa_linear", "kappa_quadratic", "alpha_ordinal", "alpha_interval",
              "exact", "within_1", "change_rate")



def pair_blocks(of_kind: pd.DataFrame) -> Iterator[tuple[tuple[str, str] | None, pd.DataFrame]]:
    """One kind's agreement records by compared pair: every pair together first (no
    annotators), unless there is one pair of annotators, which that block would repeat,
    then each pair with its two annotators."""
    overall = over_every_pair(of_kind)
    pairs = of_kind[~overall].groupby(PAIR_COLUMNS, sort=False)
    if pairs.ngroups != 1:
        yield None, of_kind[overall]
    for (first, second), part in pairs:
        yield (str(first), str(second)), part


def quoted(name: str) -> str:
    """A stored name in double quotes, its own quotes and backslashes escaped, so that two
    names joined in one label read as two whatever characters they hold (`"a|b" & "c"`);
    the caller still escapes the label for its medium."""
    return json.dumps(name, ensure_ascii=False)


def pair_label(annotators: tuple[str, str] | None) -> str:
    """`"ann" & "bob"`, or `all pairs` for the records over every pair."""
    return "all pairs" if annotators is None else " & ".join(map(quoted, annotators))


def dimension_labels(rubric: Rubric) -> dict[str, str]:
    """Column labels of the compared dimensions: P, R, fluency>0, Total for THUMB (the
    rubric's own labels, control characters shown as escapes)."""
    labels = {d.key: printable(d.short, newlines=False) for d in rubric.dimensions}
    if rubric.has_penalty("fluency"):
        label = rubric.penalty("fluency").label.lower()
        labels["fluency_error"] = f"{printable(label, newlines=False)}>0"
    return {**labels, "total": "Total"}


def agreement_text(report: pd.DataFrame, *, markdown: bool, ci: float,
                   bootstrap: int, rubric: Rubric = THUMB_1_0) -> str:
    """One block per kind of pair and per pair: statistics by dimension (CI under the
    value in the terminal, beside it in Markdown), footnotes for undefined values, then
    the confusion matrices of the rubric's scores and "fluency penalty > 0"."""
    labels = dimension_labels(rubric)
    lines = [f"Agreement ({ci:.0%} BCa bootstrap CIs over images, {bootstrap} resamples)"
             if bootstrap else "Agreement (no CIs: --bootstrap 0)", ""]
    if report.empty:
        return "\n".join([*lines, NO_PAIRS])
    escape = for_markdown if markdown else (lambda text: printable(text, newlines=False))
    for kind, of_kind in report.groupby("kind", sort=False):
        lines += [("## " if markdown else "") + KIND_LABELS.get(str(kind), str(kind)), ""]
        for annotators, part in pair_blocks(of_kind):
            first = part.iloc[0]
            lines += [("### " if markdown else "") + escape(
                f"{pair_label(annotators)}: "
                f"{first['n']} caption{'' if first['n'] == 1 else 's'}, "
                f"{first['images']} image{'' if first['images'] == 1 else 's'}"), ""]
            confusion = part["statistic"].str.startswith("confusion:")
            lines += _statistics_table(part[~confusion], markdown, labels)
            lines += _confusion_lines(part[confusion], str(kind), annotators, markdown,
                                      rubric, labels, escape)
    return "\n".join(lines)


def statistics_rows(part: pd.DataFrame, labels: dict[str, str], separator: str = " "
                    ) -> tuple[list[list[str]], list[str]]:
    """A pair's statistics by dimension as rows of cells (each value with its CI after
    `separator`) and the numbered notes their marks point to: why a value is undefined,
    a CI's warning, why a value has no CI."""
    notes: list[str] = []

    def footnote(note: str) -> str:
        if note not in notes:
            notes.append(note)
        return f"({notes.index(note) + 1})"

    rows = []
    for statistic in STATISTICS:
        row: list[str] = [statistic]
        for dimension in labels:
            match = part[(part["statistic"] == statistic) & (part["dimension"] == dimension)]
            if match.empty:
                row.append("")
                continue
            record = match.iloc[0]
            if is_missing(record["value"]):
                row.append("undefined " + footnote(
                    str(record["note"]).removeprefix("undefined: ")))
                continue
            cell = f"{record['value']:.3f}"
            if not is_missing(record["ci_low"]):
                warning = record.get("ci_warning")
                if not is_missing(warning):
                    cell += " " + footnote(str(warning))
                cell += separator + ci_bounds(record["ci_low"], record["ci_high"])
            elif not is_missing(record["note"]):
                cell += " " + footnote(str(record["note"]))
            row.append(cell)
        rows.append(row)
    return rows, notes


def _statistics_table(part: pd.DataFrame, markdown: bool, labels: dict[str, str]
                      ) -> list[str]:
    """Statistics by dimension (the CI under the value in the terminal); undefined values
    and CI-less ones point to numbered notes."""
    rows, notes = statistics_rows(part, labels, " " if markdown else "\n")
    headers = ["statistic", *labels.values()]
    # the cells are text already (0.700, never 0.7): not parsed again as numbers
    if markdown:
        table = markdown_table(pd.DataFrame(rows, columns=headers), index=False,
                               disable_numparse=True)
    else:
        table = tabulate(rows, headers=headers, tablefmt="simple", stralign="left",
                         disable_numparse=True)
        if text_width(table) > TERMINAL_WIDTH:  # one row per statistic and dimension
            table = tabulate([[row[0], label, cell.replace("\n", " ")]
                              for row in rows for label, cell in zip(labels.values(), row[1:],
                                                                      strict=True) if cell],
                             headers=["statistic", "score", "value [CI]"], tablefmt="simple",
                             stralign="left", disable_numparse=True)
    lines = [table, ""]
    lines += [f"({number}) {note}" for number, note in enumerate(notes, start=1)]
    return lines + ([""] if notes else [])


def confusion_axes(kind: str, annotators: tuple[str, str] | None) -> str:
    """What the rows and columns of a pair's confusion matrices are (stored names quoted,
    not yet escaped for a medium)."""
    if kind == "stage1-vs-stage2":
        return "rows: stage 1, columns: stage 2"
    if annotators is None:
        return ("rows: each pair's first rater (who rated the pair's first shared caption "
                "first), columns: the other")
    first, second = map(quoted, annotators)
    return f"rows: {first}, columns: {second}"


def confusion_matrices(matrices: pd.DataFrame, rubric: Rubric, labels: dict[str, str]
                       ) -> list[tuple[str, list[str], list[list[object]]]]:
    """A pair's counts of (first rating, second rating), one matrix per compared dimension
    but Total: (label, the levels, rows of [level, count…])."""
    blocks = []
    for dimension in [label for label in labels if label != "total"]:
        counts = matrices[matrices["dimension"] == dimension]
        if counts.empty:
            continue
        cells = counts["statistic"].str.removeprefix("confusion:").str.split("->")
        frame = pd.DataFrame({"a": [float(c[0]) for c in cells],
                              "b": [float(c[1]) for c in cells],
                              "count": counts["value"].to_numpy(int)})
        values = ([0.0, 1.0] if dimension == "fluency_error"
                  else [float(level) for level in rubric.dimension(dimension).scale])
        matrix = (frame.pivot_table(index="a", columns="b", values="count", aggfunc="sum")
                  .reindex(index=values, columns=values, fill_value=0).fillna(0).astype(int))
        names = ["no", "yes"] if dimension == "fluency_error" else [f"{v:g}" for v in values]
        rows = [[names[i], *matrix.iloc[i].tolist()] for i in range(len(values))]
        blocks.append((labels[dimension], names, rows))
    return blocks


def _confusion_lines(matrices: pd.DataFrame, kind: str, annotators: tuple[str, str] | None,
                     markdown: bool, rubric: Rubric, labels: dict[str, str],
                     escape: Callable[[str], str]) -> list[str]:
    """Counts of (first rating, second rating) as matrices, side by side in the terminal."""
    if matrices.empty:
        return []
    blocks = [markdown_table(pd.DataFrame(rows, columns=[label, *names]), index=False)
              if markdown else _matrix_text(label, names, rows)
              for label, names, rows in confusion_matrices(matrices, rubric, labels)]
    title = escape(f"Confusion matrices ({confusion_axes(kind, annotators)}):")
    if markdown:
        return [title, "", *(line for block in blocks for line in (block, ""))]
    return [title, "", *_side_by_side(blocks), ""]


def _matrix_text(label: str, names: list[str], rows: list[list[object]]) -> str:
    """A compact count matrix: row names under the label, four columns per count."""
    width = max(len(label), *(len(name) for name in names))
    lines = [label.ljust(width) + "".join(f"{name:>5}" for name in names)]
    lines += [str(row[0]).ljust(width) + "".join(f"{count:>5}" for count in row[1:])
              for row in rows]
    return "\n".join(lines)


def _side_by_side(blocks: list[str], gap: int = 4) -> list[str]:
    """The blocks side by side, as many to a row as fit TERMINAL_WIDTH columns."""
    groups: list[list[str]] = []
    width = 0
    for block in blocks:
        if groups and width + gap + text_width(block) <= TERMINAL_WIDTH:
            groups[-1].append(block)
            width += gap + text_width(block)
        else:
            groups.append([block])
            width = text_width(block)
    lines: list[str] = []
    for group in groups:
        if lines:
            lines.append("")
        lines += _beside(group, gap)
    return lines


def _beside(blocks: list[str], gap: int) -> list[str]:
    split = [block.splitlines() for block in blocks]
    widths = [max(cell_len(line) for line in lines) for lines in split]
    height = max(len(lines) for lines in split)
    out = []
    for row in range(height):
        parts = [_padded(lines[row] if row < len(lines) else "", width)
                 for lines, width in zip(split, widths, strict=True)]
        out.append((" " * gap).join(parts).rstrip())
    return out


def _padded(line: str, width: int) -> str:
    return line + " " * (width - cell_len(line))


def bison_text(tables: dict[str, pd.DataFrame], header: dict[str, object]) -> str:
    """The BISON tables under the header of their CI settings (`bootstrap: 0` alone when
    there are none), each accuracy with its CI beside it, each model named by a short
    label whose signature is listed once below."""
    shown, labels = labelled_bison_tables(tables)
    lines = ([f"{key.replace('_', ' ')}: {terminal_text(header_value(value))}"
              for key, value in header.items()] if header["bootstrap"]
             else ["bootstrap: 0 (no CIs)"])
    for name, table in shown.items():
        lines += ["", name]
        notes = Notes()
        lines.append(with_intervals(table, "accuracy", notes).to_string(
            index=False, float_format=lambda v: f"{v:.3f}") if len(table) else "(none)")
        lines += notes.lines()
    if labels:
        lines += ["", "signatures:"]
        lines += [f"  {label}: {signature}" for signature, label in labels.items()]
    return "\n".join(lines)


def terminal_text(value: object) -> str:
    """Stored text for one line of a terminal table (control characters shown escaped)."""
    return printable(str(value), newlines=False)


def _keys_wrapped(frame: pd.DataFrame, width: int = TERMINAL_WIDTH) -> pd.DataFrame:
    """`frame` with each cell of its first column (what names a row: a metric label, or two
    compared) broken at spaces onto lines narrow enough that it and the widest other
    column fit `width` side by side: `fitted` splits the other columns, never the key."""
    key, others = frame.columns[0], frame.columns[1:]
    widest = max((text_width("\n".join([str(column), *frame[column]])) for column in others),
                 default=0)
    room = max(width - widest - 2, len(str(key)))  # tabulate puts 2 spaces between columns

    def wrapped(cell: str) -> str:
        if text_width(cell) <= room:
            return cell
        return "\n".join(textwrap.wrap(cell, room, break_long_words=False,
                                       break_on_hyphens=False))

    return frame.assign(**{key: frame[key].map(wrapped)})


def judgment_text(report: JudgmentReport) -> str:
    """A judgment set's report for the terminal: its header, then each table with every
    CI under its value, then the signatures."""
    lines = [f"{key.replace('_', ' ')}: {terminal_text(header_value(value))}"
             for key, value in report.header.items() if key != "tie_rule"]
    if "tie_rule" in report.header:
        lines.append(f"tie rule: {report.header['tie_rule']}")
    if (hint := metrics_hint(report, terminal_text)) is not None:
        lines += ["", hint]
    for title, frame, notes in judgment_frames(report, terminal_text):
        stacked = _keys_wrapped(frame.map(lambda cell: str(cell).replace(" [", "\n[")))

        def table(columns: list[str], stacked: pd.DataFrame = stacked) -> str:
            return tabulate(stacked[columns], headers="keys", showindex=False,
                            disable_numparse=True)

        lines += ["", *textwrap.wrap(title, TERMINAL_WIDTH),
                  *fitted(list(stacked.columns), table), *notes]
    if report.signatures:
        lines += ["", "signatures:"]
        lines += [f"  {terminal_text(label)}: {signature}"
                  + (f" ({note})" if (note := report.self_references.get(label)) else "")
                  for label, signature in report.signatures.items()]
    return "\n".join(lines)
