"""Metrics and rubrics as plugins, end to end: two small distributions (one lab's metric and
rubric, one broken metric plugin; sources in tests/plugin_fixtures/) are built and installed
with pip into a temporary folder, and the real `thumb` command line, run with that folder on
PYTHONPATH, scores a project with the plugin's metric, stores and reports its scores with
their signature, offers its option in `--help`, and keeps the built-ins working beside the
broken plugin, which it names."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlmodel import Session

from reports.scoring import load_items
from storage import open_database
from storage.models import MetricScore
from tests.conftest import ROOT, SAMPLE_CSV

FIXTURES = Path(__file__).parent / "plugin_fixtures"
BROKEN = ("warning: metric plugin 'broken-metric = no_such_thumb_plugin_module:Nope' of "
          "distribution thumb-broken-plugin 0.1.0: cannot be imported (ModuleNotFoundError")

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pip") is None or importlib.util.find_spec("setuptools") is None,
    reason="pip and setuptools are needed to build and install the plugin distributions")


@pytest.fixture(scope="module")
def plugins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder both plugin distributions are installed into (pip --target), built from
    copies of their sources offline, with this environment's setuptools."""
    root = tmp_path_factory.mktemp("plugins")
    sources = []
    for name in ("lab_plugin", "broken_plugin"):
        shutil.copytree(FIXTURES / name, root / name,
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        sources.append(str(root / name))
    # the lab's rubric: the second rubric of the tests, shipped under the name lab-pr4
    shutil.copy(Path(__file__).parent / "rubrics" / "pr4-1.toml",
                root / "lab_plugin" / "lab_metrics" / "lab-pr4.toml")
    target = root / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
         "--no-index", "--disable-pip-version-check", "--quiet", "--target", str(target),
         *sources],
        check=True, capture_output=True, text=True, timeout=300, cwd=root)
    assert sorted(p.name for p in target.glob("*.dist-info")) == [
        "thumb_broken_plugin-0.1.0.dist-info", "thumb_lab_metrics-0.1.0.dist-info"]
    return target


