"""Rubric definitions loaded from data files, and the total-score formula."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType

from rubrics.amounts import describe, penalty_ranges, within

# SCORE_KEYS, PENALTY_KEYS: the rating table's columns a rubric can fill (rubrics.schema)
from rubrics.schema import (
    MAX_RUBRIC_BYTES,
    PENALTY_KEYS,
    SCORE_KEYS,
    RubricError,
    check_rubric,
    parse_toml,
    read_toml,
)


def error_codes(type_text: str | None) -> list[str]:
    """The error type codes of a `<penalty>_type` column: comma-separated, spaces aside."""
    return [code for code in (c.strip() for c in (type_text or "").split(",")) if code]


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
    weight: float

    @property
    def scale(self) -> range:
        return range(self.min, self.max + 1)


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
        if not within(((self.min, self.max),), value):
            raise ValueError(
                f"{self.code!r} takes a penalty between {self.min:g} and {self.max:g}, "
                f"not {value:g}"
            )


@dataclass(frozen=True)
class PenaltyCategory:
    """A penalty family (fluency, conciseness, inclusive language) and its error types.
    With `multiple`, several errors add up (THUMB's fluency); otherwise one type at most."""

    key: str
    label: str
    short: str
    abbreviation: str
    max_total: float
    types: tuple[ErrorType, ...]
    multiple: bool = False

    def allowed_ranges(self) -> tuple[tuple[float, float], ...]:
        """The amounts a rating may hold, as closed intervals: 0 to the cap when errors add
        up; else none (0) or one type's value or range (rubrics.amounts: the one rule,
        which the database's triggers enforce through `Rubric.allowed_ranges`)."""
        return penalty_ranges(self.multiple, self.max_total,
                              ((t.min, t.max) for t in self.types))

    def allows(self, amount: float) -> bool:
        """Whether a rating may hold this amount: the only check of an amount."""
        return within(self.allowed_ranges(), amount)

    def allowed_text(self) -> str:
        """The allowed amounts in words, e.g. "one of 0, 0.5", "0 or between 0.5 and 1.5"."""
        return describe(self.allowed_ranges())

    def type(self, code: str) -> ErrorType:
        for error_type in self.types:
            if error_type.code == code:
                return error_type
        known = ", ".join(t.code for t in self.types)
        raise ValueError(f"unknown {self.key} error type {code!r} (known: {known})")

    def problem(self, amount: float, codes: Sequence[str] = ()) -> str | None:
        """Why a rating may not hold this amount with these error type codes (its
        `<key>_type` column, split at commas), or None when it may: the amount must be one
        `allows`; each code one of the catalogue's; without `multiple`, one code at most;
        with codes, the amount within the sum of their values or ranges. The one check of
        a penalty's amount and type, for import, the sessions and the screens."""
        for code in codes:
            if all(t.code != code for t in self.types):
                known = ", ".join(t.code for t in self.types)
                return f"unknown {self.key} error type {code!r} (known: {known})"
        if not self.allows(amount):
            return f"{self.key} penalty must be {self.allowed_text()}, not {amount:g}"
        if len(codes) > 1 and not self.multiple:
            return (f"{self.key} penalty takes one error type at most, not "
                    f"{','.join(codes)!r}")
        if codes:
            types = [self.type(code) for code in codes]
            span = ((sum(t.min for t in types), sum(t.max for t in types)),)
            if not within(span, amount):
                return (f"{self.key} penalty {amount:g} does not match error type "
                        f"{','.join(codes)!r}")
        return None

    def implied_amount(self, codes: Sequence[str]) -> float | None:
        """The amount error types imply when no amount is given: the sum of their fixed
        values; None when one of them is a range (the rater picks the amount)."""
        types = [self.type(code) for code in codes]
        if any(not t.fixed for t in types):
            return None
        return round(sum(t.min for t in types), 6)

    def named_type(self, amount: float) -> str | None:
        """The code of the one error type whose value or range holds `amount`, where the
        penalty takes one type at a time and exactly one does (an amount given without its
        type names it); None otherwise (0, several errors adding up, or ambiguous)."""
        if self.multiple or not amount:
            return None
        found = [t.code for t in self.types if within(((t.min, t.max),), amount)]
        return found[0] if len(found) == 1 else None


@dataclass(frozen=True)
class Rule:
    key: str
    text: str


@dataclass(frozen=True)
class Example:
    """A worked example (the paper's Table 1 style) shown in the help screen."""

    id: str
    caption: str
    scores: Mapping[str, int]
    penalties: Mapping[str, float]
    why: str

    @property
    def precision(self) -> int:
        return self.scores["precision"]

    @property
    def recall(self) -> int:
        return self.scores["recall"]


@dataclass(frozen=True)
class Reason:
    """A reason code a resolver picks when settling a disagreement."""

    code: str
    label: str


@dataclass(frozen=True)
class Rubric:
    """A versioned rubric: dimensions, rules, penalty catalogue and total-score weights.
    `definition` is the parsed file, which the database stores so that every rating's
    rubric can be read back from the database alone."""

    id: str
    version: str
    title: str
    source: str
    dimensions: tuple[Dimension, ...]
    rules: tuple[Rule, ...]
    penalties: tuple[PenaltyCategory, ...]
    examples: tuple[Example, ...] = field(default=())
    resolution_reasons: tuple[Reason, ...] = field(default=())
    definition: Mapping = field(default_factory=dict, compare=False, repr=False)

    @property
    def signature(self) -> str:
        return f"{self.id}-{self.version}"

    @property
    def score_keys(self) -> tuple[str, ...]:
        return tuple(d.key for d in self.dimensions)

    @property
    def penalty_keys(self) -> tuple[str, ...]:
        return tuple(p.key for p in self.penalties)

    @property
    def labels(self) -> dict[str, str]:
        """One-letter labels of the dimensions and penalties (P, R, F, C, I for THUMB)."""
        return {**{d.key: d.short for d in self.dimensions},
                **{p.key: p.short for p in self.penalties}}

    def has_penalty(self, key: str) -> bool:
        return key in self.penalty_keys

    def formula(self) -> str:
        """The total as text, as the help screen shows it (THUMB: 0.5·P + 0.5·R minus the
        fluency, conciseness and inclusive-language penalties)."""
        weighted = " + ".join(f"{d.weight:g}·{d.short}" for d in self.dimensions)
        return weighted + "".join(f" − {p.label.lower()}" for p in self.penalties)

    def allowed_ranges(self) -> dict[str, tuple[tuple[float, float], ...]]:
        """Every rating column's valid values under this rubric, as closed intervals: each
        level of a dimension, each penalty's amounts, and 0 for a penalty it does not have.
        A dimension it does not have stays NULL. The database enforces these."""
        ranges: dict[str, tuple[tuple[float, float], ...]] = {
            d.key: tuple((float(level), float(level)) for level in d.scale)
            for d in self.dimensions
        }
        for key in PENALTY_KEYS:
            ranges[key] = self.penalty(key).allowed_ranges() if self.has_penalty(key) else (
                (0.0, 0.0),)
        return ranges

    def penalty_problem(self, key: str, amount: float, codes: Sequence[str] = ()
                        ) -> str | None:
        """`PenaltyCategory.problem` of the penalty column `key` (a column of a penalty this
        rubric does not have must stay 0 without a type)."""
        if self.has_penalty(key):
            return self.penalty(key).problem(amount, codes)
        if amount or codes:
            return f"rubric {self.signature} has no {key} penalty"
        return None

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

    def total(self, *scores: float, **values: float) -> float:
        """The weighted scores minus the penalties (positive amounts): scores by position
        in the rubric's order or by key, penalties by key, e.g. `total(5, 4, fluency=0.1)`.
        """
        named = dict(zip(self.score_keys, scores, strict=False))
        if len(scores) > len(named) or named.keys() & values.keys():
            raise ValueError(f"{self.signature} takes the scores {self.score_keys} once each")
        named.update(values)
        unknown = named.keys() - {*self.score_keys, *self.penalty_keys}
        if unknown:
            raise ValueError(f"rubric {self.signature} has no {', '.join(sorted(unknown))}")
        return self.total_of(named)

    def total_of(self, values: Mapping[str, object]) -> float:
        """The total of a rating's values by column name. Penalties the rubric does not
        have must be 0 or missing."""
        weighted = sum(d.weight * float(values[d.key]) for d in self.dimensions)  # type: ignore[arg-type]
        penalties = sum(float(values.get(key) or 0.0) for key in PENALTY_KEYS)  # type: ignore[arg-type]
        return weighted - penalties


def _error_type(raw: dict) -> ErrorType:
    if "value" in raw:
        low = high = float(raw["value"])
    else:
        low, high = float(raw["min"]), float(raw["max"])
    return ErrorType(raw["code"], raw["label"], low, high, raw.get("example", ""))


def _check_keys(kind: str, keys: list[str], columns: tuple[str, ...]) -> None:
    if kind == "dimension" and sorted(keys) != sorted(columns):
        raise ValueError(f"a rubric scores the dimensions {', '.join(columns)} (under its own "
                         f"labels, scales and weights), not {', '.join(keys) or 'none'}")
    for key in keys:
        if key not in columns:
            raise ValueError(f"{kind} {key!r} has no column in the rating table (it has "
                             f"{', '.join(columns)}); a new one needs a schema migration")
    if len(set(keys)) != len(keys):
        raise ValueError(f"a {kind} appears twice: {', '.join(keys)}")


def _dimension(raw: dict, weights: dict) -> Dimension:
    dimension = Dimension(
        key=raw["key"],
        label=raw["label"],
        short=raw["short"],
        min=int(raw["min"]),
        max=int(raw["max"]),
        question=raw["question"],
        definition=raw["definition"],
        levels=MappingProxyType({int(k): v for k, v in raw["levels"].items()}),
        weight=float(weights[f"{raw['key']}_weight"]),
    )
    if dimension.min > dimension.max or set(dimension.levels) != set(dimension.scale):
        raise ValueError(f"dimension {dimension.key!r}: levels must describe every score "
                         f"from {dimension.min} to {dimension.max}")
    return dimension


def _penalty(raw: dict) -> PenaltyCategory:
    return PenaltyCategory(
        key=raw["key"],
        label=raw["label"],
        short=raw.get("short", raw["label"][:1].upper()),
        abbreviation=raw.get("abbreviation", raw["label"]),
        max_total=float(raw["max_total"]),
        types=tuple(_error_type(t) for t in raw["types"]),
        multiple=bool(raw.get("multiple", False)),
    )


def parse_rubric(data: Mapping, name: str = "rubric", *, check: bool = True) -> Rubric:
    """Build a Rubric from the parsed TOML structure of a rubric file (`name`, for the
    messages). The total's weights are `[total] <dimension>_weight`; dimensions and
    penalties must be columns of the rating table (SCORE_KEYS, PENALTY_KEYS). The data is
    checked against the rubric's schema first (rubrics.schema: RubricError lists every
    problem); `check=False` is for a rubric the database already holds, which was checked
    when it was stored and is read back as it is."""
    if check:
        check_rubric(data, name)
    weights = data["total"]
    dimensions = tuple(_dimension(d, weights) for d in data["dimensions"])
    penalties = tuple(_penalty(p) for p in data["penalties"])
    _check_keys("dimension", [d.key for d in dimensions], SCORE_KEYS)
    _check_keys("penalty", [p.key for p in penalties], PENALTY_KEYS)
    score_keys = {d.key for d in dimensions}
    return Rubric(
        id=data["id"],
        version=str(data["version"]),
        title=data["title"],
        source=data.get("source", ""),
        dimensions=dimensions,
        rules=tuple(Rule(r["key"], r["text"]) for r in data.get("rules", [])),
        penalties=penalties,
        examples=tuple(
            Example(
                id=e["id"],
                caption=e["caption"],
                scores=MappingProxyType({k: int(v) for k, v in e.items() if k in score_keys}),
                penalties=MappingProxyType(dict(e.get("penalties", {}))),
                why=e["why"],
            )
            for e in data.get("examples", [])
        ),
        resolution_reasons=tuple(
            Reason(r["code"], r["label"]) for r in data.get("resolution_reasons", [])
        ),
        definition=MappingProxyType(data),
    )


def load_rubric(name_or_path: str | Path = "thumb-1.0") -> Rubric:
    """Load a bundled rubric by name (``thumb-1.0``), one that an installed package ships
    (entry-point group ``thumb_tui.rubrics``: ``NAME = "package"`` is the package's
    ``NAME.toml``, ``NAME = "package:stem"`` its ``stem.toml``; a bundled name wins), or
    any rubric TOML file by path. A file is untrusted input: RubricError lists every
    problem, each as `FILE: problem` (rubrics.schema)."""
    path = Path(name_or_path)
    if path.suffix == ".toml" and path.exists():
        data = read_toml(path, max_bytes=MAX_RUBRIC_BYTES, error=RubricError)
        return parse_rubric(data, str(path))
    resource = resources.files("rubrics").joinpath(f"{name_or_path}.toml")
    name = f"{name_or_path}.toml (bundled)"
    if not resource.is_file():
        from importlib.metadata import entry_points

        from rubrics.escape import printable

        shipped = [point for point in entry_points(group="thumb_tui.rubrics")
                   if point.name == str(name_or_path)]
        where = [f"{p.name} = {p.value!r} of "
                 + (f"distribution {p.dist.name} {p.dist.version}" if p.dist else "a package")
                 for p in shipped]
        if len(shipped) > 1:
            raise ValueError(printable(f"rubric {name_or_path!r} is shipped by several "
                                       f"packages: {'; '.join(where)}", newlines=False))
        if not shipped and path.is_file():
            raise RubricError(str(path), ["a rubric file is TOML, named NAME.toml"])
        if not shipped:
            bundled = sorted(p.name.removesuffix(".toml") for p in resources.files(
                "rubrics").iterdir() if p.name.endswith(".toml"))
            packaged = sorted({p.name for p in entry_points(group="thumb_tui.rubrics")})
            raise ValueError(printable(
                f"no rubric named {name_or_path!r} and no such file (rubrics by name: "
                f"{', '.join([*bundled, *packaged])}; or give a path to a .toml file)",
                newlines=False))
        point, name = shipped[0], printable(f"rubric plugin {where[0]}", newlines=False)
        try:
            stem = point.attr or point.name
            if "/" in stem or "\\" in stem or stem.startswith("."):
                raise ValueError(f"{stem!r} is not a file name")
            resource = resources.files(point.module).joinpath(f"{stem}.toml")
            found = resource.is_file()
        except Exception as error:  # e.g. the package's own code failed to import
            raise ValueError(f"{name}: cannot be read ({type(error).__name__}: "
                             f"{printable(str(error), newlines=False)})") from None
        if not found:
            raise ValueError(f"{name}: the package has no {stem}.toml")
    return parse_rubric(parse_toml(resource.read_bytes(), name, max_bytes=MAX_RUBRIC_BYTES,
                                   error=RubricError), name)


THUMB_1_0 = load_rubric("thumb-1.0")
