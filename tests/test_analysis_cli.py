"""The analysis commands as a new user meets them (trial u7): each refuses a format it does
not write, naming every one it does; agreement with nothing to compare still writes the
file a script asked for; no stray blank line, library warning or claim that the state of
the project does not back."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import SAMPLE_CSV
from thumb_tui.cli import app

runner = CliRunner()


def thumb(db: Path, *args: object):
    return runner.invoke(app, ["--db", str(db), *map(str, args)])


@pytest.fixture
def captions_only(tmp_path) -> Path:
    """A project with captions and no rating yet."""
    db = tmp_path / "p.db"
    result = thumb(db, "import", SAMPLE_CSV)
    assert result.exit_code == 0, result.output
    return db


@pytest.mark.parametrize(("args", "formats"), [
    (["bison", "report", "--format", "x"], "table, json"),
    (["report", "--format", "pdf", "--out", "r"], "md, html, json, latex"),
    (["agreement", "--format", "xlsx"], "table, csv, json, md, latex"),
])
def test_an_unknown_format_is_refused_with_every_known_one(tmp_path, args, formats):
    result = thumb(tmp_path / "none.db", *args)
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (f"error: --format must be one of {formats}, "
                                     f"not {args[args.index('--format') + 1]!r}")


def test_each_report_format_the_error_names_is_one_the_report_writes(captions_only,
                                                                     tmp_path):
    from thumb_tui.cli.analysis import REPORT_FORMATS

    for fmt in REPORT_FORMATS:
        result = thumb(captions_only, "report", "--format", fmt, "--bootstrap", "0",
                       "--out", tmp_path / fmt)
        assert result.exit_code == 0, (fmt, result.output)


def test_agreement_with_no_pairs_still_writes_what_was_asked(captions_only, tmp_path):
    """As `report` writes its file on an early project, saying what is missing: CSV with
    its header, JSON an empty list, the documents saying there are no pairs."""
    from reports.thumb.text import NO_PAIRS

    written = {}
    for fmt in ("csv", "json", "md", "latex"):
        out = tmp_path / f"agreement.{'tex' if fmt == 'latex' else fmt}"
        result = thumb(captions_only, "agreement", "--format", fmt, "--out", out)
        assert result.exit_code == 0, result.output
        written[fmt] = out.read_text(encoding="utf-8")
    assert written["csv"].splitlines() == [
        "dimension,annotator_a,annotator_b,kind,statistic,n,images,value,ci_low,ci_high,"
        "note,ci_warning"]  # as with pairs
    assert json.loads(written["json"]) == []
    assert NO_PAIRS in written["md"] and NO_PAIRS in written["latex"]
    shown = thumb(captions_only, "agreement", "--format", "csv")
    assert shown.stdout.splitlines()[0].startswith("dimension,annotator_a,")
    assert shown.stderr.strip() == NO_PAIRS  # the note beside the data, not in it


def test_metrics_compute_prints_no_blank_line_before_its_results(captions_only):
    result = thumb(captions_only, "metrics", "compute", "--metric", "bleu")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("bleu: computed 60"), result.output


@pytest.mark.parametrize(("count", "said"), [
    (1, "all done: the disagreement of this session is resolved; q quits"),
    (3, "all done: the 3 disagreements of this session are resolved; q quits"),
])
def test_the_resolve_screen_counts_one_disagreement_in_the_singular(count, said):
    from thumb_tui.screens.resolve import all_done

    assert all_done(count) == said


def test_a_project_of_judgment_sets_only_says_which_tables_wait_for_captions(tmp_path):
    db = tmp_path / "j.db"
    sample = SAMPLE_CSV.parent
    assert thumb(db, "judgments", "import", sample / "judgments.csv", "--name", "crowd",
                 "--scale", "1-4").exit_code == 0
    result = thumb(db, "report", "--bootstrap", "0", "--out", tmp_path / "r")
    assert result.exit_code == 0, result.output
    assert "## Judgment set crowd" in (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    assert "every table" not in result.output
    assert ("not computed yet: the THUMB tables (systems, metric means, correlations, "
            "agreement): no captions yet") in result.output


def test_missing_glyphs_are_one_note_per_font():
    from reports.plotting import plot_notes

    glyphs = [f"Glyph {ord(c)} (\\N{{CJK UNIFIED IDEOGRAPH-{ord(c):04X}}}) missing from "
              "font(s) DejaVu Sans." for c in "人类模型人"]
    assert plot_notes([*glyphs, "Tight layout not applied.", "Tight layout not applied."]) == [
        "Tight layout not applied.",
        "the font DejaVu Sans has no glyph for 4 characters of the labels (人 类 模 型): "
        "the figures show them as empty boxes"]


def test_a_figure_with_a_cjk_label_warns_once():
    from reports.plotting import pyplot

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pyplot("a test", **{"font.family": "DejaVu Sans"}) as plt:  # no fallback font
            figure, axes = plt.subplots()
            axes.set_title("人类模型")
            figure.canvas.draw()
            plt.close(figure)
    assert [str(w.message) for w in caught] == [
        "the font DejaVu Sans has no glyph for 4 characters of the labels (人 类 模 型): "
        "the figures show them as empty boxes"]


@pytest.mark.slow
def test_report_print_figures_notes_missing_glyphs_in_one_line(tmp_path):
    """A CJK system name: one note on stderr, no library source path or source line."""
    captions = tmp_path / "captions.csv"
    ratings = tmp_path / "ratings.csv"
    for source, target in ((SAMPLE_CSV, captions),
                           (SAMPLE_CSV.parent / "example_ratings.csv", ratings)):
        text = source.read_text(encoding="utf-8").replace(",Human,", ",人类模型,")
        target.write_text(text.replace("images/", f"{SAMPLE_CSV.parent}/images/"),
                          encoding="utf-8")
    db = tmp_path / "cjk.db"
    for args in (["import", captions, "--allow-outside-images"], ["import", ratings],
                 ["metrics", "compute", "--metric", "bleu"]):
        assert thumb(db, *args).exit_code == 0
    result = thumb(db, "report", "--print-figures", "--bootstrap", "0", "--out",
                   tmp_path / "r")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "note: the font DejaVu Sans has no glyph for 4 characters of the labels "
        "(人 类 模 型): the figures show them as empty boxes"]


def test_library_warnings_become_one_note_line_each_without_source_lines(capsys):
    import warnings

    from thumb_tui.cli.common import warnings_as_notes

    with warnings_as_notes():
        for _ in range(3):
            warnings.warn("Glyph 20154 missing from font(s) DejaVu Sans.", UserWarning,
                          stacklevel=1)
        warnings.warn("another \x1b[2J one", UserWarning, stacklevel=1)
    assert capsys.readouterr().err.splitlines() == [
        "note: Glyph 20154 missing from font(s) DejaVu Sans.",
        "note: another \\x1b[2J one"]
