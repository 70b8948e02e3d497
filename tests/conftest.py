from __future__ import annotations

import ast
import inspect
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest
from sqlalchemy import Engine, MetaData, select

from storage import open_database

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_CSV = ROOT / "sample_data" / "captions.csv"
ANCHORS = Path(os.environ.get("THUMB_ANCHORS", ROOT.parent / "shared" / "anchors")) / "thumb-1.0"
THUMB_JSONL = ANCHORS / "mscoco_THumB-1.0.jsonl"
THUMB_REFS = ANCHORS / "mscoco_references.json"
PACKAGES = ("thumb_tui", "rubrics", "storage", "metrics", "reports")

needs_anchors = pytest.mark.skipif(
    not THUMB_JSONL.is_file(),
    reason="published THUMB 1.0 data not found at ../shared/anchors/thumb-1.0",
)


@pytest.fixture(autouse=True)
def no_user_keymap(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
                   ) -> None:
    """Tests never read the developer's own keymap (~/.config/thumb-tui/keymap.toml)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))


@pytest.fixture(scope="session")
def migrated_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new SQLite database built once per test process through every schema revision."""
    path = tmp_path_factory.mktemp("template") / "template.db"
    engine = open_database(path)
    with engine.connect() as connection:  # everything in the main file, nothing in -wal
        connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    engine.dispose()
    return path


@pytest.fixture(scope="session", autouse=True)
def click_commands_built_once() -> Iterator[None]:
    """`CliRunner.invoke(app)` turns the whole Typer app into Click commands on every call
    (60 ms for thumb's commands; the fast tests make about 700 calls). Built from the same
    registered functions they are the same commands, so they are built once for each app
    and set of registered functions (a test that registers another gets its own)."""
    import typer.main
    import typer.testing

    build = typer.main.get_command
    built: dict[tuple, object] = {}

    def registered(app: typer.Typer) -> tuple:
        callback = app.registered_callback and app.registered_callback.callback
        return (id(app), id(callback),
                *((id(info.callback), id(getattr(info.callback, "__signature__", None)))
                  for info in app.registered_commands),
                *(registered(group.typer_instance) for group in app.registered_groups
                  if group.typer_instance is not None))

    def cached(app: typer.Typer) -> object:
        key = registered(app)
        if key not in built:
            built[key] = build(app)
        return built[key]

    typer.testing._get_command = cached
    yield
    typer.testing._get_command = build


@pytest.fixture(scope="session")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny randomly initialised CLIP saved to a folder (tests/tiny_clip.py), once per
    test process: the model path the CLIP options take. Tests only read it."""
    from tests.tiny_clip import save_tiny_clip

    return str(save_tiny_clip(tmp_path_factory.mktemp("models") / "clip"))


@pytest.fixture(autouse=True)
def new_databases_from_the_template(request: pytest.FixtureRequest,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A test's new SQLite database is a copy of `migrated_template` instead of a fresh run
    of every revision (0.2 s each time, most of the fast tests' set-up); what follows
    (the schema check, every read and write) is the real code. tests/test_migrations.py
    builds its databases through the revisions as users do."""
    if request.module.__name__.endswith("test_migrations"):
        return
    import shutil

    from sqlalchemy import inspect as inspect_schema

    from storage.db import migrations
    from storage.db.engine import sqlite_path

    template = request.getfixturevalue("migrated_template")
    run_upgrade = migrations._run_upgrade

    def from_template(engine: Engine, **options: object) -> migrations.Upgrade:
        path = sqlite_path(engine.url.render_as_string(hide_password=False))
        if path is not None:
            with engine.connect() as connection:
                empty = not inspect_schema(connection).get_table_names()
            if empty:
                engine.dispose()
                for side in ("-wal", "-shm"):
                    Path(f"{path}{side}").unlink(missing_ok=True)
                shutil.copyfile(template, path)
                return migrations.Upgrade(None, run_upgrade(engine, **options).to_revision)
        return run_upgrade(engine, **options)

    monkeypatch.setattr(migrations, "_run_upgrade", from_template)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--race-trials", type=int, default=10,
                     help="trials per race in tests/test_races.py (the benchmark runs 200)")
    parser.addoption("--check-every-module-runs", action="store_true",
                     help="fail unless the tests chosen (say -m 'not slow') call a function "
                          "of every module of the project that has functions")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "race: processes racing on one database (slow)")
    config.addinivalue_line(
        "markers", "slow: takes seconds; `make test` runs it, `make test-fast` leaves it out")
    config.addinivalue_line(
        "markers", "postgres: uses the one database THUMB_TEST_POSTGRES names; pytest-xdist "
                   "runs every such test on one worker (--dist loadgroup)")
    if config.getoption("--check-every-module-runs"):
        config.pluginmanager.register(FunctionsRun(), "functions-run")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests of the one PostgreSQL database never run at once: they empty it first."""
    for item in items:
        if item.get_closest_marker("postgres"):
            item.add_marker(pytest.mark.xdist_group("postgres"))


def modules_with_functions() -> dict[str, Path]:
    """The project's modules that define a function, by file name."""
    files = (path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py")))
    return {str(path): path for path in files if any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))))}


