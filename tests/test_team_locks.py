"""Issue #45, item 5: no one freezes the team. An annotator's session on a team database
has the server's lock, statement and idle-transaction timeouts on their own role, and a
write that gives up on a lock says whose open transaction holds it. Each holder here is a
raw connection with the person's own credentials, as a `psql` left open would be; it has
its lock before the waiter starts (no sleeps, no races)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError

from storage import import_captions
from storage.db.engine import DatabaseBusy
from storage.rating.rating_sessions import AnnotationSession
from storage.team import ANNOTATOR_SETTINGS
from tests.conftest import SAMPLE_CSV
from tests.team_helpers import Team, team_on
from thumb_tui.screens.busy import busy

URL = os.environ.get("THUMB_TEST_POSTGRES")
pytestmark = pytest.mark.postgres
# The app gives up a write after its attempts (`storage.db.engine.run_write`: about 2 s); far less
# than this, and far more than a lock wait that never ends.
GIVES_UP_WITHIN_S = 15


@pytest.fixture
def team() -> Iterator[Team]:
    if not URL:
        pytest.skip("THUMB_TEST_POSTGRES is not set")
    with team_on(URL, {"alice": False, "bob": False, "lead": True}) as made:
        import_captions(made.engine("lead"), SAMPLE_CSV, actor="lead")
        yield made


def hold(connection: Connection, sql: str, **values: object) -> int:
    """Lock rows in the connection's open transaction, as `psql` would after BEGIN; how
    many rows it holds."""
    return len(connection.execute(text(sql), values).all())


def test_a_write_blocked_by_an_open_transaction_names_its_holder_within_the_timeout(team):
    alice = AnnotationSession(team.engine("alice"), team.names["alice"])
    with team.engine("bob").connect() as bob:  # every image Bob may read, held open
        assert hold(bob, "SELECT id FROM image FOR UPDATE") > 0
        started = time.monotonic()
        with pytest.raises(DatabaseBusy) as busy_claim:
            alice.open_image(0)  # claiming it is her first write
        assert time.monotonic() - started < GIVES_UP_WITHIN_S
    assert busy_claim.value.holders == (team.names["bob"],)
    assert team.names["bob"] in str(busy_claim.value)
    groups = alice.open_image(0)  # Bob's transaction ended: the claim goes through
    image_id = alice.images[0].id
    with team.engine("lead").connect() as lead:
        assert hold(lead, "SELECT id FROM image WHERE id = :id FOR UPDATE", id=image_id) == 1
        started = time.monotonic()
        with pytest.raises(DatabaseBusy) as busy_rating:
            alice.set_values(groups[0], {"precision": 4}, image_index=0, focus=0)
        assert time.monotonic() - started < GIVES_UP_WITHIN_S
    assert busy_rating.value.holders == (team.names["lead"],)
    said = busy("score", busy_rating.value.holders)
    assert said.startswith(f"database busy ({team.names['lead']} holds it in an open "
                           "transaction), your score is not saved yet")


def test_an_annotators_own_session_has_the_servers_timeouts_and_a_leads_has_none(team):
    """On the member's role, not the group's (whose settings reach no member): `psql`
    sessions get them too, where the application's own lock wait does not reach."""
    with team.engine("alice").connect() as alice:
        shown = {name: alice.execute(text(f"SHOW {name}")).scalar_one()
                 for name in ANNOTATOR_SETTINGS}
    assert shown == ANNOTATOR_SETTINGS
    with team.engine("lead").connect() as lead:
        assert lead.execute(text("SHOW lock_timeout")).scalar_one() == "0"


def test_a_psql_lock_wait_by_an_annotator_ends_at_the_servers_lock_timeout(team):
    """Alice types in psql what waits on Bob's lock: her role's lock_timeout ends the wait
    (55P03), not her patience. The connection's own statement_timeout is only the test's
    bound, so that a missing lock_timeout fails (57014) instead of hanging."""
    bob_sees = "SELECT id FROM image FOR UPDATE"
    with team.engine("bob").connect() as bob, team.engine("alice").connect() as alice:
        assert hold(bob, bob_sees) > 0
        alice.execute(text("SET statement_timeout = '20s'"))
        with pytest.raises(DBAPIError) as waited:
            hold(alice, bob_sees)
    assert waited.value.orig.sqlstate == "55P03"
