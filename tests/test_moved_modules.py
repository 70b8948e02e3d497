"""The modules that #46 moved into metrics' subpackages keep their old names as aliases that
warn: a user's `import metrics.cider` or `from metrics.retrieval import evaluate` still
works, names the new place, and gives the very same objects. Nothing of ours uses an old
name."""

from __future__ import annotations

import ast
import importlib
import re
import sys
from pathlib import Path

import pytest

import metrics
import metrics.retrieval
from metrics import MOVED_MODULES

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("rubrics", "storage", "metrics", "reports", "thumb_tui", "tests", "benchmarks",
           "sample_data")


def forget(monkeypatch: pytest.MonkeyPatch, old: str) -> None:
    """As if `old` had never been imported in this process (it warns on its first import)."""
    monkeypatch.delitem(sys.modules, old, raising=False)
    monkeypatch.delattr(metrics, old.rpartition(".")[2], raising=False)


def test_import_metrics_cider_warns_and_gives_the_objects_of_metrics_text_cider(monkeypatch):
    forget(monkeypatch, "metrics.cider")
    with pytest.warns(DeprecationWarning, match=r"metrics\.cider has moved to "
                                                r"metrics\.text\.cider") as caught:
        import metrics.cider
    import metrics.text.cider

    assert caught[0].filename == __file__  # the warning points at the import
    assert metrics.cider is metrics.text.cider
    assert metrics.cider.CiderD is metrics.text.cider.CiderD
    assert metrics.cider.cider_d is metrics.text.cider.cider_d
    assert sys.modules["metrics.cider"] is sys.modules["metrics.text.cider"]


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_every_old_module_name_warns_and_is_the_moved_module(monkeypatch, old):
    forget(monkeypatch, old)
    new = MOVED_MODULES[old]
    with pytest.warns(DeprecationWarning, match=f"{old} has moved to {new};"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__name__ == new


def test_from_an_old_module_import_a_name_works(monkeypatch):
    forget(monkeypatch, "metrics.confidence")
    with pytest.warns(DeprecationWarning, match="metrics.stats.confidence"):
        from metrics.confidence import bca_ci
    from metrics.stats.confidence import bca_ci as moved

    assert bca_ci is moved


def test_the_old_retrieval_module_is_read_through_the_package(monkeypatch):
    """`metrics.retrieval` is now the subpackage: the old module's names are forwarded."""
    monkeypatch.delitem(vars(metrics.retrieval), "evaluate", raising=False)
    with pytest.warns(DeprecationWarning, match="metrics.retrieval.evaluation.evaluate"):
        from metrics.retrieval import evaluate
    from metrics.retrieval.evaluation import evaluate as moved

    assert evaluate is moved
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        metrics.retrieval.nothing_here  # noqa: B018


def test_a_module_of_the_retrieval_package_imports_without_a_warning(recwarn):
    from metrics.retrieval import positives, rankings

    assert rankings.__name__ == "metrics.retrieval.rankings"
    assert positives.__name__ == "metrics.retrieval.positives"
    assert [w for w in recwarn if issubclass(w.category, DeprecationWarning)] == []


RETRIEVAL_MODULES = {path.stem for path in (ROOT / "metrics" / "retrieval").glob("*.py")}
# an old dotted name anywhere in a source (a `patch("metrics.tokenize.…")` string included);
# `metrics.retrieval`, now the package's name, is checked on the imports only
OLD_NAME_IN_TEXT = re.compile(r"(?<![\w.])(?:{})(?!\w)".format("|".join(
    re.escape(old) for old in sorted(MOVED_MODULES, key=len, reverse=True))))


def is_old_name(name: str) -> bool:
    parts = name.split(".")
    return name in MOVED_MODULES or (parts[:2] == ["metrics", "retrieval"] and len(parts) > 2
                                      and parts[2] not in RETRIEVAL_MODULES)


def old_names_used(path: Path, root: Path = ROOT) -> list[str]:
    """Where `path` names a moved module by its old name: in an import (`import
    metrics.cider`, `from metrics import cider`, `from metrics.retrieval import evaluate`)
    or in its text."""
    source = path.read_text(encoding="utf-8")
    where = path.relative_to(root)
    found = [f"{where}:{source.count(chr(10), 0, match.start()) + 1} "
             f"{match.group()}" for match in OLD_NAME_IN_TEXT.finditer(source)]
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
            if node.module in ("metrics", "metrics.retrieval"):  # a module or a name of it
                names += [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [f"{where}:{node.lineno} {name}" for name in names
                  if is_old_name(name)]
    return found


def test_nothing_of_ours_uses_an_old_name():
    exempt = {Path(__file__).resolve(), (ROOT / "metrics" / "__init__.py").resolve()}
    assert [problem for folder in SOURCES for path in sorted((ROOT / folder).rglob("*.py"))
            if path.resolve() not in exempt for problem in old_names_used(path)] == []


def test_the_check_finds_an_old_name(tmp_path):
    module = tmp_path / "old.py"
    module.write_text("import metrics.cider\nfrom metrics import clip, base\n"
                      "from metrics.retrieval import evaluate, rankings\n"
                      "from metrics.retrieval.evaluation import evaluate\n"
                      "patch('metrics.tokenize.plain_tokens')\n", encoding="utf-8")
    assert sorted(old_names_used(module, tmp_path)) == [
        "old.py:1 metrics.cider", "old.py:1 metrics.cider", "old.py:2 metrics.clip",
        "old.py:3 metrics.retrieval.evaluate", "old.py:5 metrics.tokenize"]