def thumb(plugins: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed `thumb` command (its console script), with the plugins importable."""
    script = Path(sys.executable).with_name("thumb")
    command = [str(script)] if script.is_file() else [sys.executable, "-m", "thumb_tui"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "200",
           "PYTHONPATH": os.pathsep.join(p for p in (str(plugins), str(ROOT),
                                                     os.environ.get("PYTHONPATH")) if p)}
    return subprocess.run([*command, *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)


@pytest.fixture(scope="module")
def project(plugins: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("project")
    done = thumb(plugins, folder, "--db", "p.db", "import", str(SAMPLE_CSV), "--by", "me")
    assert done.returncode == 0, done.stderr
    return folder


@pytest.mark.slow
def test_a_plugin_metric_is_scored_stored_and_reported_with_its_signature(plugins, project):
    done = thumb(plugins, project, "--db", "p.db", "metrics", "compute",
                 "--metric", "lab-length", "--lab-unit", "chars")
    assert done.returncode == 0, done.stderr
    assert "lab-length: computed 60, reused 0" in done.stdout
    assert "lab-length|impl:lab-metrics-0.1|unit:chars|" in done.stdout
    assert BROKEN in done.stderr  # the broken plugin, named, did not stop the other one

    engine = open_database(project / "p.db")
    try:
        items, _ = load_items(engine)  # the texts as scored: THUMB's clean-up
        with Session(engine) as session:
            stored = session.exec(select(MetricScore.caption_id, MetricScore.value,
                                         MetricScore.signature)
                                  .where(MetricScore.metric == "lab-length")).all()
    finally:
        engine.dispose()
    assert {caption: value for caption, value, _ in stored} == {
        item.caption_id: len(item.text) for item in items}
    signature = stored[0][2]
    # reference-free: the clean-up, no reference fields
    assert signature.startswith("lab-length|impl:lab-metrics-0.1|unit:chars|clean:thumb|")

    again = thumb(plugins, project, "--db", "p.db", "metrics", "compute",
                  "--metric", "lab-length", "--lab-unit", "chars")
    assert "lab-length: computed 0, reused 60" in again.stdout

    listed = thumb(plugins, project, "--db", "p.db", "metrics", "list")
    assert signature in listed.stdout

    reported = thumb(plugins, project, "--db", "p.db", "report", "--format", "json",
                     "--out", "report")
    assert reported.returncode == 0, reported.stderr
    report = json.loads((project / "report" / "report.json").read_text(encoding="utf-8"))
    assert report["signatures"]["lab-length"] == signature
    assert all(row["lab-length"] > 0 for row in report["systems"])


@pytest.mark.slow
def test_the_plugins_option_and_help_are_generated_as_for_builtins(plugins, project):
    done = thumb(plugins, project, "metrics", "compute", "--help")
    assert done.returncode == 0, done.stderr
    assert "--lab-unit" in done.stdout
    assert "What lab-length counts: words or chars." in done.stdout
    assert "lab-length: caption length in words or characters (a lab's own metric)" in (
        " ".join(done.stdout.split()))
    assert "Left out: metric plugin 'broken-metric" in done.stdout


@pytest.mark.slow
def test_a_broken_plugin_leaves_the_builtins_working_and_fails_only_when_asked(
        plugins, project):
    done = thumb(plugins, project, "--db", "p.db", "metrics", "compute", "--metric", "bleu")
    assert done.returncode == 0, done.stderr
    assert "bleu: computed 60" in done.stdout
    assert BROKEN in done.stderr

    asked = thumb(plugins, project, "--db", "p.db", "metrics", "compute",
                  "--metric", "broken-metric")
    assert asked.returncode != 0
    assert ("error: metric 'broken-metric' is not available: metric plugin 'broken-metric = "
            "no_such_thumb_plugin_module:Nope' of distribution thumb-broken-plugin 0.1.0"
            ) in asked.stderr
    assert "warning:" not in asked.stderr  # said once, as the error


@pytest.mark.slow
def test_a_rubric_shipped_by_a_package_is_found_by_name(plugins, tmp_path):
    done = thumb(plugins, tmp_path, "--db", "r.db", "import", str(SAMPLE_CSV),
                 "--rubric", "lab-pr4")
    assert done.returncode == 0, done.stderr
    shown = thumb(plugins, tmp_path, "--db", "r.db", "import", str(SAMPLE_CSV),
                  "--rubric", "no-such-rubric-9")
    assert shown.returncode != 0
    assert "no rubric named 'no-such-rubric-9' and no such file" in shown.stderr
    engine = open_database(tmp_path / "r.db")
    try:
        from storage.rubric_registry import project_rubric

        rubric = project_rubric(engine)
    finally:
        engine.dispose()
    assert (rubric.id, rubric.title) == ("pr4", "PR-4 (test rubric)")


def test_a_shipped_rubric_names_its_package_when_it_cannot_be_used(monkeypatch):
    """Without installing: the entry points as a distribution would declare them."""
    import importlib.metadata
    from importlib.metadata import EntryPoint

    from rubrics import load_rubric

    def shipping(*points: tuple[str, str]) -> None:
        monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [
            EntryPoint(name, value, group) for name, value in points])

    shipping(("lab-x", "rubrics:thumb_1_0"))  # the package is there, the file is not
    with pytest.raises(ValueError, match=re.escape(
            "rubric plugin lab-x = 'rubrics:thumb_1_0' of a package: the package has no "
            "thumb_1_0.toml")):
        load_rubric("lab-x")
    shipping(("lab-x", "no_such_rubric_package"))
    with pytest.raises(ValueError, match=re.escape("cannot be read (ModuleNotFoundError")):
        load_rubric("lab-x")
    shipping(("lab-x", "rubrics"), ("lab-x", "storage"))
    with pytest.raises(ValueError, match="'lab-x' is shipped by several packages"):
        load_rubric("lab-x")
    assert load_rubric("thumb-1.0").id == "thumb"  # a bundled name never asks the plugins
