"""The metrics the command line knows, found on their classes: each `Metric` subclass with
a name in the modules below brings its name, help line and options, so the command line
and `MetricOptions` are generated from the classes (adding a metric to one of these modules
is all it takes). Heavy libraries load only when a metric is built."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache
from importlib import import_module

from metrics.base import Metric, MetricOption

METRIC_MODULES = ("metrics.text_metrics", "metrics.cider", "metrics.coco", "metrics.bertscore",
                  "metrics.clip", "metrics.spice")
DEFAULT_METRICS = ("bleu", "rouge-l", "cider-d")
KEEP_SELF_REFERENCES = "keep_self_references"
CLEAN = "clean"  # the text clean-up: thumb, none, or None for the default of what is scored


def _subclasses(cls: type[Metric]) -> Iterator[type[Metric]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


@cache
def metric_classes() -> dict[str, type[Metric]]:
    """name -> class of every metric, in the order of METRIC_MODULES."""
    for module in METRIC_MODULES:
        import_module(module)
    found = [cls for cls in _subclasses(Metric) if cls.name and cls.__module__ in METRIC_MODULES]
    found.sort(key=lambda cls: METRIC_MODULES.index(cls.__module__))
    return {cls.name: cls for cls in found}


def metric_class(name: str) -> type[Metric]:
    classes = metric_classes()
    if name not in classes:
        raise ValueError(f"unknown metric {name!r}; known: {', '.join(classes)}")
    return classes[name]


@cache
def metric_options() -> dict[str, MetricOption]:
    """Every option any metric takes, once (metrics that share a device share the option)."""
    options: dict[str, MetricOption] = {}
    for cls in metric_classes().values():
        for option in cls.options:
            options.setdefault(option.option, option)
    return options


class MetricOptions(Mapping[str, object]):
    """The values metrics are built from: each metric's declared options (defaults unless
    given), whether a caption keeps a reference identical to itself, and the text clean-up
    (`thumb`, `none`, or None: THUMB's for a project, none for a judgment set)."""

    def __init__(self, **values: object) -> None:
        known = metric_options()
        unknown = sorted(set(values) - set(known) - {KEEP_SELF_REFERENCES, CLEAN})
        if unknown:
            raise TypeError(f"unknown metric option(s): {', '.join(unknown)}")
        self._values = {name: option.default for name, option in known.items()}
        self._values[KEEP_SELF_REFERENCES] = False
        self._values[CLEAN] = None
        self._values.update(values)

    def __getitem__(self, name: str) -> object:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __getattr__(self, name: str) -> object:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def keep_self_references(self) -> bool:
        return bool(self._values[KEEP_SELF_REFERENCES])

    @property
    def clean(self) -> str | None:
        return self._values[CLEAN]  # type: ignore[return-value]


def build_metric(name: str, options: MetricOptions) -> Metric:
    return metric_class(name).from_options(options)
