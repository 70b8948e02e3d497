"""The metrics the command line knows, found on their classes: each `Metric` subclass with
a name in the modules below brings its name, help line and options, so the command line
and `MetricOptions` are generated from the classes (adding a metric to one of these modules
is all it takes). Heavy libraries load only when a metric is built.

Metrics of other packages (plugins) come in through the entry-point group
`thumb_tui.metrics`: each entry point names a `Metric` subclass (`pkg.mod:Class`) or a
module whose named `Metric` subclasses all count. A plugin is code its user installed,
but its metadata is checked like input: a plugin that cannot be imported, names no
`Metric` subclass, declares an unusable name, help or option, or takes a name that a
built-in or another plugin has, is left out with a `PluginProblem` that names its
distribution and entry point; asking for its metric is then an error that says why, and
every other metric works as before."""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from difflib import get_close_matches
from functools import cache
from importlib import import_module
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType

from metrics.base import Metric, MetricOption, call_hook
from rubrics.escape import printable

METRIC_MODULES = ("metrics.text.bleu_rouge", "metrics.text.cider", "metrics.text.coco",
                  "metrics.models.bertscore", "metrics.models.clip", "metrics.text.spice")
ENTRY_POINT_GROUP = "thumb_tui.metrics"
DEFAULT_METRICS = ("bleu", "rouge-l", "cider-d")
KEEP_SELF_REFERENCES = "keep_self_references"
CLEAN = "clean"  # the text clean-up: thumb, none, or None for the default of what is scored
# what a metric name may be: it is typed after --metric, stored, and starts each signature
METRIC_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
OPTION_KINDS = (str, int, float, bool)
# `thumb metrics compute`'s own parameters, which no metric option may take
RESERVED_OPTIONS = frozenset({"metric", KEEP_SELF_REFERENCES, CLEAN, "judgments",
                              "allow_download", "help"})


def _subclasses(cls: type[Metric]) -> Iterator[type[Metric]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


@dataclass(frozen=True)
class PluginProblem:
    """Why a metric plugin (an entry point of `ENTRY_POINT_GROUP`) was left out; `metrics`
    are the metric names it concerns, when known."""

    distribution: str
    entry_point: str  # `name = value`, as the distribution declares it
    message: str
    metrics: tuple[str, ...] = ()

    def __str__(self) -> str:
        return printable(f"metric plugin {self.entry_point!r} of {self.distribution}: "
                         f"{self.message}", newlines=False)


@dataclass(frozen=True)
class _Plugins:
    classes: dict[str, type[Metric]]
    problems: tuple[PluginProblem, ...]


def _builtin_classes() -> dict[str, type[Metric]]:
    for module in METRIC_MODULES:
        import_module(module)
    found = [cls for cls in _subclasses(Metric) if cls.name and cls.__module__ in METRIC_MODULES]
    found.sort(key=lambda cls: METRIC_MODULES.index(cls.__module__))
    return {cls.name: cls for cls in found}


def _distribution(entry_point: EntryPoint) -> str:
    dist = entry_point.dist
    if dist is None:
        return "an unknown distribution"
    return f"distribution {dist.name} {dist.version}"


def _declared_classes(loaded: object) -> list[type[Metric]] | str:
    """The metric classes an entry point's object declares, or why it declares none."""
    if isinstance(loaded, ModuleType):
        classes = [value for value in vars(loaded).values()
                   if isinstance(value, type) and issubclass(value, Metric)
                   and value.__module__ == loaded.__name__ and value.name]
        return classes or f"module {loaded.__name__} defines no named Metric subclass"
    if isinstance(loaded, type) and issubclass(loaded, Metric):
        return [loaded]
    return (f"names a {type(loaded).__name__}, not a subclass of metrics.base.Metric (nor a "
            "module of them)")


def _class_problem(cls: type[Metric], options: dict[str, MetricOption]) -> str | None:
    """What makes a plugin's metric class unusable, given the options registered so far."""
    name = cls.name
    if not isinstance(name, str) or not METRIC_NAME.fullmatch(name):
        return (f"{cls.__qualname__}.name {name!r} is not a metric name (lower-case letters, "
                "digits, '-', '_', '.'; at most 64)")[:300]
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(cls.__abstractmethods__))
        return f"metric {name!r} ({cls.__qualname__}) does not implement {missing}"
    if not isinstance(cls.help, str) or not cls.help.strip() or not cls.help.isprintable():
        return f"metric {name!r} has no help line (`help`: one printable line)"
    if not isinstance(cls.options, tuple) or not all(
            isinstance(option, MetricOption) for option in cls.options):
        return f"metric {name!r}: `options` must be a tuple of metrics.base.MetricOption"
    for option in cls.options:
        key = option.option
        if not isinstance(key, str) or not key.isidentifier() or not key.islower():
            return f"metric {name!r}: option {key!r} is not a lower-case identifier"
        if key in RESERVED_OPTIONS:
            return f"metric {name!r}: option {key!r} is one of thumb's own options"
        if option.kind not in OPTION_KINDS:
            return (f"metric {name!r}: option {key!r} has kind {option.kind!r}, not one of "
                    "str, int, float, bool")
        if not isinstance(option.help, str) or not option.help.isprintable():
            return f"metric {name!r}: option {key!r} has no printable help"
        default, kind = option.default, option.kind
        if default is not None and not isinstance(default, kind) and not (
                kind is float and isinstance(default, int)):
            return (f"metric {name!r}: option {key!r} has the default {default!r}, not of kind "
                    f"{kind.__name__}")[:300]
        if key in options and options[key] != option:
            return (f"metric {name!r}: option {key!r} is declared differently by another "
                    "metric (share the same MetricOption, or use another name)")
    try:  # what `from_options` will pass
        inspect.signature(cls).bind(**{option.parameter: option.default
                                       for option in cls.options})
    except (TypeError, ValueError) as error:
        return (f"metric {name!r}: its constructor does not take its options' parameters "
                f"({error})")[:300]
    return None


