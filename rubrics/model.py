"""Rubric definitions loaded from data files, and the total-score formula."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType

PENALTY_KEYS = ("fluency", "conciseness", "inclusive")
SCORE_KEYS = ("precision", "recall")


@dataclass(frozen=True)
class Dimension:
    """A scored dimension such as precision, with its scale and level descriptions."""

    key: str
    label: str
    short: str
    min: int
    max: int
    question: str
    definition: str
    levels: Mapping[int, str]


@dataclass(frozen=True)
class ErrorType:
    """One entry of the penalty catalogue: a fixed value, or a range the annotator picks from."""

    code: str
    label: str
    min: float
    max: float
    example: str = ""

    @property
    def fixed(self) -> bool:
        return self.min == self.max

    def check(self, value: float) -> None:
        if not self.min - 1e-9 <= value <= self.max + 1e-9:
            raise ValueError(
                f"{self.code!r} takes a penalty between {self.min:g} and {self.max:g}, "
                f"not {value:g}"
            )


@dataclass(frozen=True)
class PenaltyCategory:
    """A penalty family (fluency, conciseness, inclusive language) and its error types."""

    key: str
    label: str
    max_total: float
    types: tuple[ErrorType, ...]

    def type(self, code: str) -> ErrorType:
        for error_type in self.types:
            if error_type.code == code:
                return error_type
        known = ", ".join(t.code for t in self.types)
        raise ValueError(f"unknown {self.key} error type {code!r} (known: {known})")


@dataclass(frozen=True)
class Rule:
    key: str
    text: str


@dataclass(frozen=True)
class Example:
    """A worked example (the paper's Table 1 style) shown in the help screen."""

    id: str
    caption: str
    precision: int
    recall: int
    penalties: Mapping[str, float]
    why: str


@dataclass(frozen=True)
class Reason:
    """A reason code a resolver picks when settling a disagreement."""

    code: str
    label: str


@dataclass(frozen=True)
class Rubric:
    """A versioned rubric: dimensions, rules, penalty catalogue and total-score weights."""

    id: str
    version: str
    title: str
    source: str
    precision_weight: float
    recall_weight: float
    dimensions: tuple[Dimension, ...]
    rules: tuple[Rule, ...]
    penalties: tuple[PenaltyCategory, ...]
    examples: tuple[Example, ...] = field(default=())
    resolution_reasons: tuple[Reason, ...] = field(default=())

    @property
    def signature(self) -> str:
        return f"{self.id}-{self.version}"

    def dimension(self, key: str) -> Dimension:
        for dimension in self.dimensions:
            if dimension.key == key:
                return dimension
        raise ValueError(f"rubric {self.signature} has no dimension {key!r}")

    def penalty(self, key: str) -> PenaltyCategory:
        for category in self.penalties:
            if category.key == key:
                return category
        raise ValueError(f"rubric {self.signature} has no penalty {key!r}")

    def total(
        self,
        precision: float,
        recall: float,
        fluency: float = 0.0,
        conciseness: float = 0.0,
        inclusive: float = 0.0,
    ) -> float:
        """Weighted P and R minus the penalties (penalties are positive amounts)."""
        weighted = self.precision_weight * precision + self.recall_weight * recall
        return weighted - fluency - conciseness - inclusive


def _error_type(raw: dict) -> ErrorType:
    if "value" in raw:
        low = high = float(raw["value"])
    else:
        low, high = float(raw["min"]), float(raw["max"])
    return ErrorType(raw["code"], raw["label"], low, high, raw.get("example", ""))


def parse_rubric(data: dict) -> Rubric:
    """Build a Rubric from the parsed TOML structure of a rubric file."""
    return Rubric(
        id=data["id"],
        version=str(data["version"]),
        title=data["title"],
        source=data.get("source", ""),
        precision_weight=float(data["total"]["precision_weight"]),
        recall_weight=float(data["total"]["recall_weight"]),
        dimensions=tuple(
            Dimension(
                key=d["key"],
                label=d["label"],
                short=d["short"],
                min=int(d["min"]),
                max=int(d["max"]),
                question=d["question"],
                definition=d["definition"],
                levels=MappingProxyType({int(k): v for k, v in d["levels"].items()}),
            )
            for d in data["dimensions"]
        ),
        rules=tuple(Rule(r["key"], r["text"]) for r in data.get("rules", [])),
        penalties=tuple(
            PenaltyCategory(
                key=p["key"],
                label=p["label"],
                max_total=float(p["max_total"]),
                types=tuple(_error_type(t) for t in p["types"]),
            )
            for p in data["penalties"]
        ),
        examples=tuple(
            Example(
                id=e["id"],
                caption=e["caption"],
                precision=int(e["precision"]),
                recall=int(e["recall"]),
                penalties=MappingProxyType(dict(e.get("penalties", {}))),
                why=e["why"],
            )
            for e in data.get("examples", [])
        ),
        resolution_reasons=tuple(
            Reason(r["code"], r["label"]) for r in data.get("resolution_reasons", [])
        ),
    )


def load_rubric(name_or_path: str | Path = "thumb-1.0") -> Rubric:
    """Load a bundled rubric by name (``thumb-1.0``) or any rubric TOML file by path."""
    path = Path(name_or_path)
    if path.suffix == ".toml" and path.exists():
        text = path.read_text(encoding="utf-8")
    else:
        resource = resources.files("rubrics").joinpath(f"{name_or_path}.toml")
        if not resource.is_file():
            raise ValueError(f"no rubric named {name_or_path!r} and no such file")
        text = resource.read_text(encoding="utf-8")
    return parse_rubric(tomllib.loads(text))


THUMB_1_0 = load_rubric("thumb-1.0")
