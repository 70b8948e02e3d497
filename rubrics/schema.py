"""Rubric and keymap files are untrusted input, like an import: one gate per kind of file
checks the whole file against a schema before anything uses it, and reports every problem
at once, each as a `FILE: problem` line (a table of an array is counted from 1:
`dimensions[2].short`).

`read_toml` is the reading both gates share: a bounded size, UTF-8 (a BOM is allowed),
nesting bounded *before* `tomllib` parses (it recurses on nested arrays and inline tables,
and a dotted key of many parts costs it memory quadratic in their number), and a parse
error or a non-UTF-8 byte named with the file. `rubric_problems` is the rubric's schema:
types without coercion, finite numbers in bounded ranges, bounded sizes, unique ids,
short labels and codes, identifiers from a small alphabet, and every text through the
import's character check (`rubrics.escape`).
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path

from rubrics.amounts import penalty_ranges, within
from rubrics.escape import MAX_TEXT_CHARS, forbidden_character, printable, refusal
from rubrics.json_limits import utf8_problem

# The rating table has one column per score and penalty it can hold. A rubric scores both
# dimensions and any of the penalties, under its own labels, scales, amounts, catalogue
# and weights; another dimension or penalty needs a migration that adds its column.
SCORE_KEYS = ("precision", "recall")
PENALTY_KEYS = ("fluency", "conciseness", "inclusive")

MAX_TOML_DEPTH = 16  # brackets, parts of a dotted key, and tables in the parsed value
MAX_RUBRIC_BYTES = 1 << 20
MAX_LISTED = 50
MAX_LINE_CHARS = 500  # a title, label, question or source: one line
MAX_COLUMN_CHARS = 40  # a penalty's abbreviation (or its label, without one): a column name
MAX_LEVELS = 11  # a scale of at most 11 levels (0-10)
MAX_SCORE = 100  # scale ends lie in -100..100
MAX_WEIGHT = 100.0
MAX_PENALTY = 100.0
MAX_ITEMS = 100  # error types of a penalty, rules, examples, reasons
RESERVED_LABELS = ("n", "system", "Total")  # columns the report's tables already have

IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
_LEVEL = re.compile(r"[+-]?[0-9]{1,4}")


class FileError(ValueError):
    """A file refused: `problems` lists everything wrong with it; the message has one
    `FILE: problem` line for each (control characters shown as escapes)."""

    def __init__(self, name: str, problems: list[str]) -> None:
        self.name, self.problems = name, list(problems)
        shown = printable(name, newlines=False)
        lines = [f"{shown}: {printable(problem, newlines=False)}"
                 for problem in self.problems[:MAX_LISTED]]
        if len(self.problems) > MAX_LISTED:
            lines.append(f"{shown}: ... and {len(self.problems) - MAX_LISTED} more problems")
        super().__init__("\n".join(lines))


class RubricError(FileError):
    """A rubric file (or a rubric's parsed data) that cannot be used."""


# ---------------------------------------------------------------------------------------
# Reading a TOML file within limits

# Strings (the four kinds TOML has) and comments: what the nesting scan skips. A string
# is replaced by one key character, so that a quoted part of a dotted key still counts.
_TOML_SKIPPED = re.compile(
    r'"""(?:[^\\]|\\[\s\S])*?"""(?!")'
    r"|'''[\s\S]*?'''(?!')"
    r'|"(?:[^"\\\n]|\\.)*+"'
    r"|'[^'\n]*+'"
    r"|#[^\n]*+"
)
_BRACKET = re.compile(r"[\[\]{}]")
# A chain of more than MAX_TOML_DEPTH dot-joined words: only a key can be one (a float or
# a time has two parts); possessive, so that a long word is scanned once
_LONG_KEY = re.compile(
    rf"(?<![\w-])[\w-]++(?:[ \t]*+\.[ \t]*+[\w-]++){{{MAX_TOML_DEPTH},}}")


def nesting_problem(text: str) -> str | None:
    """Whether `text` nests deeper than MAX_TOML_DEPTH: arrays and inline tables (table
    headers count too; theirs are one or two brackets), or a dotted key of more parts.
    Found in a few regular-expression passes over the text, before any parser recurses."""
    plain = _TOML_SKIPPED.sub(lambda m: "" if m.group().startswith("#") else "s", text)
    if _LONG_KEY.search(plain):
        return f"a dotted key of more than {MAX_TOML_DEPTH} parts"
    if len(_BRACKET.findall(plain)) > MAX_TOML_DEPTH:  # else it cannot be too deep
        level = 0
        for bracket in _BRACKET.finditer(plain):
            level = level + 1 if bracket.group() in "[{" else max(level - 1, 0)
            if level > MAX_TOML_DEPTH:
                return f"arrays or inline tables nested deeper than {MAX_TOML_DEPTH} levels"
    return None


def _depth(value: object) -> int:
    """How deep tables and arrays nest in `value`, without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        children = (item.values() if isinstance(item, dict)
                    else item if isinstance(item, list) else None)
        if children is None:
            deepest = max(deepest, level)
            continue
        deepest = max(deepest, level + 1)
        stack.extend((child, level + 1) for child in children)
    return deepest


def parse_toml(raw: bytes, name: str, *, max_bytes: int,
               error: type[FileError] = FileError) -> dict:
    """The TOML document in `raw` (the file `name`), or `error` naming the file and what
    is wrong: too large, not UTF-8, nested too deep, not TOML."""
    if len(raw) > max_bytes:
        raise error(name, [f"larger than {max_bytes:,} bytes"])
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line, problem = utf8_problem(raw, exc.start)
        raise error(name, [f"line {line}: {problem}; a TOML file is UTF-8"]) from None
    problem = nesting_problem(text)
    if problem is not None:
        raise error(name, [problem])
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise error(name, [f"nested deeper than {MAX_TOML_DEPTH} levels"]) from None
    except ValueError as exc:  # TOMLDecodeError, or an integer of thousands of digits
        raise error(name, [f"not a readable TOML file: {exc}"]) from None
    if _depth(data) > MAX_TOML_DEPTH:
        raise error(name, [f"tables nested deeper than {MAX_TOML_DEPTH} levels"])
    return data


def read_toml(path: Path, *, max_bytes: int, error: type[FileError] = FileError) -> dict:
    """The TOML file at `path`, read within the limits of `parse_toml` (at most
    `max_bytes` of it are read). A FIFO, a device or a folder is refused before it is
    opened (a FIFO would block the read until a writer comes)."""
    from rubrics.files import regular_file

    try:
        regular_file(path)
    except ValueError as exc:
        problem = str(exc).removeprefix(f"{path}: ")
        raise error(str(path), [problem if "not a regular file" in problem
                                else f"cannot read the file: {problem}"]) from None
    try:
        with path.open("rb") as handle:
            raw = handle.read(max_bytes + 1)
    except OSError as exc:
        raise error(str(path), [f"cannot read the file: {exc.strerror or exc}"]) from None
    return parse_toml(raw, str(path), max_bytes=max_bytes, error=error)


# ---------------------------------------------------------------------------------------
# Checking values, collecting problems

def kind_of(value: object) -> str:
    """How a message names the TOML type of `value`."""
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return "a date or time"


def shown(value: str, limit: int = 40) -> str:
    """A text as a message quotes it: repr, cut after `limit` characters."""
    return repr(value[:limit] + "…" if len(value) > limit else value)


def _amount(value: float) -> str:
    if isinstance(value, int):
        return str(value) if abs(value) < 10**15 else f"a number of {len(str(abs(value)))} digits"
    return f"{value:g}"


LINE, TEXT, IDENT, SHORT, ABBREVIATION = "line", "text", "identifier", "short", "abbreviation"


def text_problem(value: str, kind: str = TEXT) -> str | None:
    """What is wrong with an untrusted text of this kind, or None: a forbidden character
    (as an import refuses it), a length over the kind's bound, or characters outside its
    alphabet."""
    character = forbidden_character(value)
    if character is not None:
        return refusal(character)
    if kind == TEXT:
        return (f"{len(value):,} characters (at most {MAX_TEXT_CHARS:,})"
                if len(value) > MAX_TEXT_CHARS else None)
    if kind == LINE:
        if len(value) > MAX_LINE_CHARS:
            return f"{len(value):,} characters (at most {MAX_LINE_CHARS})"
        return "must be one line (no newline or tab)" if "\n" in value or "\t" in value else None
    if kind == IDENT:
        return None if IDENTIFIER.fullmatch(value) else (
            f"must be 1 to 64 letters, digits, '.', '_', '+' or '-', starting with a letter "
            f"or digit, not {shown(value)}")
    if kind == SHORT:
        return None if 1 <= len(value) <= 3 and value.isalnum() else (
            f"must be 1 to 3 letters or digits, not {shown(value)}")
    # ABBREVIATION: a column name of the report's tables (escaped there like any text)
    if "\n" in value or "\t" in value or not value.strip() or len(value) > MAX_COLUMN_CHARS:
        return f"must be one line of 1 to {MAX_COLUMN_CHARS} characters, not {shown(value)}"
    return None


class Checker:
    """Checks values into a list of `where: problem` lines."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def add(self, where: str, problem: str) -> None:
        self.problems.append(f"{where}: {problem}" if where else problem)

    def text(self, where: str, value: object, kind: str = TEXT, *,
             required: bool = True) -> str | None:
        if not isinstance(value, str):
            self.add(where, f"must be text, not {kind_of(value)}")
            return None
        if required and not value.strip():
            self.add(where, "must not be empty")
            return None
        problem = text_problem(value, kind)
        if problem is not None:
            self.add(where, problem)
            return None
        return value

    def number(self, where: str, value: object, low: float, high: float) -> float | None:
        """A finite number (integer or float, never true/false) from `low` to `high`."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.add(where, f"must be a number, not {kind_of(value)}")
            return None
        if isinstance(value, float) and not math.isfinite(value):
            self.add(where, f"must be a finite number, not {value}")
            return None
        if not low <= value <= high:
            self.add(where, f"must be from {low:g} to {high:g}, not {_amount(value)}")
            return None
        return float(value)

    def integer(self, where: str, value: object, low: int, high: int) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int):
            shown_kind = f"{value:g}" if isinstance(value, float) else kind_of(value)
            self.add(where, f"must be a whole number, not {shown_kind}")
            return None
        if not low <= value <= high:
            self.add(where, f"must be from {low} to {high}, not {_amount(value)}")
            return None
        return value

    def flag(self, where: str, value: object) -> bool | None:
        if not isinstance(value, bool):
            self.add(where, f"must be true or false, not {kind_of(value)}")
            return None
        return value

    def table(self, where: str, value: object, required: tuple[str, ...] = (),
              optional: tuple[str, ...] = (), *, keys: bool = True) -> dict | None:
        """A table; with `keys`, one that has every `required` key and no other than the
        `optional` ones."""
        if not isinstance(value, dict):
            self.add(where, f"must be a table, not {kind_of(value)}")
            return None
        if keys:
            missing = [key for key in required if key not in value]
            if missing:
                self.add(where, f"lacks {', '.join(missing)}")
            for key in value:
                if key not in required and key not in optional:
                    known = ", ".join((*required, *optional))
                    self.add(where, f"unknown key {shown(key)} (known: {known})")
        return value

    def tables(self, where: str, value: object) -> list[dict] | None:
        """An array of tables (`[[where]]`), at most MAX_ITEMS of them; None (the problem
        noted) when it is something else."""
        if not isinstance(value, list):
            self.add(where, f"must be an array of tables ([[{where}]]), not {kind_of(value)}")
            return None
        if len(value) > MAX_ITEMS:
            self.add(where, f"{len(value)} tables (at most {MAX_ITEMS})")
            return None
        wrong = [number for number, item in enumerate(value, 1) if not isinstance(item, dict)]
        if wrong:
            self.add(where, f"must hold tables only (item {wrong[0]} is "
                            f"{kind_of(value[wrong[0] - 1])})")
            return None
        return value

    def unique(self, where: str, what: str, values: list[str | None]) -> None:
        seen: set[str] = set()
        for value in values:
            if value is not None and value in seen:
                self.add(where, f"two with the {what} {shown(value)}")
            if value is not None:
                seen.add(value)


# ---------------------------------------------------------------------------------------
# The rubric's schema

_TOP = (("id", "version", "title", "total", "dimensions", "penalties"),
        ("source", "rules", "examples", "resolution_reasons"))
_DIMENSION = ("key", "label", "short", "min", "max", "question", "definition", "levels")
_PENALTY = (("key", "label", "max_total", "types"), ("short", "abbreviation", "multiple"))


def _scale(check: Checker, where: str, raw: dict) -> range | None:
    low = check.integer(f"{where}.min", raw.get("min"), -MAX_SCORE, MAX_SCORE) \
        if "min" in raw else None
    high = check.integer(f"{where}.max", raw.get("max"), -MAX_SCORE, MAX_SCORE) \
        if "max" in raw else None
    if low is None or high is None:
        return None
    if low > high:
        check.add(where, f"min {low} is above max {high}")
        return None
    if high - low + 1 > MAX_LEVELS:
        check.add(where, f"a scale of {high - low + 1} levels (at most {MAX_LEVELS})")
        return None
    return range(low, high + 1)


def _levels(check: Checker, where: str, value: object, scale: range | None) -> None:
    levels = check.table(where, value, keys=False)
    if levels is None:
        return
    if len(levels) > MAX_LEVELS:
        check.add(where, f"{len(levels)} levels (at most {MAX_LEVELS})")
        return
    seen: set[int] = set()
    for key, text in levels.items():
        if not _LEVEL.fullmatch(key):
            check.add(where, f"a level is a whole number, not {shown(key)}")
            continue
        if int(key) in seen:
            check.add(where, f"level {int(key)} is described twice")
        seen.add(int(key))
        check.text(f"{where}.{key}", text)
    if scale is None:
        return
    missing = [level for level in scale if level not in seen]
    extra = sorted(seen - set(scale))
    if missing or extra:
        check.add(where, f"levels must describe every score from {scale.start} to "
                         f"{scale.stop - 1}" + (f"; missing {missing}" if missing else "")
                  + (f"; outside the scale {extra}" if extra else ""))


def _dimensions(check: Checker, data: dict) -> dict[str, dict]:
    """The dimensions by key, each with its effective `short` and `scale` (None where its
    own are unusable)."""
    found: dict[str, dict] = {}
    keys = []
    if "dimensions" not in data:  # the top table's check says it lacks them
        return found
    tables = check.tables("dimensions", data["dimensions"])
    for number, raw in enumerate(tables or [], 1):
        where = f"dimensions[{number}]"
        check.table(where, raw, _DIMENSION)
        key = _column_key(check, where, raw, "dimension", SCORE_KEYS)
        keys.append(key)
        if "label" in raw:
            check.text(f"{where}.label", raw["label"], LINE)
        short = check.text(f"{where}.short", raw["short"], SHORT) if "short" in raw else None
        for field in ("question", "definition"):
            if field in raw:
                check.text(f"{where}.{field}", raw[field], LINE if field == "question" else TEXT)
        scale = _scale(check, where, raw)
        if "levels" in raw:
            _levels(check, f"{where}.levels", raw["levels"], scale)
        if key is not None and key not in found:
            found[key] = {"short": short, "scale": scale}
    check.unique("dimensions", "key", keys)
    if tables is not None and None not in keys and set(keys) != set(SCORE_KEYS):
        check.add("dimensions", f"a rubric scores the dimensions {', '.join(SCORE_KEYS)} "
                                f"(under its own labels, scales and weights), not "
                                f"{', '.join(map(str, keys)) or 'none'}")
    return found


def _column_key(check: Checker, where: str, raw: dict, what: str,
                columns: tuple[str, ...]) -> str | None:
    """The entry's `key`, when it names a column of the rating table (else None, and the
    problem noted)."""
    key = check.text(f"{where}.key", raw["key"], IDENT) if "key" in raw else None
    if key is not None and key not in columns:
        check.add(f"{where}.key", f"{what} {key!r} has no column in the rating table (it has "
                                  f"{', '.join(columns)}); a new one needs a schema migration")
        return None
    return key


def _default_label(check: Checker, where: str, raw: dict, field: str, kind: str) -> str | None:
    """A penalty's `short` or `abbreviation`, given or made from its label."""
    if field in raw:
        return check.text(f"{where}.{field}", raw[field], kind)
    label = raw.get("label")
    if not isinstance(label, str) or forbidden_character(label):
        return None  # the label's own problem is reported
    value = label[:1].upper() if field == "short" else label
    if text_problem(value, kind) is not None:
        check.add(f"{where}.{field}", f"none given, and {shown(value)} (from the label) "
                                      f"{text_problem(value, kind)}")
        return None
    return value


