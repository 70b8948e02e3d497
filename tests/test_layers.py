"""The layers import one way: storage -> rubrics; metrics -> rubrics (pure: no database);
reports -> storage, metrics; thumb_tui -> all. Inside metrics, its subpackages import one way
too (ARCHITECTURE.md draws them), and no modules import each other in a circle. Checked on
every import statement, including those inside functions. Inside reports, the flows at its
top never import the THUMB report (`reports.thumb`), whose tables never import a renderer."""

from __future__ import annotations

import ast
from collections.abc import Iterable
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


# metrics' domains: the top (`metrics`: base, registry, runner, signature, untrusted files)
# and its subpackages, each with the others it may import
METRICS_DOMAINS = {
    "metrics": set(),
    "metrics.stats": {"metrics"},
    "metrics.text": {"metrics", "metrics.stats"},
    "metrics.models": {"metrics", "metrics.stats"},
    "metrics.retrieval": {"metrics", "metrics.stats", "metrics.text", "metrics.models"},
}


def module_name(root: Path, path: Path) -> str:
    """The dotted name of the module at `path` (a package's `__init__.py`: the package)."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_targets(root: Path, path: Path) -> list[tuple[int, str]]:
    """Every name an import statement in `path` asks for, as specifically as it says it:
    `from a.b import c` asks for `a.b.c` (a module or a name in `a.b`); relative imports
    resolved against the module's package."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module_name(root, path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def metrics_domain(module: str) -> str:
    """The domain of METRICS_DOMAINS that a metrics module (or a name in one) belongs to."""
    parts = module.split(".")
    subpackage = ".".join(parts[:2])
    return subpackage if subpackage in METRICS_DOMAINS else "metrics"


def metrics_domain_violations(root: Path) -> list[str]:
    problems = []
    for path in sorted((root / "metrics").rglob("*.py")):
        domain = metrics_domain(module_name(root, path))
        for line, target in import_targets(root, path):
            if target.split(".")[0] != "metrics":
                continue
            imported = metrics_domain(target)
            if imported != domain and imported not in METRICS_DOMAINS[domain]:
                problems.append(f"{path.relative_to(root)}:{line} imports {target} "
                                f"({domain} may not import {imported})")
    return problems


def test_metrics_subpackages_import_only_what_they_may() -> None:
    assert {metrics_domain(module_name(ROOT, path)) for path in (ROOT / "metrics").rglob(
        "*.py")} == set(METRICS_DOMAINS)  # a new subpackage gets its line here
    assert metrics_domain_violations(ROOT) == []


def test_the_check_finds_a_forbidden_import_between_metrics_subpackages(tmp_path: Path
                                                                         ) -> None:
    planted = {
        "metrics/stats/planted.py": "def f():\n    from metrics.models.clip import embedder\n",
        "metrics/text/planted.py": "from metrics.retrieval import rankings\n"
                                   "from ..models import bertscore\n",
        "metrics/planted.py": "import metrics.text.cider\n",
        "metrics/retrieval/fine.py": "from metrics.text.cider import cider_d\n"
                                     "from metrics import base\n",
    }
    for name, source in planted.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(source, encoding="utf-8")
    assert metrics_domain_violations(tmp_path) == [
        "metrics/planted.py:1 imports metrics.text.cider (metrics may not import metrics.text)",
        "metrics/stats/planted.py:2 imports metrics.models.clip.embedder "
        "(metrics.stats may not import metrics.models)",
        "metrics/text/planted.py:1 imports metrics.retrieval.rankings "
        "(metrics.text may not import metrics.retrieval)",
        "metrics/text/planted.py:2 imports metrics.models.bertscore "
        "(metrics.text may not import metrics.models)",
    ]


# reports' domains: the flows at its top (scoring, agreement, BISON, judgment sets, retrieval,
# match, and the helpers they share) and the THUMB report's subpackage, which may import them
REPORTS_DOMAINS = {
    "reports": set(),
    "reports.thumb": {"reports"},
}
# inside reports.thumb, the modules each may import of it: the tables never import what
# reads a finished Report, the summary reads only the tables (every other module is a
# renderer, which may import any of them)
THUMB_BUILDERS = {
    "reports.thumb.tables": set(),
    "reports.thumb.summary": {"reports.thumb.tables"},
}


def reports_domain(module: str) -> str:
    """The domain of REPORTS_DOMAINS that a reports module (or a name in one) belongs to."""
    subpackage = ".".join(module.split(".")[:2])
    return subpackage if subpackage in REPORTS_DOMAINS else "reports"


