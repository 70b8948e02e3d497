"""One home per rule (#25 item 4): each rule's expression lives in one module, and every
other module calls it. A grep over the source keeps ARCHITECTURE.md's list true: an
expression of a rule outside its home fails here, naming file and line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("rubrics", "storage", "metrics", "reports", "thumb_tui")

# rule -> (its home, expressions of it that only the home may hold)
RULES = {
    "a rating is complete when every score is set": ("storage/rating/protocol.py", [
        r"\b(precision|recall)\.(is_not|isnot|is_)\(None\)",
        r"\[[\"'](precision|recall)[\"']\] is (not )?None",
        r"\.(precision|recall) is (not )?None",
        r"dropna\(subset=\[[\"'](precision|recall)",
        r"None (not )?in \([^)]*\bprecision\b",
    ]),
    "only native speakers do the fluency round": ("storage/rating/protocol.py", [
        r"bool\([^)]*native_english",
        r"\bnot [\w.\[\]\"']*native_english\b",
        r"\bif [\w.]*native_english\s*:",
        r"native_english is (False|True)\b",
    ]),
    "how many stage-1 raters an image takes": ("storage/rating/protocol.py", [
        r"double_rating, 2\)",
        r"2 if [\w.]*double_rating\b",
    ]),
    "the amounts a penalty allows": ("rubrics/amounts.py", [
        r"- (EPSILON|1e-9) <=",
    ]),
    "a bootstrap interval's limits": ("metrics/stats/confidence.py", [
        r"\bnp\.(nan)?(percentile|quantile)\(",
    ]),
    "when a comparison is called significant": ("metrics/stats/significance.py", [
        r"\bci_low\W{0,3}\s*>\s*0\b",
        r"\bci_high\W{0,3}\s*<\s*0\b",
        r"\.low > 0\b",
        r"\.high < 0\b",
        r"\bp\W{0,3}\s*<\s*(0\.05|SIGNIFICANCE|LEVEL)\b",
    ]),
    "the limits on JSON numbers": ("rubrics/json_limits.py", [
        r"is not a JSON number",
        r"a number written with",
    ]),
    "how a byte that is not UTF-8 is named (line and column)": ("rubrics/json_limits.py", [
        r"invalid UTF-8 \(byte",
    ]),
    "a copy of a SQLite database in use is one moment of it": ("storage/db/backup.py", [
        r"\.backup\(",
    ]),
}


def _sources() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py")
                  if "migrations" not in path.parts)  # revisions are frozen snapshots


@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_rule_has_one_home(rule):
    home, patterns = RULES[rule]
    found = re.compile("|".join(f"(?:{pattern})" for pattern in patterns))
    outside = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
               for path in _sources() if path.relative_to(ROOT).as_posix() != home
               for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
               if found.search(line)]
    assert outside == [], f"{rule}: expressed outside {home}"