def _error_types(check: Checker, where: str, value: object, cap: float | None) -> list[tuple]:
    """The (low, high) amounts of each usable error type of a penalty."""
    amounts = []
    high_bound = MAX_PENALTY if cap is None else cap
    codes = []
    tables = check.tables(where, value)
    if tables == []:
        check.add(where, "a penalty needs at least one error type")
    for number, raw in enumerate(tables or [], 1):
        at = f"{where}[{number}]"
        check.table(at, raw, ("code", "label"), ("value", "min", "max", "example"))
        codes.append(check.text(f"{at}.code", raw["code"], IDENT) if "code" in raw else None)
        if "label" in raw:
            check.text(f"{at}.label", raw["label"], LINE)
        if "example" in raw:
            check.text(f"{at}.example", raw["example"], required=False)
        has_range = "min" in raw or "max" in raw
        if "value" in raw and has_range:
            check.add(at, "give either a fixed value or a min and max, not both")
        elif "value" in raw:
            amount = check.number(f"{at}.value", raw["value"], 0.0, high_bound)
            if amount is not None:
                amounts.append((amount, amount))
        elif "min" in raw and "max" in raw:
            low = check.number(f"{at}.min", raw["min"], 0.0, high_bound)
            high = check.number(f"{at}.max", raw["max"], 0.0, high_bound)
            if low is not None and high is not None:
                if low > high:
                    check.add(at, f"min {low:g} is above max {high:g}")
                else:
                    amounts.append((low, high))
        else:
            check.add(at, "lacks a value (or a min and max)")
    check.unique(where, "code", codes)
    return amounts