def reports_domain_violations(root: Path) -> list[str]:
    modules = {module_name(root, path) for path in (root / "reports").rglob("*.py")}
    problems = []
    for path in sorted((root / "reports").rglob("*.py")):
        module = module_name(root, path)
        domain = reports_domain(module)
        for line, target in import_targets(root, path):
            if target.split(".")[0] != "reports":
                continue
            imported = reports_domain(target)
            where = f"{path.relative_to(root)}:{line} imports {target}"
            if imported != domain and imported not in REPORTS_DOMAINS[domain]:
                problems.append(f"{where} ({domain} may not import {imported})")
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if (module in THUMB_BUILDERS and target.startswith("reports.thumb.")
                    and target not in THUMB_BUILDERS[module]):
                problems.append(f"{where} ({module} may not import {target})")
    return problems


def test_reports_subpackages_import_only_what_they_may() -> None:
    assert {reports_domain(module_name(ROOT, path)) for path in (ROOT / "reports").rglob(
        "*.py")} == set(REPORTS_DOMAINS)  # a new subpackage gets its line here
    assert set(THUMB_BUILDERS) <= {module_name(ROOT, path)
                                   for path in (ROOT / "reports" / "thumb").glob("*.py")}
    assert reports_domain_violations(ROOT) == []


def test_the_check_finds_a_forbidden_import_in_reports(tmp_path: Path) -> None:
    planted = {
        "reports/__init__.py": "",
        "reports/judgments.py": "def f():\n    from reports.thumb.render import Notes\n",
        "reports/bison.py": "from .thumb import text\n",
        "reports/thumb/__init__.py": "",
        "reports/thumb/tables.py": "from reports.judgments import f\n"
                                   "def g():\n    from reports.thumb.figures import h\n",
        "reports/thumb/summary.py": "from reports.thumb.tables import g\n"
                                    "from . import render\n",
        "reports/thumb/render.py": "from reports.thumb.summary import x\n"
                                   "from reports.thumb.figures import h\n",
        "reports/thumb/figures.py": "from reports.thumb.tables import g\n",
    }
    for name, source in planted.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(source, encoding="utf-8")
    assert reports_domain_violations(tmp_path) == [
        "reports/bison.py:1 imports reports.thumb.text (reports may not import reports.thumb)",
        "reports/judgments.py:2 imports reports.thumb.render.Notes "
        "(reports may not import reports.thumb)",
        "reports/thumb/summary.py:2 imports reports.thumb.render "
        "(reports.thumb.summary may not import reports.thumb.render)",
        "reports/thumb/tables.py:3 imports reports.thumb.figures.h "
        "(reports.thumb.tables may not import reports.thumb.figures)",
    ]


def import_graph(root: Path, packages: Iterable[str]) -> dict[str, set[str]]:
    """Module -> the modules of `packages` it imports (anywhere in it, functions included):
    an import of a name in a module counts as an import of that module."""
    paths = {module_name(root, path): path for package in packages
             for path in sorted((root / package).rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        graph[module] = set()
        for _, target in import_targets(root, path):
            while target and target not in paths:
                target = target.rpartition(".")[0]
            if target and target != module:
                graph[module].add(target)
    return graph


def import_circles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The modules that import each other in a circle, one set per strongly connected
    component of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: set[frozenset[str]] = set()
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == module:
                        break
                if len(component) > 1:
                    circles.add(frozenset(component))
    return circles


# circles of imports that exist already, outside metrics/ (where none may form): this list
# is exactly the current set, so a new circle anywhere, or a grown one, fails. None is left
# (storage's was broken by opening a database in `storage.db.opening`, above both the engine
# and the migrations, so that the engine imports no other storage module).
KNOWN_CIRCLES: set[frozenset[str]] = set()


def test_no_new_circle_of_imports() -> None:
    circles = import_circles(import_graph(ROOT, LAYERS))
    assert [sorted(circle) for circle in circles
            if any(module.split(".")[0] == "metrics" for module in circle)] == []
    assert circles == KNOWN_CIRCLES


def test_the_engine_imports_no_other_storage_module() -> None:
    """The engine is storage's bottom: the migrations, the schema check and every domain
    use it, so an import of any of them from it would close a circle again."""
    graph = import_graph(ROOT, LAYERS)
    assert sorted(target for target in graph["storage.db.engine"]
                  if target.startswith("storage")) == []
    assert "storage.db.migrations" in graph["storage.db.opening"]


def test_the_check_finds_a_circle_of_imports(tmp_path: Path) -> None:
    sources = {
        "metrics/__init__.py": "",
        "metrics/text/__init__.py": "",
        "metrics/text/a.py": "from metrics.text.b import f\n",
        "metrics/text/b.py": "def f():\n    from . import c\n",
        "metrics/text/c.py": "import metrics.text.a\nfrom metrics import d\n",
        "metrics/d.py": "import metrics.text\n",
        "metrics/e.py": "from metrics.e import g\n",
    }
    for name, source in sources.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(source, encoding="utf-8")
    graph = import_graph(tmp_path, ["metrics"])
    assert graph["metrics.text.b"] == {"metrics.text.c"}
    assert graph["metrics.e"] == set()
    assert import_circles(graph) == {frozenset({"metrics.text.a", "metrics.text.b",
                                                "metrics.text.c"})}


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
