"""SIGTERM and SIGHUP (`kill`, `timeout`, a closed terminal) end a command as Ctrl-C does:
the outputs not yet in place are removed and a database the command created is removed
again, the exit status is 128 + the signal's number, and the handlers that were there
before come back."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import SAMPLE_CSV
from thumb_tui.cli import app

runner = CliRunner()


def signalled(number: int, scratch: Path):
    """A stand-in for a command's work that writes half of its output (a file under
    `scratch`, the test's folder: never an input) and is interrupted by `number`."""
    def work(*args: object, **_: object) -> object:
        for arg in args:
            if isinstance(arg, Path) and arg.parent == scratch:
                arg.write_text("half a file", encoding="utf-8")
        os.kill(os.getpid(), number)
        raise AssertionError("the signal ends the command before this line")
    return work


@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP"])
def test_an_export_ended_by_a_signal_leaves_no_partial_file(tmp_path, monkeypatch, name):
    number = getattr(signal, name)
    db = str(tmp_path / "p.db")
    assert runner.invoke(app, ["--db", db, "import", str(SAMPLE_CSV)]).exit_code == 0
    before = {path.name for path in tmp_path.iterdir()}
    monkeypatch.setattr("reports.exports.export_project", signalled(number, tmp_path))
    handler = signal.getsignal(number)
    result = runner.invoke(app, ["--db", db, "export", "--out", str(tmp_path / "out.csv")])
    assert result.exit_code == 128 + number
    assert {path.name for path in tmp_path.iterdir()} == before  # no out.csv, no .tmp
    assert signal.getsignal(number) == handler


def test_an_import_into_a_new_database_ended_by_sigterm_leaves_no_database(tmp_path,
                                                                          monkeypatch):
    monkeypatch.setattr("storage.import_captions", signalled(signal.SIGTERM, tmp_path))
    before = SAMPLE_CSV.read_bytes()
    result = runner.invoke(app, ["--db", str(tmp_path / "new.db"), "import", str(SAMPLE_CSV)])
    assert result.exit_code == 128 + signal.SIGTERM
    assert list(tmp_path.iterdir()) == []
    assert SAMPLE_CSV.read_bytes() == before
