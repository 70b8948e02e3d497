"""What a researcher extending thumb-tui met (the extension trial): a rubric file of their
own and a metric of their own, each as README's "Another rubric" and "Add your own metric"
describe, and each broken in the ways a first attempt breaks. A broken one must end in one
clear line naming it, and leave nothing stored."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select
from typer.testing import CliRunner

import metrics.registry
from metrics.base import CaptionItem, Metric
from metrics.registry import MetricOptions, build_metric
from reports.scoring import compute_metrics
from rubrics import RubricError, load_rubric
from storage import import_captions, open_database
from storage.models import MetricScore
from tests.conftest import SAMPLE_CSV
from thumb_tui.cli import app

TS7 = Path(__file__).parent / "rubrics" / "ts7-1.toml"


# -- rubric files ----------------------------------------------------------------------------

def test_an_empty_rubric_file_is_told_only_what_it_lacks(tmp_path: Path) -> None:
    """Not also that its (absent) dimensions are "a date or time"."""
    empty = tmp_path / "empty.toml"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(RubricError) as refused:
        load_rubric(empty)
    assert refused.value.problems == ["lacks id, version, title, total, dimensions, penalties"]


def _ts7_with_weights(folder: Path, precision: str, recall: str) -> Path:
    text = TS7.read_text(encoding="utf-8")
    for key, weight in (("precision_weight", precision), ("recall_weight", recall)):
        line = next(line for line in text.splitlines() if line.startswith(key))
        text = text.replace(line, f"{key} = {weight}")
    path = folder / "weights.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_rubric_whose_weights_are_all_zero_is_refused(tmp_path: Path) -> None:
    """Its Total would be the penalties alone, whatever P and R: no ranking, agreement on
    Total or correlation with Total would mean anything."""
    with pytest.raises(RubricError) as refused:
        load_rubric(_ts7_with_weights(tmp_path, "0", "0.0"))
    assert refused.value.problems == ["total: the weights are all 0: every Total would be 0 "
                                      "minus the penalties, whatever the scores"]
    one_dimension = load_rubric(_ts7_with_weights(tmp_path, "0", "1"))  # a rubric's choice
    assert [d.weight for d in one_dimension.dimensions] == [0.0, 1.0]
    with pytest.raises(RubricError) as refused:  # a weight refused is not a weight of 0
        load_rubric(_ts7_with_weights(tmp_path, "0", '"none"'))
    assert refused.value.problems == ["total.recall_weight: must be a number, not text"]


def test_a_rubric_file_that_is_not_toml_is_named_as_such(tmp_path: Path) -> None:
    """A JSON rubric exists: "no such file" sent the user looking for a typo."""
    given = tmp_path / "my-rubric.json"
    given.write_text('{"id": "mine"}', encoding="utf-8")
    with pytest.raises(RubricError) as refused:
        load_rubric(given)
    assert str(refused.value) == f"{given}: a rubric file is TOML, named NAME.toml"


# -- metric plugins ------------------------------------------------------------------------

class _LabMetric(Metric):
    """A plugin's metric, as README's example writes one; each test breaks one hook."""

    name = "lab-trial"
    help = "a lab's metric"
    needs_references = False

    def settings(self, items: Sequence[CaptionItem]) -> dict[str, str]:
        return {"impl": "lab-0.1"}

    def compute(self, items: Sequence[CaptionItem]) -> list[float]:
        return [float(len(item.text)) for item in items]


class _Infinite(_LabMetric):
    def compute(self, items: Sequence[CaptionItem]) -> list[float]:
        return [math.inf] + [1.0] * (len(items) - 1)


class _NaN(_LabMetric):
    def compute(self, items: Sequence[CaptionItem]) -> list[float]:
        return [math.nan] * 2 + [1.0] * (len(items) - 2)


class _Words(_LabMetric):
    def compute(self, items: Sequence[CaptionItem]) -> list[str]:
        return ["high"] * len(items)


class _HugeInteger(_LabMetric):
    def compute(self, items: Sequence[CaptionItem]) -> list[int]:
        return [10**400] * len(items)


class _KeyErrorInCompute(_LabMetric):
    def compute(self, items: Sequence[CaptionItem]) -> list[float]:
        return {}["missing"]


class _ExitInCompute(_LabMetric):
    def compute(self, items: Sequence[CaptionItem]) -> list[float]:
        raise SystemExit(0)


class _ZeroDivisionInSettings(_LabMetric):
    def settings(self, items: Sequence[CaptionItem]) -> dict[str, str]:
        return {"impl": str(1 / 0)}


class _AttributeErrorInConstructor(_LabMetric):
    def __init__(self) -> None:
        raise AttributeError("no GPU handle")


def _settings(fields: dict) -> type[_LabMetric]:
    class Settings(_LabMetric):
        def settings(self, items: Sequence[CaptionItem]) -> dict[str, str]:
            return fields
    return Settings


@pytest.fixture
def project(tmp_path: Path) -> Engine:
    engine = open_database(tmp_path / "lab.db")
    import_captions(engine, SAMPLE_CSV, actor="setup")
    return engine


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, type[Metric]]]:
    """The registry as if the test's metric class were an installed plugin."""
    plugins: dict[str, type[Metric]] = {}
    known = metrics.registry.metric_classes()
    monkeypatch.setattr(metrics.registry, "metric_classes", lambda: {**known, **plugins})
    yield plugins


