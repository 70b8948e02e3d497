from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, MetaData, select

from storage import open_database

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_CSV = ROOT / "sample_data" / "captions.csv"
ANCHORS = Path(os.environ.get("THUMB_ANCHORS", ROOT.parent / "shared" / "anchors")) / "thumb-1.0"
THUMB_JSONL = ANCHORS / "mscoco_THumB-1.0.jsonl"
THUMB_REFS = ANCHORS / "mscoco_references.json"

needs_anchors = pytest.mark.skipif(
    not THUMB_JSONL.is_file(),
    reason="published THUMB 1.0 data not found at ../shared/anchors/thumb-1.0",
)


@pytest.fixture(autouse=True)
def no_user_keymap(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
                   ) -> None:
    """Tests never read the developer's own keymap (~/.config/thumb-tui/keymap.toml)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--race-trials", type=int, default=10,
                     help="trials per race in tests/test_races.py (the benchmark runs 200)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "race: processes racing on one database (slow)")


@pytest.fixture
def race_trials(request: pytest.FixtureRequest) -> int:
    return request.config.getoption("--race-trials")


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = open_database(tmp_path / "test.db")
    yield engine
    engine.dispose()


def database_dump(engine: Engine) -> dict[str, list[tuple]]:
    """Every row of every table, to assert that a failed import changed nothing."""
    metadata = MetaData()
    metadata.reflect(engine)
    with engine.connect() as connection:
        return {
            name: sorted(map(tuple, connection.execute(select(table)).all()), key=repr)
            for name, table in metadata.tables.items()
        }
