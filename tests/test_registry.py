"""The metric registry is read off the metric classes: names, help lines, options."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from metrics.base import CaptionItem, Metric, MetricOption
from metrics.registry import MetricOptions, build_metric, metric_classes, metric_options
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
        name = ""  # not registered: only named metrics in METRIC_MODULES are
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
