"""`thumb report` defects a new-user trial found: a corpus-level metric computed before
captions were imported (out of date, then superseded by its recomputation), Williams'
table without its n, LaTeX reports that dropped sections, the summary of a project that
holds only judgment sets, and `$` left to Markdown's math."""

from __future__ import annotations

import csv
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import markdown_it
import numpy as np
import pytest
from typer.testing import CliRunner

from metrics.registry import MetricOptions
from reports.scoring import compute_metrics
from reports.thumb import latex
from reports.thumb.latex import numeric
from reports.thumb.render import write_report
from reports.thumb.tables import build_report, earlier_corpora
from rubrics import for_markdown
from storage import import_captions, open_database
from storage.metric_scores import store_metric_scores
from tests.conftest import SAMPLE_CSV
from tests.test_latex import check_tables, compiled
from thumb_tui.cli import app

SAMPLE = SAMPLE_CSV.parent
runner = CliRunner()
CIDER = MetricOptions(tokenizer="ptb-python")


def thumb(db: Path, *args: object):
    result = runner.invoke(app, ["--db", str(db), *map(str, args)])
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def rated_project(folder: Path):
    engine = open_database(folder / "p.db")
    import_captions(engine, SAMPLE_CSV, actor="t")
    import_captions(engine, SAMPLE / "example_ratings.csv", actor="t")
    return engine


def more_captions(folder: Path) -> Path:
    """Four more captions by the sample's systems, of a new image: every system's corpus
    changes."""
    with SAMPLE_CSV.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    shutil.copytree(SAMPLE / "images", folder / "images")
    path = folder / "more.csv"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({**row, "image_id": "img01b", "caption": row["caption"] + " again"}
                         for row in rows[:4])
    return path


# ---------------------------------------------------------------------------------------
# 1. a corpus-level metric's scores after captions were imported

def test_of_signatures_that_differ_only_in_their_corpus_digest_the_newest_is_current():
    old = "cider-d|n:4|corpus:per-system#aaaa|clean:thumb|thumb-tui:1"
    new = "cider-d|n:4|corpus:per-system#bbbb|clean:thumb|thumb-tui:1"
    pooled = "cider-d|n:4|corpus:pooled#cccc|clean:thumb|thumb-tui:1"  # another setting
    other_tool = "cider-d|n:4|corpus:per-system#dddd|clean:thumb|thumb-tui:2"
    bleu = "bleu|refs:image|thumb-tui:1"  # no corpus: never superseded by time
    at = [datetime(2026, 1, day, tzinfo=UTC) for day in range(1, 7)]
    times = {old: at[1], new: at[2], pooled: at[0], other_tool: at[0], bleu: at[0],
             "bleu|refs:x|thumb-tui:1": at[3]}
    assert earlier_corpora(times) == {old: new}
    assert earlier_corpora({**times, old: at[5]}) == {new: old}  # newest, not larger digest


def test_an_old_form_signature_on_an_earlier_corpus_is_superseded_by_the_current_form():
    """Written before signatures left out the data counts (`nrefs:`, `self:excluded(N)`),
    on a corpus that has changed since: the current run replaces it all the same."""
    old_form = ("cider-d|n:4|corpus:per-system#aaaa|refs:image|nrefs:4|self:excluded(3)|"
                "clean:thumb|thumb-tui:1")
    current = "cider-d|n:4|corpus:per-system#bbbb|refs:image|self:excluded|clean:thumb|thumb-tui:1"
    kept = "cider-d|n:4|corpus:per-system#cccc|refs:image|self:kept|clean:thumb|thumb-tui:1"
    at = [datetime(2026, 1, day, tzinfo=UTC) for day in range(1, 4)]
    assert earlier_corpora({old_form: at[0], current: at[1], kept: at[0]}) == {
        old_form: current}


