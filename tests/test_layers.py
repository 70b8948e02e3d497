"""The layers import one way: storage -> rubrics; metrics -> rubrics (pure: no database);
reports -> storage, metrics; thumb_tui -> all. Checked on every import statement, including
those inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("rubrics", "storage", "metrics", "reports", "thumb_tui")
ALLOWED = {
    "rubrics": set(),
    "storage": {"rubrics"},
    "metrics": {"rubrics"},
    "reports": {"rubrics", "storage", "metrics"},
    "thumb_tui": {"rubrics", "storage", "metrics", "reports"},
}
# database libraries belong to storage (and to the layers above that open databases)
DATABASE_LIBRARIES = {"sqlalchemy", "sqlmodel", "psycopg", "sqlite3", "alembic"}


def imported_modules(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def violations(layer: str) -> list[str]:
    problems = []
    for path in sorted((ROOT / layer).rglob("*.py")):
        for line, module in imported_modules(path):
            top = module.split(".")[0]
            where = f"{path.relative_to(ROOT)}:{line} imports {module}"
            if top in LAYERS and top != layer and top not in ALLOWED[layer]:
                problems.append(where)
            if layer == "metrics" and top in DATABASE_LIBRARIES:
                problems.append(where + " (metrics are pure: no database)")
    return problems


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_imports_only_what_is_below_it(layer: str) -> None:
    assert (ROOT / layer).is_dir()
    assert violations(layer) == []


def test_the_check_finds_an_upward_import(tmp_path: Path) -> None:
    module = tmp_path / "example.py"
    module.write_text("def f():\n    from storage.models import Rating\n    import sqlalchemy\n")
    assert imported_modules(module) == [(2, "storage.models"), (3, "sqlalchemy")]


def private_attributes(path: Path) -> list[str]:
    """`obj._name` read off anything but `self` or `cls`: another object's private part,
    such as a dependency's (bert-score's `BERTScorer._model`), which may change in any
    release of it."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [f"{path.relative_to(ROOT)}:{node.lineno} reads {ast.unparse(node)}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))]


def test_metrics_use_their_libraries_through_public_interfaces_only() -> None:
    """ARCHITECTURE: dependencies are used through their public interfaces only."""
    assert [problem for path in sorted((ROOT / "metrics").rglob("*.py"))
            for problem in private_attributes(path)] == []
