"""sacrebleu-style signatures: every reported number says what produced it."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from functools import cache
from importlib.metadata import PackageNotFoundError, version


@cache
def package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "missing"


def tool_version() -> str:
    """thumb-tui's own version, from the package metadata (a source tree that is not
    installed says so)."""
    try:
        return version("thumb-tui")
    except PackageNotFoundError:
        return "0.0.0+source"


def digest(parts: Iterable[str], length: int = 10) -> str:
    """A short stable hash of some texts (e.g. the corpus a metric's statistics come from)."""
    sha = hashlib.sha256()
    for part in parts:
        sha.update(part.encode("utf-8"))
        sha.update(b"\x00")
    return sha.hexdigest()[:length]


def format_signature(metric: str, fields: dict[str, str]) -> str:
    """`metric|key:value|…` with the thumb-tui version last, as sacrebleu prints it."""
    parts = [metric, *(f"{key}:{value}" for key, value in fields.items())]
    parts.append(f"thumb-tui:{tool_version()}")
    return "|".join(parts)


def parse_signature(signature: str) -> dict[str, str]:
    metric, *fields = signature.split("|")
    parsed = {"metric": metric}
    for field in fields:
        key, _, value = field.partition(":")
        parsed[key] = value
    return parsed


_LEGACY_COUNT = re.compile(r"\(\d+\)$")  # the count in an old `self:excluded(12)`


def _current_fields(legacy: str) -> dict[str, str]:
    """A signature written when the reference fields also counted the data (`nrefs:4`,
    `self:excluded(12)`), as thumb-tui writes it now: without the counts."""
    fields = parse_signature(legacy)
    fields.pop("nrefs", None)
    if "self" in fields:
        fields["self"] = _LEGACY_COUNT.sub("", fields["self"])
    return fields


def current_form(signature: str) -> str:
    """The signature as thumb-tui writes it now (an old one without its data counts): two
    signatures equal in this form name the same settings."""
    fields = _current_fields(signature)
    return "|".join([fields.pop("metric"), *(f"{key}:{value}"
                                             for key, value in fields.items())])


def superseded_signatures(signatures: Iterable[str]) -> set[str]:
    """The signatures of the old form (with `nrefs:`) for which one of the current form
    has the same settings: their scores are the same numbers, stored again when the counts
    changed, so a report shows the current one only. A reference-free metric's current
    signature names no reference fields (`refs`, `self`) at all."""
    parsed = {signature: parse_signature(signature) for signature in set(signatures)}
    current = [fields for fields in parsed.values() if "nrefs" not in fields]
    superseded = set()
    for legacy in (signature for signature, fields in parsed.items() if "nrefs" in fields):
        fields = _current_fields(legacy)
        if any(fields.keys() - new.keys() <= {"refs", "self"}
               and all(fields.get(key) == value for key, value in new.items())
               for new in current):
            superseded.add(legacy)
    return superseded


# Fields whose value names itself in a label (`cider-d (pooled)`); others show key:value.
SELF_NAMED_FIELDS = ("corpus", "model", "tok", "impl")


def _label_fields(signature: str) -> dict[str, str]:
    """A signature's fields for its label, those of a signature nested in one field's value
    (a BISON baseline's metric: `metric:cider-d;corpus:…;…`) among them: a difference
    inside it tells two signatures apart like any other."""
    name, *parts = signature.split("|")
    fields = {"metric": name}
    for part in parts:
        key, _, value = part.partition(":")
        if ";" not in value:
            fields[key] = value
            continue
        inner_name, *inner = value.split(";")
        fields[key if key != "metric" else "scored by"] = inner_name
        for item in inner:
            inner_key, _, inner_value = item.partition(":")
            clash = fields.get(inner_key, inner_value) != inner_value
            fields[f"{key}.{inner_key}" if clash else inner_key] = inner_value
    return fields


def _label_parts(parsed: list[dict[str, str]], strip_digests: bool) -> list[tuple[str, ...]]:
    """For each parsed signature, the shown values of the fields that differ in the group."""
    keys = list(dict.fromkeys(key for fields in parsed for key in fields if key != "metric"))

    def shown(key: str, fields: dict[str, str]) -> str:
        if key not in fields:
            return f"no {key}"
        value = fields[key].split("#", 1)[0] if strip_digests else fields[key]
        return value if key in SELF_NAMED_FIELDS else f"{key}:{value}"

    differing = [k for k in keys if len({fields.get(k) for fields in parsed}) > 1]
    return [tuple(shown(key, fields) for key in differing) for fields in parsed]


def signature_labels(signatures: Iterable[str]) -> dict[str, str]:
    """Short unique labels for long signatures: the metric or scorer name, and where one
    name has several signatures, what tells them apart: `cider-d (pooled)` and
    `cider-d (per-system)`, `bleu (self:kept)`. A corpus digest is shown only when
    the rest of the value does not tell the signatures apart."""
    groups: dict[str, list[str]] = {}
    for signature in sorted(set(signatures)):
        groups.setdefault(signature.split("|", 1)[0], []).append(signature)
    labels: dict[str, str] = {}
    for name, group in groups.items():
        if len(group) == 1:
            labels[group[0]] = name
            continue
        parsed = [_label_fields(signature) for signature in group]
        parts = _label_parts(parsed, strip_digests=True)
        if len(set(parts)) < len(parts):
            parts = _label_parts(parsed, strip_digests=False)
        for signature, shown in zip(group, parts, strict=True):
            labels[signature] = f"{name} ({', '.join(shown)})"
    return labels
