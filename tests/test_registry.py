"""The metric registry is read off the metric classes: names, help lines, options."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest
from typer.testing import CliRunner

from metrics.base import DEVICE, CaptionItem, Metric, MetricOption
from metrics.registry import (
    MetricOptions,
    _class_problem,
    _load_plugins,
    build_metric,
    metric_classes,
    metric_options,
)
from thumb_tui.cli import app


def test_every_metric_has_a_name_help_and_its_own_options() -> None:
    classes = metric_classes()
    assert list(classes)[:3] == ["bleu", "rouge-l", "cider-d"]
    assert {"bertscore", "clip-s", "refclip-s", "refonly-c", "spice", "spice-approx"} <= set(
        classes)
    for name, cls in classes.items():
        assert cls.name == name and cls.help, name


def test_options_are_built_from_the_declarations() -> None:
    options = MetricOptions(cider_corpus="pooled", tokenizer="ptb-python")
    cider = build_metric("cider-d", options)
    assert (cider.corpus, cider.tokenizer) == ("pooled", "ptb-python")
    assert MetricOptions().keep_self_references is False
    with pytest.raises(TypeError, match="unknown metric option"):
        MetricOptions(cider_corpuss="pooled")
    with pytest.raises(ValueError, match="unknown metric 'nope'"):
        build_metric("nope", options)


def test_the_command_line_offers_every_declared_option() -> None:
    text = CliRunner().invoke(app, ["metrics", "compute", "--help"],
                              env={"COLUMNS": "200"}).output
    for option in metric_options().values():
        assert option.flag in text
    for name, cls in metric_classes().items():
        assert f"{name}: {cls.help}" in text


def test_a_metric_declares_its_options_once_for_everything() -> None:
    class Shouting(Metric):
        name = ""  # not registered: only named metrics (METRIC_MODULES, plugins) are
        options = (MetricOption("volume", "volume", 3, "How loud.", int),)

        def __init__(self, volume: int) -> None:
            self.volume = volume

        def settings(self, items: list[CaptionItem]) -> dict[str, str]:
            return {"volume": str(self.volume)}

        def compute(self, items: list[CaptionItem]):
            return [self.volume] * len(items)

    metric = Shouting.from_options({"volume": 5})
    assert metric.signature([], "none").startswith("|volume:5|refs:none")
    assert "volume" not in metric_options()


# Metric plugins: entry points of the group `thumb_tui.metrics`, checked like input.
# (tests/test_plugins.py installs a real plugin distribution and runs the command line.)

class LabMetric(Metric):
    name = "lab-test"
    help = "a plugin's metric"
    options = (MetricOption("lab_scale", "scale", 1, "Multiplier.", int),)

    def __init__(self, scale: int = 1) -> None:
        self.scale = scale

    def settings(self, items):
        return {"scale": str(self.scale)}

    def compute(self, items):
        return [self.scale * len(item.text) for item in items]


class ShadowsBleu(LabMetric):
    name = "bleu"


class BadName(LabMetric):
    name = "Lab|Metric"


class Unfinished(Metric):
    name = "lab-unfinished"
    help = "no compute()"

    def settings(self, items):
        return {}


class ClashingOption(LabMetric):
    name = "lab-clash"
    options = (MetricOption("device", "device", "cpu", "Another device.", str),)


class WrongParameter(LabMetric):
    name = "lab-wrong-parameter"
    options = (MetricOption("lab_size", "size", 1, "Size.", int),)  # __init__ takes scale


class WrongDefault(LabMetric):
    name = "lab-wrong-default"
    options = (MetricOption("lab_scale", "scale", "1", "Multiplier.", int),)


class SharedOption(LabMetric):
    name = "lab-shared"
    options = (DEVICE,)

    def __init__(self, device: str = "auto") -> None:
        self.device = device
        self.scale = 1


NOT_A_METRIC = "just a string"
GROUP = "thumb_tui.metrics"


def point(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=GROUP)


def problems_by_point(plugins) -> dict[str, str]:
    return {problem.entry_point.split(" =")[0]: problem.message
            for problem in plugins.problems}


def test_plugins_are_found_through_entry_points_and_checked() -> None:
    builtins = metric_classes()
    plugins = _load_plugins(builtins, [
        point("lab-test", "tests.test_registry:LabMetric"),
        point("lab-shared", "tests.test_registry:SharedOption"),
        point("shadow", "tests.test_registry:ShadowsBleu"),
        point("bad-name", "tests.test_registry:BadName"),
        point("unfinished", "tests.test_registry:Unfinished"),
        point("clash", "tests.test_registry:ClashingOption"),
        point("parameter", "tests.test_registry:WrongParameter"),
        point("default", "tests.test_registry:WrongDefault"),
        point("string", "tests.test_registry:NOT_A_METRIC"),
        point("missing", "no_such_module_for_thumb:Metric"),
        point("empty", "tests.conftest"),
    ])
    assert plugins.classes == {"lab-test": LabMetric, "lab-shared": SharedOption}
    why = problems_by_point(plugins)
    assert "a built-in metric's name" in why["shadow"]
    assert "is not a metric name" in why["bad-name"]
    assert "does not implement compute" in why["unfinished"]
    assert "option 'device' is declared differently" in why["clash"]
    assert "constructor does not take its options' parameters" in why["parameter"]
    assert "has the default '1', not of kind int" in why["default"]
    assert "names a str, not a subclass of metrics.base.Metric" in why["string"]
    assert "cannot be imported (ModuleNotFoundError" in why["missing"]
    assert "defines no named Metric subclass" in why["empty"]
    assert all("an unknown distribution" in str(p) for p in plugins.problems)


def test_the_builtins_pass_the_checks_a_plugin_must_pass() -> None:
    for name, cls in metric_classes().items():
        assert _class_problem(cls, {}) is None, name


def test_a_module_entry_point_brings_its_named_metrics_and_two_claims_cancel() -> None:
    plugins = _load_plugins(metric_classes(), [
        point("module", "tests.plugin_fixtures.module_plugin"),
        point("words", "tests.plugin_fixtures.module_plugin:Words")])  # one class, twice
    assert list(plugins.classes) == ["mod-words", "mod-chars"] and not plugins.problems
    twice = _load_plugins({}, [point("one", "tests.test_registry:LabMetric"),
                               point("two", "tests.test_registry:LabMetric2")])
    assert twice.classes == {}
    assert len(twice.problems) == 2
    assert all("also declared by another plugin" in p.message and "'one = " in p.message
               and "'two = " in p.message for p in twice.problems)


class LabMetric2(LabMetric):
    pass  # the same name as LabMetric: another plugin claiming "lab-test"


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch):
    """The registry as if these entry points were installed (caches cleared around)."""
    from metrics import registry

    def install(*points: EntryPoint) -> None:
        monkeypatch.setattr(registry, "entry_points", lambda group: list(points))
        registry._registry.cache_clear()
        registry.metric_options.cache_clear()

    yield install
    monkeypatch.undo()
    registry._registry.cache_clear()
    registry.metric_options.cache_clear()


def test_a_plugin_metric_is_built_like_a_builtin_and_a_broken_one_only_fails_when_asked(
        installed) -> None:
    installed(point("lab-test", "tests.test_registry:LabMetric"),
              point("broken-metric", "no_such_module_for_thumb:Nope"))
    assert list(metric_classes())[-1] == "lab-test"
    assert metric_options()["lab_scale"].default == 1
    metric = build_metric("lab-test", MetricOptions(lab_scale=3))
    item = CaptionItem(1, "i", None, "s", "abc", ("ref",))
    assert metric.score([item]).tolist() == [9.0]
    assert build_metric("bleu", MetricOptions()).name == "bleu"
    with pytest.raises(ValueError, match="'broken-metric' is not available: metric plugin "
                                         "'broken-metric = no_such_module_for_thumb:Nope'"):
        build_metric("broken-metric", MetricOptions())
    with pytest.raises(ValueError, match=r"unknown metric 'nope'.*plugins left out"):
        build_metric("nope", MetricOptions())


class SwitchedOn(LabMetric):
    name = "lab-switched-on"
    options = (MetricOption("lab_loud", "loud", True, "Shout (on unless turned off).", bool),)

    def __init__(self, loud: bool = True) -> None:
        self.loud, self.scale = loud, 1


def test_a_plugin_switch_that_is_on_by_default_can_be_turned_off(installed) -> None:
    """A bool option whose default is True gets its `--no-…` form on the command line."""
    import typer

    from thumb_tui.cli.analysis import with_metric_options

    installed(point("lab-switched-on", "tests.test_registry:SwitchedOn"))
    seen: dict[str, object] = {}

    def command(**settings: object) -> None:
        seen.update(settings)

    cli = typer.Typer()
    cli.command()(with_metric_options(command, [], "Takes every metric's options."))
    for arguments, loud in (([], True), (["--lab-loud"], True), (["--no-lab-loud"], False)):
        result = CliRunner().invoke(cli, arguments)
        assert result.exit_code == 0, result.output
        assert seen["lab_loud"] is loud
        assert build_metric("lab-switched-on", MetricOptions(lab_loud=loud)).loud is loud


def test_a_misspelt_metric_name_is_told_the_nearest_one() -> None:
    with pytest.raises(ValueError, match=r"unknown metric 'ciderd' \(did you mean "
                                         r"'cider-d'\?\); known: bleu, rouge-l, cider-d"):
        build_metric("ciderd", MetricOptions())
    with pytest.raises(ValueError, match=r"unknown metric 'nope'; known: "):
        build_metric("nope", MetricOptions())