def _penalties(check: Checker, data: dict) -> dict[str, dict]:
    """The penalties by key: short, abbreviation, whether errors add up, cap and the
    amounts of their types."""
    found: dict[str, dict] = {}
    keys = []
    for number, raw in enumerate(check.tables("penalties", data.get("penalties")) or [], 1):
        where = f"penalties[{number}]"
        check.table(where, raw, *_PENALTY)
        key = _column_key(check, where, raw, "penalty", PENALTY_KEYS)
        keys.append(key)
        if "label" in raw:
            check.text(f"{where}.label", raw["label"], LINE)
        short = _default_label(check, where, raw, "short", SHORT)
        abbreviation = _default_label(check, where, raw, "abbreviation", ABBREVIATION)
        cap = check.number(f"{where}.max_total", raw["max_total"], 0.0, MAX_PENALTY) \
            if "max_total" in raw else None
        multiple = check.flag(f"{where}.multiple", raw["multiple"]) if "multiple" in raw \
            else False
        amounts = _error_types(check, f"{where}.types", raw.get("types"), cap) \
            if "types" in raw else []
        if key is not None and key not in found:
            found[key] = {"short": short, "abbreviation": abbreviation, "cap": cap,
                          "multiple": multiple, "amounts": amounts}
    check.unique("penalties", "key", keys)
    return found


