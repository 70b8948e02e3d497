"""Terminal tables fit 80 columns (issue #27): rendered by rich at width 80, no line is
longer and no number is cut in two ("1." over "00"); a table too wide for 80 columns
switches to its long layout (one row per pair). An undefined Kendall τ shows as "—" in the
tables and as a grey hatched cell in the heat map; comparing two models warns that every τ
is then ±1."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from rich.console import Console, Group
from typer.testing import CliRunner

from reports.retrieval_text import (
    comparison_tables,
    draw_tau,
    results_table,
    tau_warning,
)
from reports.terminal import TERMINAL_WIDTH
from tests.conftest import SAMPLE_CSV
from thumb_tui.cli import app

NUMBER = re.compile(r"-?\d+\.\d+")


def rendered(*tables: object) -> str:
    console = Console(file=io.StringIO(), width=TERMINAL_WIDTH, color_system=None)
    console.print(Group(*tables))
    return console.file.getvalue()


def assert_fits(text: str) -> None:
    too_long = [line for line in text.splitlines() if len(line) > TERMINAL_WIDTH]
    assert not too_long, too_long


def frames(models: list[str], metrics: list[str], seed: int = 0
           ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Ranks (model, metric, value, rank) and a τ matrix over the metrics, its first
    metric's τ undefined (as when a metric ties every model)."""
    rng = np.random.default_rng(seed)
    values = rng.random((len(models), len(metrics)))
    ranks = pd.DataFrame([(model, metric, values[i, j], float(i + 1))
                          for j, metric in enumerate(metrics)
                          for i, model in enumerate(models)],
                         columns=["model", "metric", "value", "rank"])
    tau = pd.DataFrame(np.round(rng.uniform(-1, 1, (len(metrics), len(metrics))), 2),
                       index=metrics, columns=metrics)
    tau.iloc[0, :] = tau.iloc[:, 0] = np.nan
    return ranks, tau


def test_a_tau_matrix_that_fits_stays_a_matrix_with_a_dash_for_undefined():
    ranks, tau = frames(["a", "b", "c"], ["r@1", "r@5", "rsum"])
    text = rendered(*comparison_tables(ranks, tau))
    assert_fits(text)
    matrix = text[text.index("Kendall"):]
    assert re.search(r"τ-b\s+\(1\)\s+\(2\)\s+\(3\)", matrix)
    first = next(line for line in matrix.splitlines() if line.startswith("(1)"))
    assert first.split() == ["(1)", "—", "—", "—"]
    third = next(line for line in matrix.splitlines() if line.startswith("(3)"))
    assert third.split()[2:] == [f"{tau.iloc[2, 1]:.2f}", f"{tau.iloc[2, 2]:.2f}"]


def test_a_wide_comparison_switches_to_one_row_per_pair_with_every_number_whole():
    models = [f"model-{i}-with-a-long-name" for i in range(9)]
    metrics = [f"positives-{j} recall@{j}" for j in range(14)]
    ranks, tau = frames(models, metrics)
    text = rendered(*comparison_tables(ranks, tau))
    assert_fits(text)
    ranked, matrix = text.split("Kendall")
    assert re.search(r"metric\s+model\s+value\s+rank", ranked)
    assert re.search(r"metric\s+versus\s+τ-b", matrix)
    # every value and every τ whole, each on its own row (a number cut in two would be
    # two tokens, or none)
    assert NUMBER.findall(ranked) == [f"{100 * v:.1f}" for v in ranks["value"]]
    pairs = [(i, j) for i in range(len(metrics)) for j in range(i + 1, len(metrics))]
    shown = [line.split()[-1] for line in matrix.splitlines() if line.startswith("(")]
    assert shown == ["—" if np.isnan(tau.iloc[i, j]) else f"{tau.iloc[i, j]:.2f}"
                     for i, j in pairs]