class FunctionsRun:
    """`--check-every-module-runs`: the project's files a function of which was called in
    this process (module and class bodies run at import and do not count; neither do
    `thumb` subprocesses). pytest-xdist workers send theirs to the controller, which fails
    the run and names every module with functions none of which ran."""

    OUTPUT = "thumb_functions_run"

    def __init__(self) -> None:
        self.files: set[str] = set()
        self.never_run: list[Path] = []
        roots = tuple(str(ROOT / package) + os.sep for package in PACKAGES)

        def called(frame: FrameType, _event: str, _arg: object) -> None:
            code = frame.f_code  # a "call" event: only they reach a global trace function
            if code.co_flags & inspect.CO_NEWLOCALS and code.co_filename.startswith(roots):
                self.files.add(code.co_filename)

        sys.settrace(called)
        threading.settrace(called)

    @pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: a worker is done
    def pytest_testnodedown(self, node: object) -> None:
        self.files.update(getattr(node, "workeroutput", {}).get(self.OUTPUT, ()))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]
        if hasattr(session.config, "workeroutput"):
            session.config.workeroutput[self.OUTPUT] = sorted(self.files)
            return
        self.never_run = [path for name, path in modules_with_functions().items()
                          if name not in self.files]
        if self.never_run:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        modules = modules_with_functions()
        terminalreporter.write_sep("=", f"modules with functions: {len(modules)}; none of "
                                        f"whose functions ran: {len(self.never_run)}")
        for path in self.never_run:
            terminalreporter.write_line(str(path.relative_to(ROOT)))


@pytest.fixture
def race_trials(request: pytest.FixtureRequest) -> int:
    return request.config.getoption("--race-trials")


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = open_database(tmp_path / "test.db")
    yield engine
    engine.dispose()


def database_dump(engine: Engine) -> dict[str, list[tuple]]:
    """Every row of every table, to assert that a failed import changed nothing. On SQLite
    the tables are listed and read by the driver, as stored (reflecting the schema and
    compiling a SELECT per reflected table was 7 % of the fast tests' time)."""
    if engine.dialect.name == "sqlite":
        with engine.connect() as connection:
            names = connection.exec_driver_sql(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite_%'").scalars().all()
            return {name: sorted(map(tuple, connection.exec_driver_sql(
                        f'SELECT * FROM "{name}"').all()), key=repr) for name in names}
    metadata = MetaData()
    metadata.reflect(engine)
    with engine.connect() as connection:
        return {
            name: sorted(map(tuple, connection.execute(select(table)).all()), key=repr)
            for name, table in metadata.tables.items()
        }
