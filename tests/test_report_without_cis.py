"""`thumb report --bootstrap 0` computes no confidence interval, so no heading or column of
it may promise one ("90% BCa CIs", "Δ Total [90% CI]", "Total [CI]"), and no difference is
called significant."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from tests.conftest import SAMPLE_CSV
from thumb_tui.cli import app

runner = CliRunner()


def test_a_report_without_bootstrap_promises_no_interval(tmp_path):
    db = str(tmp_path / "r.db")
    for source in (SAMPLE_CSV, SAMPLE_CSV.parent / "example_ratings.csv"):
        assert runner.invoke(app, ["--db", db, "import", str(source)]).exit_code == 0
    assert runner.invoke(app, ["--db", db, "metrics", "compute", "--metric", "bleu",
                               "--metric", "rouge-l"]).exit_code == 0
    for bootstrap, promises in (("0", False), ("100", True)):
        out = tmp_path / f"b{bootstrap}"
        result = runner.invoke(app, ["--db", db, "report", "--out", str(out), "--bootstrap",
                                     bootstrap])
        assert result.exit_code == 0, result.output
        text = (out / "report.md").read_text(encoding="utf-8")
        interval_words = re.findall(r"BCa CIs|\[\d+% CI\]|\[CI\]|CIs over images|"
                                    r"significant when", text)
        assert bool(interval_words) == promises, interval_words
        assert ("no CIs: --bootstrap 0" in text) != promises