def test_results_too_wide_for_three_columns_get_one_row_per_value(tmp_path):
    records = [{"model": "m", "positives": "a-positive-set-with-a-rather-long-name",
                "metric": f"recall@k{suffix}", "k": k, "m": None, "direction": direction,
                "value": 0.123456, "ci_low": 0.1, "ci_high": 0.2, "ci_warning": None,
                "signature": "s"}
               for k, suffix in ((1, ""), (5, " averaged per query, the long way"))
               for direction in ("i2t", "t2i", "both")]
    out = tmp_path / "results.txt"
    results_table(records, ci=0.95, out=out)
    text = out.read_text(encoding="utf-8")
    assert_fits(text)
    assert re.search(r"positives\s+metric\s+direction\s+value \[CI\]", text)
    assert text.count("12.3 [10.0, 20.0]") == len(records)


def test_fewer_than_three_models_warn_that_every_tau_is_plus_or_minus_one():
    two, _ = frames(["a", "b"], ["r@1", "r@5"])
    three, _ = frames(["a", "b", "c"], ["r@1", "r@5"])
    assert "only 2 models" in tau_warning(two)
    assert tau_warning(three) is None


def test_an_undefined_tau_is_a_grey_hatched_cell_in_the_heat_map(tmp_path):
    pytest.importorskip("matplotlib")
    _, tau = frames(["a", "b", "c"], ["r@1", "r@5", "rsum"])
    undefined, defined = tmp_path / "undefined.svg", tmp_path / "defined.svg"
    draw_tau(tau, undefined)
    draw_tau(tau.fillna(0.0), defined)
    assert "<pattern" in undefined.read_text(encoding="utf-8")  # the hatch
    assert "#d3d3d3" in undefined.read_text(encoding="utf-8")  # lightgrey
    assert "τ undefined" in undefined.read_text(encoding="utf-8")  # its legend
    assert "<pattern" not in defined.read_text(encoding="utf-8")  # τ = 0 is a colour


@pytest.fixture(scope="module")
def rated_db(tmp_path_factory) -> Path:
    runner = CliRunner()
    db = tmp_path_factory.mktemp("terminal") / "rated.db"
    for source in (SAMPLE_CSV, SAMPLE_CSV.parent / "example_ratings.csv"):
        result = runner.invoke(app, ["--db", str(db), "import", str(source)])
        assert result.exit_code == 0, result.output
    return db


def test_the_agreement_tables_fit_80_columns(rated_db):
    result = CliRunner().invoke(app, ["--db", str(rated_db), "agreement", "--bootstrap",
                                      "100"])
    assert result.exit_code == 0, result.output
    assert "kappa_quadratic" in result.output and "Confusion matrices" in result.output
    assert_fits(result.output)


def test_agreement_over_many_scores_gets_one_row_per_statistic_and_score():
    from reports.thumb.text import _statistics_table, statistics_rows

    labels = {f"score_{i}": f"a score named at length {i}" for i in range(4)}
    part = pd.DataFrame([
        {"statistic": statistic, "dimension": dimension, "value": 0.5, "ci_low": 0.25,
         "ci_high": 0.75, "note": None, "ci_warning": None}
        for statistic in ("kappa", "exact") for dimension in labels])
    text = "\n".join(_statistics_table(part, False, labels))
    assert_fits(text)
    assert re.search(r"statistic\s+score\s+value \[CI\]", text)
    rows, _ = statistics_rows(part, labels)
    assert text.count("0.500 [0.25, 0.75]") == sum(cell != "" for row in rows
                                                   for cell in row[1:])


def test_confusion_matrices_side_by_side_wrap_to_the_next_row_past_80_columns():
    from reports.thumb.text import _side_by_side

    blocks = ["\n".join([f"{name:<30}", "5" * 30]) for name in ("P", "R", "fluency>0")]
    lines = _side_by_side(blocks)
    assert_fits("\n".join(lines))
    # two blocks (30 + 4 + 30 columns) fit on a row, the third goes under them
    assert lines[0].split() == ["P", "R"] and lines[3].split() == ["fluency>0"]
    assert lines[2] == ""
