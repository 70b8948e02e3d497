"""The metric interface: the base class fixes the flow; each metric fills a few hooks."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, TypeVar

import numpy as np

from metrics.signature import format_signature
from rubrics.escape import printable

_Result = TypeVar("_Result")
# a signature field's key, as the built-ins name theirs; its value is any one printable
# line without `|`, which separates the fields (metrics.signature.parse_signature)
SIGNATURE_KEY = re.compile(r"[a-z0-9][a-z0-9_.-]{0,39}")
# the fields a run adds after a metric's own settings (ReferenceRule, format_signature)
RUN_FIELDS = frozenset({"refs", "self", "clean", "thumb-tui"})


@dataclass(frozen=True)
class CaptionItem:
    """A caption to score, with its image's references minus any that is the caption
    itself; texts as the run's clean-up left them (THUMB's, or none: as given)."""

    caption_id: int
    image_key: str
    image_path: str | None
    system: str | None  # None for judgment sets without systems
    text: str
    references: tuple[str, ...]


@dataclass(frozen=True)
class ReferenceRule:
    """How a run chose each caption's references and cleaned the texts: rules, never counts
    of the data, so that a signature (the key under which stored scores are reused) stays
    the same when unrelated captions are imported. The one count it carries, how many
    references were the caption itself, is shown beside the signature (`beside_signature`),
    never in it, and takes no part in comparing two rules."""

    # excluded (texts compared after the clean-up, ignoring case), excluded-exact (texts
    # compared as given, under clean:none), excluded-by-id (ids compared) or kept
    self_references: str = "excluded"
    clean: str = "thumb"  # THUMB's clean-up, or none (the texts as given)
    source: str = "image"  # where the references come from: the caption's image
    # references that are their caption itself: left out (excluded…) or kept, as the rule says
    self_reference_count: int = field(default=0, compare=False)

    def fields(self, uses_references: bool) -> dict[str, str]:
        """The signature's fields; a metric that uses no references names only the clean-up."""
        clean = {"clean": self.clean}
        return {"refs": self.source, "self": self.self_references, **clean} if (
            uses_references) else clean

    def beside_signature(self, uses_references: bool) -> str | None:
        """The count of the data a signature leaves out, as a line beside it (`48
        self-references excluded`); None for a metric that uses no references."""
        if not uses_references:
            return None
        return self_reference_note(self.self_reference_count, self.self_references)


def self_reference_note(count: int, rule: str) -> str:
    """`48 self-references excluded` (or `kept`): how many references were their caption
    itself under a signature's `self:` rule, shown beside the signature wherever it is."""
    done = "kept" if rule == "kept" else "excluded"
    return f"{count} self-reference{'' if count == 1 else 's'} {done}"


@dataclass(frozen=True)
class MetricOption:
    """A setting a metric takes from the command line as `--{option}` (underscores become
    dashes). `option` is its key among all metrics' options; `parameter` the keyword of
    the metric's constructor."""

    option: str
    parameter: str
    default: object
    help: str
    kind: type = str
    minimum: int | None = None

    @property
    def flag(self) -> str:
        return "--" + self.option.replace("_", "-")


DEVICE = MetricOption("device", "device", "auto", "auto, cpu or cuda.")
BATCH_SIZE = MetricOption(
    "batch_size", "batch_size", None,
    "Batch size of a neural model (default: what the free GPU memory holds; 64 on the CPU).",
    int, minimum=1)


NO_REFERENCES = "no references"  # why a reference-based score is undefined


def call_hook(metric: str, hook: str, function: Callable[..., _Result],
              *args: object) -> _Result:
    """`function(*args)`, a metric's own code (a plugin's, perhaps): an error the command
    line reports (ValueError, RuntimeError) is raised again with the metric's name before
    its message (a subclass of them, which its catcher may need whole, passes as it is);
    any other, or a `sys.exit`, becomes a RuntimeError naming the metric and the hook,
    never a traceback."""
    try:
        return function(*args)
    except (ValueError, RuntimeError) as error:
        if type(error) not in (ValueError, RuntimeError):
            raise
        # whole, not cut as below: its end may say what to do
        raise type(error)(printable(f"metric {metric!r}: {error}", newlines=False)) from error
    except (Exception, SystemExit) as error:
        raise RuntimeError(printable(f"metric {metric!r} failed in {hook}: "
                                     f"{type(error).__name__}: {error}"[:500],
                                     newlines=False)) from error


