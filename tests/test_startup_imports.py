"""Every `thumb` command pays for what the command line imports before it runs: building
the commands and their options (`thumb --help`) must load neither the database layer
(SQLAlchemy, SQLModel, the tables) nor the analyses' libraries; a command loads them when
it opens a database or computes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOT_AT_START_UP = ("sqlalchemy", "sqlmodel", "storage.models", "storage.db", "pandas",
                   "scipy", "pyarrow", "matplotlib", "tabulate", "textual", "torch")
PROBE = """
import sys
sys.argv = ["thumb", "--help"]
from thumb_tui.cli import app
try:
    app()
except SystemExit:
    pass
print("LOADED", *sorted(name for name in {modules!r} if name in sys.modules))
"""


@pytest.mark.slow
def test_help_lists_every_command_without_loading_the_database_layer() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE.format(modules=NOT_AT_START_UP)],
                          capture_output=True, text=True, cwd=ROOT, check=True)
    *help_lines, loaded = done.stdout.strip().splitlines()
    assert loaded.split()[1:] == []
    listed = "\n".join(help_lines)
    for command in ("report", "metrics", "team", "db", "retrieval", "import", "status"):
        assert f" {command} " in listed, command


def test_the_import_paths_load_no_analysis_library() -> None:
    """An import (`import_captions`, `import_thumb`) and what a screen's session loads need
    neither pandas nor SciPy: each would add about 0.5 s and 60 MB to every import and
    every annotator's start (a module that needs one imports it where it is used)."""
    probe = ("import sys; import storage.importer, storage.thumb_release, "
             "storage.rating_sessions; print(*sorted(m for m in ('pandas', 'scipy', "
             "'pyarrow') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=ROOT, check=True)
    assert done.stdout.split() == []


def test_the_version_is_read_when_asked_for_and_other_names_are_unknown() -> None:
    """`thumb_tui.__version__` comes from the package metadata on first use (not at every
    command's start); any other missing name is an AttributeError, as for any module."""
    import thumb_tui
    from metrics.signature import tool_version

    assert thumb_tui.__version__ == tool_version() != ""
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        thumb_tui.nothing_here  # noqa: B018
