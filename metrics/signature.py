"""sacrebleu-style signatures: every reported number says what produced it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version


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


def signature_labels(signatures: Iterable[str]) -> dict[str, str]:
    """Short unique labels for long signatures: the metric or scorer name, then `name#2`,
    `name#3`… for further signatures of the same name (in sorted order)."""
    labels: dict[str, str] = {}
    counts: dict[str, int] = {}
    for signature in sorted(set(signatures)):
        name = signature.split("|", 1)[0]
        counts[name] = counts.get(name, 0) + 1
        labels[signature] = name if counts[name] == 1 else f"{name}#{counts[name]}"
    return labels