def test_a_corpus_level_metric_computed_before_an_import_is_flagged_then_superseded(
        tmp_path):
    engine = rated_project(tmp_path)
    compute_metrics(engine, ["cider-d", "bleu"], CIDER)
    import_captions(engine, more_captions(tmp_path), actor="t")

    report = build_report(engine, bootstrap=0)
    stale = report.header["metrics_out_of_date"]
    assert set(stale) == {"cider-d", "bleu"}  # bleu misses the new captions too
    assert stale["cider-d"].startswith("scores 60 of the project's 64 captions; its corpus "
                                       "is no longer the project's (or its last run was "
                                       "interrupted), so every score shown may change")
    assert stale["cider-d"].endswith("update: thumb metrics compute --metric cider-d")
    assert "corpus" not in stale["bleu"]  # a per-caption metric's scores stay right
    written = {fmt: write_report(report, tmp_path / fmt, fmt).read_text(encoding="utf-8")
               for fmt in ("md", "html", "json")}
    assert "cider-d is out of date: it scores 60 of the project&#x27;s 64 captions" in (
        written["html"])
    summary = written["md"].split("## Settings")[0]
    assert "cider-d is out of date" in summary and "thumb metrics compute --metric cider-d" \
        in summary
    assert json.loads(written["json"])["header"]["metrics_out_of_date"] == stale

    compute_metrics(engine, ["cider-d", "bleu"], CIDER)
    report = build_report(engine, bootstrap=0)
    assert "metrics_out_of_date" not in report.header
    assert [label for label in report.signatures if label.startswith("cider-d")] == [
        "cider-d"]
    current = report.signatures["cider-d"]
    [(old, note)] = report.header["metrics_superseded"].items()
    assert old.startswith("cider-d (per-system#") and old[-11:-1] not in current
    assert note.endswith(f"superseded by {current.split('corpus:')[1].split('|')[0]}; "
                         "left out")
    assert set(report.table4["metric"]) == set(report.signatures)
    text = write_report(report, tmp_path / "again", "md").read_text(encoding="utf-8")
    assert f"- metrics superseded: {old}: computed on an earlier corpus" in text


# ---------------------------------------------------------------------------------------
# 2. Williams' table: n, and why its r may differ from Table 4's

def test_the_williams_table_gives_n_and_says_why_its_r_may_differ_from_table_4(tmp_path):
    engine = rated_project(tmp_path)
    report = build_report(engine, bootstrap=0)  # the captions and their Totals
    data = report.data.sort_values("caption_id")
    rng = np.random.default_rng(0)
    close = data["total"].to_numpy() + rng.normal(0, 0.2, len(data))  # tracks the Total
    noise = rng.normal(0, 1, len(data))
    undefined = (data["image_id"] == data["image_id"].iloc[0]).to_numpy()
    ids = data["caption_id"].tolist()
    store_metric_scores(engine, "close", "close|thumb-tui:1", ids, close)
    store_metric_scores(engine, "noise", "noise|thumb-tui:1", ids, noise,
                        reasons=["no references" if u else None for u in undefined])
    report = build_report(engine, bootstrap=0)
    test = report.williams.query("metric == 'close' and dimension == 'total' "
                                 "and subset == 'all'").iloc[0]
    table4 = report.table4.set_index(["metric", "subset"]).loc[("close", "all"), "Total"]
    assert test["n"] == len(data) - undefined.sum() and test["r_metric"] != table4

    text = write_report(report, tmp_path / "md", "md").read_text(encoding="utf-8")
    section = text.split("## Williams test")[1].split("\n## ")[0]
    header, _, *rows = [line for line in section.splitlines() if line.startswith("|")]
    columns = [cell.strip() for cell in header.strip("|").split("|")]
    assert columns == ["metric", "versus", "dim", "subset", "r", "r vs", "n", "p"]
    row = next(r for r in rows if r.startswith("| close") and "| Total " in r
               and "| all systems " in r)
    assert row.split("|")[7].strip() == str(test["n"])
    assert "may differ from Table 4's" in section
    html = write_report(report, tmp_path / "html", "html").read_text(encoding="utf-8")
    assert '<th style="text-align:left">n</th>' in html.split("Williams test")[-1]
    (tmp_path / "tex" / "tables").mkdir(parents=True)
    latex.write_report(report, tmp_path / "tex", tmp_path / "tex" / "tables")
    [[header, *rows]] = check_tables((tmp_path / "tex" / "tables" / "williams.tex").read_text(
        encoding="utf-8"))
    assert header == ["metric", "versus", "dim", "subset", "r", "r vs", "n", "p"]
    row = next(row for row in rows if row[:4] == ["close", "noise", "Total", "all systems"])
    assert row[4:7] == [f"{test['r_metric']:.3f}", numeric(f"{test['r_versus']:.3f}"),
                        str(test["n"])]


