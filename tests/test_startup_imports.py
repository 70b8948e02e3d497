"""Every `thumb` command pays for what the command line imports before it runs: building
the commands and their options (`thumb --help`) must load neither the database layer
(SQLAlchemy, SQLModel, the tables) nor the analyses' libraries; a command loads them when
it opens a database or computes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from metrics.retrieval.positives import eccv_caption_available, shipped_positive_set

ROOT = Path(__file__).resolve().parent.parent
NOT_AT_START_UP = ("sqlalchemy", "sqlmodel", "storage.models", "storage.db.engine", "pandas",
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
    probe = ("import sys; import storage.imports.importer, storage.imports.thumb_release, "
             "storage.rating.rating_sessions; print(*sorted(m for m in ('pandas', 'scipy', "
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


@pytest.mark.slow
@pytest.mark.skipif(not eccv_caption_available(), reason="eccv-caption is not installed")
@pytest.mark.parametrize("fmt", ["json", "md", "table"])
def test_evaluating_a_model_against_a_shipped_set_loads_no_analysis_library(tmp_path, fmt):
    """`thumb retrieval evaluate` on integer ids: pandas alone was a tenth of the run on the
    full COCO 5K lists; the results' tables, CIs included, are written without it."""
    coco = shipped_positive_set("coco-5k")
    images, captions = list(coco.image_to_captions), list(coco.caption_to_images)
    rng = np.random.default_rng(0)
    lists = ({i: [captions[j] for j in rng.choice(len(captions), 20, replace=False)]
              for i in images},
             {c: [images[j] for j in rng.choice(len(images), 20, replace=False)]
              for c in captions})
    paths = tmp_path / "i2t.json", tmp_path / "t2i.json"
    for path, ranking in zip(paths, lists, strict=True):
        path.write_text(json.dumps(ranking), encoding="utf-8")
    arguments = ["--db", str(tmp_path / "p.db"), "retrieval", "evaluate", "--name", "m",
                 "--i2t", str(paths[0]), "--t2i", str(paths[1]), "--positives", "eccv",
                 "--format", fmt, "--out", str(tmp_path / f"out.{fmt}")]
    probe = (f"import sys; sys.argv = ['thumb', *{arguments!r}]\n"
             "from thumb_tui.cli import app\ntry:\n    app()\nexcept SystemExit as end:\n"
             "    assert not end.code, end.code\n"
             "print('LOADED', *sorted(m for m in ('pandas', 'scipy', 'matplotlib') "
             "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1:] == ["LOADED"]
    assert "eccv" in (tmp_path / f"out.{fmt}").read_text(encoding="utf-8")
