"""The suite's own structure (#29 part 4): `make test` runs every test on every CPU with
pytest-xdist, so tests that share the one PostgreSQL database must say so (the `postgres`
mark puts them on one worker); `make test-fast` leaves out the `slow` tests, and with
CHECK_MODULES=1 fails unless a function of every module ran (`--check-every-module-runs`,
tests/conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import ROOT, FunctionsRun, modules_with_functions

TESTS = Path(__file__).resolve().parent


def test_every_test_module_that_reads_the_postgresql_database_marks_its_tests():
    """Every PostgreSQL test empties the one database first: two at once on two workers
    would drop each other's tables."""
    unmarked = [path.name for path in sorted(TESTS.glob("test_*.py"))
                if path != Path(__file__).resolve()
                and "THUMB_TEST_POSTGRES" in (text := path.read_text(encoding="utf-8"))
                and "pytest.mark.postgres" not in text]
    assert unmarked == []


@pytest.mark.slow
def test_the_modules_whose_functions_ran_are_told_apart_from_those_imported_only():
    from rubrics.cleanup import clean_caption

    before = sys.gettrace()
    check = FunctionsRun()
    try:
        clean_caption("A dog.")
    finally:
        sys.settrace(before)
    called = str(ROOT / "rubrics" / "cleanup.py")
    assert called in check.files
    assert str(ROOT / "reports" / "match.py") not in check.files  # imported, not called

    session = SimpleNamespace(config=SimpleNamespace(), exitstatus=0)  # the controller's
    check.pytest_sessionfinish(session)  # type: ignore[arg-type]
    assert Path(called) not in check.never_run
    assert ROOT / "reports" / "match.py" in check.never_run
    assert session.exitstatus == pytest.ExitCode.TESTS_FAILED


def test_a_module_without_functions_needs_none_to_run():
    names = modules_with_functions()
    assert str(ROOT / "rubrics" / "cleanup.py") in names
    assert str(ROOT / "rubrics" / "__init__.py") not in names  # imports and names only