# ---------------------------------------------------------------------------------------
# 3. the LaTeX report: every section rendered or named as left out

def test_the_latex_report_renders_or_names_every_section(tmp_path):
    folder = tmp_path / "project"
    shutil.copytree(SAMPLE / "images", folder / "images")
    db = folder / "p.db"
    thumb(db, "import", SAMPLE_CSV)
    thumb(db, "import", SAMPLE / "example_ratings.csv")
    thumb(db, "metrics", "compute", "--metric", "bleu", "--metric", "rouge-l")
    thumb(db, "judgments", "import", SAMPLE / "judgments.csv", "--name", "j & 50% $x$",
          "--scale", "1-4", "--references", SAMPLE / "references.csv")
    thumb(db, "metrics", "compute", "--judgments", "j & 50% $x$", "--metric", "bleu")
    result = thumb(db, "report", "--format", "latex", "--out", tmp_path / "tex",
                   "--bootstrap", "0")
    tex = (tmp_path / "tex" / "report.tex").read_text(encoding="utf-8")
    for table in ("differences", "pairwise", "table4"):
        assert rf"\input{{tables/{table}}}" in tex
    assert r"\subsection*{Summary}" in tex and "agrees best with the human Total" in tex
    assert r"\subsection*{Judgment set j \& 50\% \$x\$}" in tex
    assert "j & 50%" not in tex  # escaped wherever the name is
    assert r"\subsection*{Not in this LaTeX report}" in tex
    assert r"\item the figures: thumb report -{}-format md or html has them" in tex
    assert "not in the LaTeX report: the figures" in result.stderr
    differences = (tmp_path / "tex" / "tables" / "differences.tex").read_text(
        encoding="utf-8")
    assert r"Human & VinVL-base & 0.760 & 15 \\" in differences
    if shutil.which("pdflatex"):
        shutil.copytree(tmp_path / "tex", tmp_path / "compile")
        compiled(tmp_path / "compile", "report.tex")


# ---------------------------------------------------------------------------------------
# 4. the summary of a project of judgment sets only

def test_the_summary_of_a_judgments_only_project_names_the_best_agreeing_metric(tmp_path):
    from reports.thumb.summary import summarize

    db = tmp_path / "j.db"
    thumb(db, "judgments", "import", SAMPLE / "judgments.csv", "--name", "s", "--scale",
          "1-4", "--references", SAMPLE / "references.csv")
    thumb(db, "judgments", "import", SAMPLE / "judgment_pairs.csv", "--name", "pairs",
          "--kind", "pairwise", "--references", SAMPLE / "references.csv")
    thumb(db, "metrics", "compute", "--judgments", "s", "--metric", "bleu", "--metric",
          "rouge-l")
    report = build_report(open_database(db), bootstrap=0)
    sentences = summarize(report).sentences()
    assert sentences[0] == "The project has no captions of its own."
    assert not any("no caption has a human or metric score" in s for s in sentences)
    [scores] = [j for j in report.judgments if j.info.name == "s"]
    pearson = scores.records.query("statistic == 'pearson'").set_index("metric")["value"]
    best, runner_up = pearson.sort_values(ascending=False).index
    [sentence] = [s for s in sentences if s.startswith("Judgment set s ")]
    assert sentence.startswith(f"Judgment set s (60 captions, 180 judgments): {best} agrees "
                               f"best with the judges' scores (Pearson r "
                               f"{pearson[best]:.3f}), ahead of {runner_up} "
                               f"({pearson[runner_up]:.3f}): ")
    assert "Williams' test" in sentence
    [pairs] = [s for s in sentences if s.startswith("Judgment set pairs ")]
    assert pairs.endswith("no metric scores of this set yet: run thumb metrics compute "
                          "--judgments pairs.")


# ---------------------------------------------------------------------------------------
# 5. `$` in Markdown

@pytest.mark.parametrize("table_cell", [False, True])
def test_a_dollar_is_escaped_so_markdown_shows_no_math(table_cell):
    escaped = for_markdown("$x$ costs $5", table_cell=table_cell)
    assert escaped == r"\$x\$ costs \$5"
    rendered = markdown_it.MarkdownIt("commonmark").renderInline(escaped)
    assert rendered == "$x$ costs $5"  # CommonMark shows the text itself