def _allowed(penalty: dict, amount: float) -> bool:
    """`PenaltyCategory.allows` over the checked file (rubrics.amounts: one rule)."""
    if penalty["multiple"] and penalty["cap"] is None:
        return False
    return within(penalty_ranges(penalty["multiple"], penalty["cap"], penalty["amounts"]),
                  amount)


def _examples(check: Checker, data: dict, dimensions: dict[str, dict],
              penalties: dict[str, dict]) -> None:
    ids = []
    for number, raw in enumerate(check.tables("examples", data.get("examples", [])) or [], 1):
        where = f"examples[{number}]"
        check.table(where, raw, ("id", "caption", "why", *SCORE_KEYS), ("penalties",))
        ids.append(check.text(f"{where}.id", raw["id"], IDENT) if "id" in raw else None)
        for field in ("caption", "why"):
            if field in raw:
                check.text(f"{where}.{field}", raw[field])
        for key, dimension in dimensions.items():
            scale = dimension["scale"]
            if key in raw and scale is not None:
                check.integer(f"{where}.{key}", raw[key], scale.start, scale.stop - 1)
        given = check.table(f"{where}.penalties", raw.get("penalties", {}), keys=False) or {}
        for key, amount in given.items():
            if key not in penalties:
                check.add(f"{where}.penalties", f"the rubric has no penalty {shown(key)}")
                continue
            value = check.number(f"{where}.penalties.{key}", amount, 0.0, MAX_PENALTY)
            if value is not None and not _allowed(penalties[key], value):
                check.add(f"{where}.penalties.{key}",
                          f"{value:g} is not an amount the {key} penalty allows")
    check.unique("examples", "id", ids)