def _stored(engine: Engine) -> int:
    with engine.connect() as connection:
        return connection.execute(select(func.count()).select_from(MetricScore)).scalar_one()


BROKEN_SCORES = [
    (_Infinite, r"lab-trial returned 0 NaN and 1 infinite scores for the 60 captions"),
    (_NaN, r"lab-trial returned 2 NaN and 0 infinite scores for the 60 captions it can "
           r"score; nothing was stored for them \(a caption it cannot score needs its "
           r"undefined_reason\(\)"),
    (_Words, r"lab-trial: compute\(\) returned something other than numbers \(could not "
             r"convert string to float: 'high'\)"),
    (_HugeInteger, r"lab-trial: compute\(\) returned something other than numbers \(int too "
                   r"large"),
    (_KeyErrorInCompute, r"metric 'lab-trial' failed in compute\(\): KeyError: 'missing'"),
    (_ExitInCompute, r"metric 'lab-trial' failed in compute\(\): SystemExit: 0"),
    (_ZeroDivisionInSettings, r"metric 'lab-trial' failed in settings\(\): "
                              r"ZeroDivisionError: division by zero"),
    (_AttributeErrorInConstructor, r"metric 'lab-trial' failed in its constructor: "
                                   r"AttributeError: no GPU handle"),
    (_settings({"impl": "a|b"}), r"the value of 'impl', 'a\|b', must be one printable line "
                                 r"without '\|'"),
    (_settings({"impl": "\x1b[31mred"}), r"the value of 'impl', '\\x1b\[31mred', must be one "
                                         r"printable line"),
    (_settings({"impl": "two\nlines"}), r"the value of 'impl', 'two\\nlines', must be one "),
    (_settings({"x y": "1"}), r"the key 'x y' is not a signature field name"),
    (_settings({"clean": "mine"}), r"the key 'clean' is a field thumb-tui adds itself"),
    (_settings(["impl"]), r"settings\(\) returned a list, not a dict of signature fields"),
]


@pytest.mark.parametrize(("broken", "message"), BROKEN_SCORES)
def test_a_broken_metric_ends_in_one_error_naming_it_and_stores_nothing(
        project: Engine, installed: dict[str, type[Metric]], broken: type[Metric],
        message: str) -> None:
    """Before, these were a traceback (KeyError, OverflowError…), a silent exit 0, a
    "CHECK constraint failed" database error, a message that named no metric, infinite
    scores stored (on which `thumb report` then died), or a signature broken at a `|` in a
    value, with the terminal's escape sequences in it."""
    installed["lab-trial"] = broken
    with pytest.raises(RuntimeError, match=message):
        compute_metrics(project, ["lab-trial"], MetricOptions())
    assert _stored(project) == 0


def test_the_command_line_says_it_in_one_line(
        project: Engine, installed: dict[str, type[Metric]], tmp_path: Path) -> None:
    installed["lab-trial"] = _KeyErrorInCompute
    result = CliRunner().invoke(app, ["--db", str(tmp_path / "lab.db"), "metrics",
                                      "compute", "--metric", "lab-trial"])
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == ("error: metric 'lab-trial' failed in "
                                              "compute(): KeyError: 'missing'")


class _ValueErrorInCompute(_LabMetric):
    def compute(self, items: Sequence[CaptionItem]) -> list[float]:
        raise ValueError("the captions must be in English")


class _RuntimeErrorInConstructor(_LabMetric):
    def __init__(self) -> None:
        raise RuntimeError("CUDA out of memory")


@pytest.mark.parametrize(("broken", "line", "stored"), [
    (_ValueErrorInCompute, "error: metric 'lab-trial': the captions must be in English",
     ["bleu"]),  # each metric's scores are committed as it ends
    (_RuntimeErrorInConstructor, "error: metric 'lab-trial': CUDA out of memory",
     []),  # every metric is built before any is computed
])
def test_a_metric_s_own_error_is_said_with_its_name(
        project: Engine, installed: dict[str, type[Metric]], tmp_path: Path,
        broken: type[Metric], line: str, stored: list[str]) -> None:
    """A ValueError or RuntimeError of a plugin's own was printed as it was, naming no
    metric: with several metrics in one command the user could not tell whose it was."""
    installed["lab-trial"] = broken
    result = CliRunner().invoke(app, ["--db", str(tmp_path / "lab.db"), "metrics",
                                      "compute", "--metric", "bleu", "--metric", "lab-trial"])
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == line
    with project.connect() as connection:
        assert connection.execute(select(MetricScore.metric).distinct()).scalars().all() == (
            stored)


def test_a_working_metric_is_scored_under_its_signature(
        project: Engine, installed: dict[str, type[Metric]]) -> None:
    """The checks above leave a plugin that keeps to the rules as it was."""
    installed["lab-trial"] = _LabMetric
    (run,) = compute_metrics(project, ["lab-trial"], MetricOptions())
    assert run.signature.startswith("lab-trial|impl:lab-0.1|clean:thumb|thumb-tui:")
    assert (run.computed, _stored(project)) == (60, 60)
    assert isinstance(build_metric("lab-trial", MetricOptions()), _LabMetric)