class Metric(ABC):
    """Subclasses set `name`, `help` and the `options` their constructor takes, and
    implement `settings()` (the signature fields) and `compute()`. A subclass in another
    package is a plugin: its distribution names it (or its module) in the entry-point
    group `thumb_tui.metrics` (see metrics.registry)."""

    name: str = ""
    help: ClassVar[str] = ""
    options: ClassVar[tuple[MetricOption, ...]] = ()
    corpus_level: bool = False  # True when one caption's score depends on the others
    needs_references: bool = True  # False for reference-free metrics (CLIP-S)
    needs_images: bool = False

    @classmethod
    def from_options(cls, values: Mapping[str, object]) -> Metric:
        """The metric built from the command line's values of its options."""
        return cls(**{option.parameter: values[option.option] for option in cls.options})

    @abstractmethod
    def settings(self, items: Sequence[CaptionItem]) -> dict[str, str]:
        """Everything besides the data that decides the scores (library, model, layer…)."""

    @abstractmethod
    def compute(self, items: Sequence[CaptionItem]) -> np.ndarray:
        """One score per item, in order."""

    def signature(self, items: Sequence[CaptionItem], references: ReferenceRule | str) -> str:
        """The settings and the reference rule (or a plain description of where references
        come from, such as BISON's `candidate-image`)."""
        fields = references.fields(self.needs_references) if isinstance(
            references, ReferenceRule) else {"refs": references}
        return format_signature(self.name, {**self._checked_settings(items), **fields})

    def _checked_settings(self, items: Sequence[CaptionItem]) -> dict[str, str]:
        """`settings()` as signature fields, checked like input: a signature is stored, parsed
        at its `|` and printed, so a key or value that would break it is an error."""
        settings = call_hook(self.name, "settings()", self.settings, items)
        where = f"metric {self.name!r}: settings()"
        if not isinstance(settings, Mapping):
            raise RuntimeError(f"{where} returned a {type(settings).__name__}, not a dict "
                               "of signature fields")
        checked = {}
        for key, value in settings.items():
            text = str(value)
            if not isinstance(key, str) or not SIGNATURE_KEY.fullmatch(key):
                raise RuntimeError(printable(
                    f"{where}: the key {key!r} is not a signature field name (lower-case "
                    "letters, digits, '-', '_', '.'; at most 40)"[:300], newlines=False))
            if key in RUN_FIELDS:
                raise RuntimeError(f"{where}: the key {key!r} is a field thumb-tui adds "
                                   f"itself ({', '.join(sorted(RUN_FIELDS))})")
            if "|" in text or not text.isprintable():
                raise RuntimeError(printable(
                    f"{where}: the value of {key!r}, {text!r}, must be one printable line "
                    "without '|' (which separates a signature's fields)"[:300],
                    newlines=False))
            checked[key] = text
        return checked

    def undefined_reason(self, item: CaptionItem) -> str | None:
        """Why this metric has no score for the item (NaN from `score()`), or None."""
        return NO_REFERENCES if self.needs_references and not item.references else None

    def score(self, items: Sequence[CaptionItem]) -> np.ndarray:
        """One score per item; NaN where the metric is undefined (`undefined_reason`), and
        `compute()` only sees the items it can score."""
        scores = np.full(len(items), np.nan)
        defined = [i for i, item in enumerate(items) if self.undefined_reason(item) is None]
        if not defined:
            return scores
        if self.needs_images and (absent := [items[i].image_key for i in defined
                                             if not items[i].image_path
                                             or not Path(items[i].image_path).is_file()]):
            raise RuntimeError(f"{self.name} needs the image files: {len(absent)} caption(s) "
                               f"have none, e.g. of image {absent[0]!r} (a judgment set "
                               "imported without an image column has no images)")
        computed = call_hook(self.name, "compute()", self.compute,
                             [items[i] for i in defined])
        scores[defined] = self._checked_scores(computed, len(defined))
        return scores

    def _checked_scores(self, computed: object, count: int) -> np.ndarray:
        """`compute()`'s result as `count` finite floats, or an error saying what is wrong:
        it is stored under the signature as a score, so NaN (which would claim a caption
        is scored) and infinities (which no statistic survives) are refused; a caption the
        metric cannot score is named by `undefined_reason()`, which stores why."""
        try:
            values = np.asarray(computed, dtype=float)
        except (TypeError, ValueError, OverflowError) as error:
            raise RuntimeError(printable(f"{self.name}: compute() returned something other "
                                         f"than numbers ({error})"[:300],
                                         newlines=False)) from None
        if values.shape != (count,):
            raise RuntimeError(f"{self.name} returned {values.shape} scores for {count}")
        if not np.isfinite(values).all():
            raise RuntimeError(
                f"{self.name} returned {int(np.isnan(values).sum())} NaN and "
                f"{int(np.isinf(values).sum())} infinite scores for "
                f"the {count} captions it can score; nothing was stored for them (a caption "
                "it cannot score needs its undefined_reason(), which is stored instead)")
        return values