def _load_plugins(builtins: dict[str, type[Metric]],
                  found: Iterable[EntryPoint] | None = None) -> _Plugins:
    """Every metric plugin that checks out, after the built-ins, by distribution and entry
    point name; the problems of the others."""
    points = sorted(entry_points(group=ENTRY_POINT_GROUP) if found is None else found,
                    key=lambda ep: (ep.dist.name if ep.dist else "", ep.name))
    options = {option.option: option for cls in builtins.values() for option in cls.options}
    problems: list[PluginProblem] = []
    claims: dict[str, list[tuple[type[Metric], PluginProblem]]] = {}
    for point in points:
        where = _distribution(point), f"{point.name} = {point.value}"
        try:
            loaded = point.load()
        except Exception as error:  # a broken plugin must not break the other metrics
            problems.append(PluginProblem(*where, f"cannot be imported "
                                          f"({type(error).__name__}: {error})"[:500],
                                          (point.name,)))
            continue
        declared = _declared_classes(loaded)
        if isinstance(declared, str):
            problems.append(PluginProblem(*where, declared, (point.name,)))
            continue
        for cls in declared:
            problem = _class_problem(cls, options)
            if problem is not None:
                problems.append(PluginProblem(*where, problem,
                                              (cls.name,) if isinstance(cls.name, str) else ()))
                continue
            if cls.name in builtins:
                problems.append(PluginProblem(*where, f"metric {cls.name!r} is a built-in "
                                              "metric's name; left out", (cls.name,)))
                continue
            claimants = claims.setdefault(cls.name, [])
            if all(other is not cls for other, _ in claimants):  # one class, two points
                claimants.append((cls, PluginProblem(*where, "", (cls.name,))))
            for option in cls.options:
                options.setdefault(option.option, option)
    classes: dict[str, type[Metric]] = {}
    for name, claimants in claims.items():
        if len(claimants) == 1:
            classes[name] = claimants[0][0]
            continue
        others = "; ".join(f"{p.entry_point!r} of {p.distribution}" for _, p in claimants)
        for _, claim in claimants:
            problems.append(PluginProblem(claim.distribution, claim.entry_point,
                                          f"metric {name!r} is also declared by another "
                                          f"plugin ({others}); all are left out "
                                          "until one is uninstalled", (name,)))
    return _Plugins(classes, tuple(problems))


@cache
def _registry() -> tuple[dict[str, type[Metric]], tuple[PluginProblem, ...]]:
    builtins = _builtin_classes()
    plugins = _load_plugins(builtins)
    return {**builtins, **plugins.classes}, plugins.problems


def metric_classes() -> dict[str, type[Metric]]:
    """name -> class of every metric: the built-ins in the order of METRIC_MODULES, then
    the plugins' (by distribution and entry point)."""
    return dict(_registry()[0])


def plugin_problems() -> tuple[PluginProblem, ...]:
    """The metric plugins left out, and why (each names its distribution and entry point)."""
    return _registry()[1]


def metric_class(name: str) -> type[Metric]:
    classes = metric_classes()
    if name not in classes:
        why = [str(p) for p in plugin_problems() if name in p.metrics]
        if why:
            raise ValueError(f"metric {name!r} is not available: " + "; ".join(why))
        others = [str(p) for p in plugin_problems()]
        # a name typed without its dash (`ciderd`) or a letter off is the nearest known one
        near = get_close_matches(name.casefold(), classes, n=1, cutoff=0.75)
        raise ValueError(f"unknown metric {printable(name, newlines=False)!r}"
                         + (f" (did you mean {near[0]!r}?)" if near else "")
                         + f"; known: {', '.join(classes)}"
                         + (f" (plugins left out: {'; '.join(others)})" if others else ""))
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
    """The metric `name` built from the options; its constructor is the metric's own code,
    so a failure there is an error naming it (metrics.base.call_hook)."""
    cls = metric_class(name)
    return call_hook(name, "its constructor", cls.from_options, options)
