"""A team on the test PostgreSQL server (THUMB_TEST_POSTGRES), as `thumb team` makes one:
roles with a random suffix (role names are global to the server, and tests may run at
once and again on one server), engines logged in as each person, and a teardown that
leaves the server as it was."""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import URL, make_url

from benchmarks.races import drop_everything
from storage import open_database
from storage.db.engine import make_engine
from storage.team import FUNCTIONS, REACHED, TeamRoles, add_member, init_team

PASSWORD = "a test password: only its verifier reaches the server"


@dataclass
class Team:
    """The administrator's engine, the team's roles and one engine per person by their
    short name (`alice` logs in as `alice_<suffix>`, her annotator name)."""

    url: str
    admin: Engine
    roles: TeamRoles
    names: dict[str, str]
    engines: dict[str, Engine] = field(default_factory=dict)

    def engine(self, who: str) -> Engine:
        """`who`'s engine as thumb-tui makes one (`storage.db.engine.make_engine`)."""
        if who not in self.engines:
            self.engines[who] = make_engine(self.login(who).render_as_string(
                hide_password=False))
        return self.engines[who]

    def login(self, who: str) -> URL:
        """`who`'s own login, for a client that is not thumb-tui (psql, say)."""
        return make_url(self.url).set(username=self.names[who], password=PASSWORD)

    def unguard(self) -> None:
        """What the team had before row-level security: row-level security off and the
        README's old grants (every table readable by an annotator), so that a test of a
        rule shows that it could fail."""
        annotator = self.roles.annotator
        with self.admin.begin() as connection:
            for table in REACHED:
                connection.execute(text(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY"))
            connection.execute(text(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO "
                                    f"{annotator}"))
            connection.execute(text(f"GRANT UPDATE, DELETE ON rating, image_flag, event_log "
                                    f"TO {annotator}"))
            # (their own gold answers' every column, first answers included: #45)
            connection.execute(text(f"GRANT INSERT, UPDATE ON gold_answer TO {annotator}"))


def clear_functions(url: str) -> None:
    """Drop the team's functions a failed run may have left (a database whose tables were
    dropped must not keep a progress function that the protocol would read)."""
    engine = create_engine(url)
    with engine.begin() as connection:
        for function in FUNCTIONS:
            connection.execute(text(f"DROP FUNCTION IF EXISTS {function}"))
    engine.dispose()


@contextmanager
def team_on(url: str, people: dict[str, bool]) -> Iterator[Team]:
    """A fresh database at `url` with a team whose members are `people` (short name ->
    is a lead), each with a login role; everything is dropped afterwards."""
    drop_everything(url)
    clear_functions(url)
    suffix = secrets.token_hex(4)
    roles = TeamRoles.named(f"t{suffix}")
    names = {who: f"{who}_{suffix}" for who in people}
    team = Team(url, open_database(url), roles, names)
    try:
        init_team(team.admin, roles)
        for who, lead in people.items():
            add_member(team.admin, names[who], lead=lead, password=PASSWORD)
        yield team
    finally:
        for engine in (*team.engines.values(), team.admin):
            engine.dispose()
        dissolve(url, roles, names.values())


def dissolve(url: str, roles: TeamRoles, members: Iterable[str]) -> None:
    """Drop the project, the team's functions and every role the team made."""
    drop_everything(url)
    clear_functions(url)
    engine = create_engine(url)
    with engine.begin() as connection:
        database = connection.execute(text("SELECT current_database()")).scalar_one()
        groups = (roles.owner, roles.lead, roles.annotator)
        existing = set(connection.execute(text("SELECT rolname FROM pg_roles")).scalars())
        for group in groups:
            if group in existing:
                connection.execute(text(f"REVOKE ALL ON DATABASE {database} FROM {group}"))
                connection.execute(text(f"REVOKE ALL ON SCHEMA public FROM {group}"))
        for role in [*members, *groups]:
            if role in existing:
                connection.execute(text(f'DROP ROLE "{role}"'))
    engine.dispose()
