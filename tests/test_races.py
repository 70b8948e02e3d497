"""The THUMB protocol under races (issue: many annotators at once): for each race, processes
released at the same instant by a multiprocessing.Barrier act through the session API the
screens use, on SQLite and on PostgreSQL (THUMB_TEST_POSTGRES), and the database shows no
violation and no process crashed (match verification included: one annotator in two
processes holds one batch, and no answer is silently overwritten). A short run by default
(`--race-trials N` to change it; `-m "not race"` to skip); `python -m benchmarks.races`
runs 200 trials per race and the 8 x 1,000-rating throughput run with its latencies."""

from __future__ import annotations

import os

import pytest

from benchmarks.races import (
    MATCH_RACES,
    RACE_ANNOTATORS,
    RACES,
    TeamLogins,
    run_race,
    run_throughput,
)

POSTGRES = os.environ.get("THUMB_TEST_POSTGRES")
BACKENDS = [
    "sqlite",
    pytest.param("postgresql", marks=[pytest.mark.skipif(
        not POSTGRES, reason="THUMB_TEST_POSTGRES is not set"), pytest.mark.postgres]),
]
pytestmark = [pytest.mark.race, pytest.mark.slow]


def target(backend: str, tmp_path) -> str:
    return POSTGRES if backend == "postgresql" else str(tmp_path / "race.db")  # type: ignore[return-value]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("race", RACES)
def test_no_protocol_violation_under_a_race(race, backend, tmp_path, race_trials):
    result = run_race(race, target(backend, tmp_path), race_trials, tmp_path / "project")
    assert result.trials == race_trials
    assert (result.violations, result.errors) == (0, 0), result


@pytest.mark.parametrize("backend", BACKENDS)
def test_eight_writers_lose_and_duplicate_nothing(backend, tmp_path, race_trials):
    ratings = 5 * race_trials
    result = run_throughput(target(backend, tmp_path), tmp_path / "project", ratings=ratings)
    assert result.saved == 8 * ratings
    assert (result.lost, result.duplicated, result.errors) == (0, 0, 0), result


@pytest.mark.postgres
@pytest.mark.skipif(not POSTGRES, reason="THUMB_TEST_POSTGRES is not set")
@pytest.mark.parametrize("race", [race for race in RACES if race not in MATCH_RACES])
def test_no_protocol_violation_when_each_annotator_races_as_their_own_role(
        race, tmp_path, race_trials):
    """The same races on a PostgreSQL team (`thumb team`): row-level security shows each
    annotator only some ratings, and the protocol still holds under the image lock."""
    import secrets

    from storage.team import TeamRoles
    from tests.team_helpers import PASSWORD, dissolve

    suffix = secrets.token_hex(4)
    logins = TeamLogins(f"t{suffix}", suffix, PASSWORD)
    try:
        result = run_race(race, POSTGRES, race_trials, tmp_path / "project", logins)
    finally:
        dissolve(POSTGRES, TeamRoles.named(logins.prefix),  # type: ignore[arg-type]
                 [logins.name(name) for name in RACE_ANNOTATORS])
    assert result.trials == race_trials
    assert (result.violations, result.errors) == (0, 0), result