def _labels(check: Checker, dimensions: dict[str, dict], penalties: dict[str, dict]) -> None:
    """Short labels name the keys and columns of the screens, abbreviations the report's:
    each one once."""
    shorts = [d["short"] for d in dimensions.values()] + [p["short"] for p in penalties.values()]
    check.unique("dimensions and penalties", "short label", shorts)
    columns = [d["short"] for d in dimensions.values() if d["short"] is not None]
    for key, penalty in penalties.items():
        if penalty["abbreviation"] is None:
            continue
        if penalty["abbreviation"] in columns:
            check.add(f"penalty {key}", f"the abbreviation {shown(penalty['abbreviation'])} "
                                        "names another column of the report already")
        columns.append(penalty["abbreviation"])
    for label in dict.fromkeys(columns):
        if label in RESERVED_LABELS:
            check.add("dimensions and penalties",
                      f"{shown(label)} is the name of a report column already")


def rubric_problems(data: object) -> list[str]:
    """Everything wrong with a rubric's parsed TOML, each as `field: problem`."""
    check = Checker()
    top = check.table("", data, *_TOP)
    if top is None:
        return check.problems
    if "id" in top:
        check.text("id", top["id"], IDENT)
    if "version" in top:
        version = top["version"]
        if isinstance(version, int) and not isinstance(version, bool):
            version = str(version)
        if isinstance(version, str):
            check.text("version", version, IDENT)
        else:
            check.add("version", f"must be text (\"1.0\") or a whole number, not "
                                 f"{kind_of(version)}")
    if "title" in top:
        check.text("title", top["title"], LINE)
    if "source" in top:
        check.text("source", top["source"], LINE, required=False)
    dimensions = _dimensions(check, top)
    if "total" in top:
        weights = tuple(f"{key}_weight" for key in SCORE_KEYS)
        total = check.table("total", top["total"], weights)
        given = [check.number(f"total.{key}", total[key], 0.0, MAX_WEIGHT)
                 for key in weights if total is not None and key in total]
        if len(given) == len(weights) and all(weight == 0 for weight in given):
            check.add("total", "the weights are all 0: every Total would be 0 minus the "
                               "penalties, whatever the scores")
    penalties = _penalties(check, top) if "penalties" in top else {}
    _labels(check, dimensions, penalties)
    rules = check.tables("rules", top.get("rules", [])) or []
    for number, raw in enumerate(rules, 1):
        check.table(f"rules[{number}]", raw, ("key", "text"))
        for field, kind in (("key", IDENT), ("text", TEXT)):
            if field in raw:
                check.text(f"rules[{number}].{field}", raw[field], kind)
    check.unique("rules", "key", [r.get("key") if isinstance(r.get("key"), str) else None
                                  for r in rules])
    _examples(check, top, dimensions, penalties)
    reasons = check.tables("resolution_reasons", top.get("resolution_reasons", [])) or []
    for number, raw in enumerate(reasons, 1):
        check.table(f"resolution_reasons[{number}]", raw, ("code", "label"))
        for field, kind in (("code", IDENT), ("label", LINE)):
            if field in raw:
                check.text(f"resolution_reasons[{number}].{field}", raw[field], kind)
    check.unique("resolution_reasons", "code",
                 [r.get("code") if isinstance(r.get("code"), str) else None for r in reasons])
    return check.problems


def check_rubric(data: object, name: str) -> None:
    """Raise RubricError listing every problem of the rubric `name`, if it has any."""
    if isinstance(data, Mapping) and not isinstance(data, dict):
        data = dict(data)
    problems = rubric_problems(data)
    if problems:
        raise RubricError(name, problems)
