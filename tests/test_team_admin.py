"""Issue #45, item 4: least privilege for the administrator. The README's administrator
has no CREATEROLE (with which, on PostgreSQL 15, a role grants itself
pg_execute_server_program and runs programs as the server's OS user, or changes any other
project's roles): the superuser's one-time SQL (`thumb team setup-sql`) makes the team's
groups and a registrar whose two functions add and retire members. On
THUMB_TEST_POSTGRES the tests' role (thumb_ci, CREATEROLE) stands in for the superuser;
the administrator is a fresh login role with no CREATEROLE, which runs `thumb` as the
README says and then tries each attack in raw SQL with its own credentials."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from typer.testing import CliRunner

from benchmarks.races import drop_everything
from storage.db.schema_check import TRIGGERS
from storage.team import TeamError, TeamRoles, init_team, registrar_role, setup_statements
from tests.conftest import SAMPLE_CSV
from tests.team_helpers import PASSWORD, clear_functions, dissolve, team_on

URL = os.environ.get("THUMB_TEST_POSTGRES")
pytestmark = pytest.mark.postgres


@dataclass
class Narrow:
    """The superuser's stand-in, the team's prefix and roles, the administrator's name and
    URL, and another project's login role on the same server."""

    superuser: Engine
    prefix: str
    roles: TeamRoles
    admin: str
    admin_url: str
    other_project: str

    def as_role(self, name: str) -> str:
        return make_url(URL).set(username=name, password=PASSWORD).render_as_string(
            hide_password=False)


def drop_trigger_functions(url: str) -> None:
    """The revisions' trigger functions, which outlive the tables `drop_everything` drops."""
    engine = create_engine(url)
    with engine.begin() as connection:
        for _, name in TRIGGERS["postgresql"]:
            connection.execute(text(f"DROP FUNCTION IF EXISTS {name} CASCADE"))
    engine.dispose()


@pytest.fixture
def narrow() -> Iterator[Narrow]:
    if not URL:
        pytest.skip("THUMB_TEST_POSTGRES is not set")
    drop_everything(URL)
    clear_functions(URL)
    drop_trigger_functions(URL)  # so that the administrator's `db upgrade` makes its own
    suffix = secrets.token_hex(4)
    prefix, admin, other = f"t{suffix}", f"admin_{suffix}", f"other_{suffix}"
    roles, registrar = TeamRoles.named(prefix), registrar_role(prefix)
    superuser = create_engine(URL)
    with superuser.begin() as connection:
        database = connection.execute(text("SELECT current_database()")).scalar_one()
        statements = [
            f"CREATE ROLE {admin} LOGIN PASSWORD '{PASSWORD}'",
            f"CREATE ROLE {other} LOGIN PASSWORD '{PASSWORD}'",
            # the database's owner in the README (`createdb --owner`): thumb_ci owns it here
            f"GRANT CONNECT ON DATABASE {database} TO {admin} WITH GRANT OPTION",
            f"GRANT USAGE, CREATE ON SCHEMA public TO {admin} WITH GRANT OPTION",
            # a superuser may SET ROLE to any role; thumb_ci joins the registrar for it
            f"CREATE ROLE {registrar} NOLOGIN CREATEROLE",
            f"GRANT {registrar} TO CURRENT_USER",
            *setup_statements(prefix, admin)]
        for statement in statements:
            connection.exec_driver_sql(statement)
    made = Narrow(superuser, prefix, roles, admin, "", other)
    made.admin_url = made.as_role(admin)
    try:
        yield made
    finally:
        with superuser.begin() as connection:
            members = list(connection.execute(text(  # the people it added, by their names
                "SELECT rolname FROM pg_roles WHERE rolname LIKE :people"),
                {"people": f"%\\_{prefix}"}).scalars())
            # the tables are the owner role's now; a superuser may drop them
            connection.execute(text(f"GRANT {roles.owner} TO CURRENT_USER"))
            connection.execute(text(f"REVOKE ALL ON DATABASE {database} FROM {admin} CASCADE"))
            connection.execute(text(f"REVOKE ALL ON SCHEMA public FROM {admin} CASCADE"))
        dissolve(URL, roles, members)
        drop_trigger_functions(URL)  # the administrator's
        with superuser.begin() as connection:
            for role in (admin, other, registrar):
                connection.execute(text(f"DROP ROLE IF EXISTS {role}"))
        superuser.dispose()


def thumb(url: str, *arguments: str, stdin: str | None = None) -> str:
    from thumb_tui.cli import app

    result = CliRunner().invoke(app, ["--db", url, *arguments], input=stdin)
    assert result.exit_code == 0, (arguments, result.output)
    return result.output


def test_the_readme_s_administrator_runs_a_team_without_createrole(narrow):
    """`thumb db upgrade`, import, `team init`, `add`, `status`, `remove` as the README's
    administrator, whose role may create no role itself."""
    admin = create_engine(narrow.admin_url)
    try:
        with admin.connect() as connection:
            assert not connection.execute(text(
                "SELECT rolcreaterole FROM pg_roles WHERE rolname = current_user")).scalar_one()
        with pytest.raises(TeamError, match="setup-sql"):  # another prefix: no set-up
            init_team(admin, TeamRoles.named(f"{narrow.prefix}x"))
    finally:
        admin.dispose()
    url, alice, lena = narrow.admin_url, f"alice_{narrow.prefix}", f"lena_{narrow.prefix}"
    thumb(url, "db", "upgrade")
    thumb(url, "import", str(SAMPLE_CSV))
    thumb(url, "team", "init", "--prefix", narrow.prefix)
    thumb(url, "team", "add", alice, "--password-stdin", stdin=f"{PASSWORD}\n")
    thumb(url, "team", "add", lena, "--lead", "--password-stdin", stdin=f"{PASSWORD}\n")
    status = thumb(url, "team", "status")
    assert alice in status and lena in status
    assert "images to rate" in thumb(narrow.as_role(alice), "next")
    as_alice = create_engine(narrow.as_role(alice))
    try:
        with as_alice.connect() as connection:
            assert connection.execute(text("SHOW lock_timeout")).scalar_one() == "5s"
            with pytest.raises(DBAPIError, match="permission denied for function"):
                connection.execute(text("SELECT thumb_add_member('mallory', NULL, true)"))
    finally:
        as_alice.dispose()
    thumb(url, "team", "remove", alice)
    locked_out = create_engine(narrow.as_role(alice))
    with pytest.raises(DBAPIError, match="not permitted to log in"):
        locked_out.connect()
    locked_out.dispose()


# Each what the README's administrator could do with CREATEROLE on PostgreSQL 15, typed in
# psql; {me} is its own role, {other} another project's, {lead} the team's lead group,
# {registrar} the role with CREATEROLE that owns the member functions.
ATTACKS = (
    "GRANT pg_execute_server_program TO {me}",
    "COPY (SELECT 1) TO PROGRAM 'true'",
    "ALTER ROLE {other} NOLOGIN",
    "ALTER ROLE {other} PASSWORD 'taken over'",
    "SELECT pg_read_file('/etc/passwd')",
    "CREATE ROLE mallory_{me} LOGIN",
    "GRANT {lead} TO {other}",
    "SET ROLE {registrar}",
)
# ... and through the registrar's functions, which run with CREATEROLE
THROUGH_REGISTRAR = (
    ("SELECT thumb_remove_member(:other)", {}),
    ("SELECT thumb_add_member(:name, NULL, false)", {"name": 'x" SUPERUSER --'}),
    ("SELECT thumb_add_member('mallory', :verifier, false)",
     {"verifier": "x' SUPERUSER --"}),
    ("SELECT thumb_add_member('mallory', 'a password in clear', false)", {}),
)


def attempt(engine: Engine, sql: str, **values: object) -> bool:
    """Whether the statement ran (then rolled back, as everything here is)."""
    with engine.connect() as connection:
        try:
            connection.execute(text(sql), values)
            return True
        except DBAPIError:
            return False


def test_the_readme_s_administrator_gains_no_server_program_file_or_other_role(narrow):
    names = {"me": narrow.admin, "other": narrow.other_project, "lead": narrow.roles.lead,
             "registrar": registrar_role(narrow.prefix)}
    admin = create_engine(narrow.admin_url)
    try:
        ran = {sql: attempt(admin, sql.format(**names)) for sql in ATTACKS}
        ran |= {sql: attempt(admin, sql, other=narrow.other_project, **values)
                for sql, values in THROUGH_REGISTRAR}
    finally:
        admin.dispose()
    assert not any(ran.values()), ran
    # the administrator the README described before, with CREATEROLE, could (rolled back)
    old = {**names, "me": "CURRENT_USER"}
    assert attempt(narrow.superuser, ATTACKS[0].format(**old))
    assert attempt(narrow.superuser, ATTACKS[2].format(**old))


def test_team_init_takes_create_on_the_schema_from_public_where_it_was_granted():
    """PostgreSQL 15 makes new databases without it; one made before (or granted by hand)
    would let an annotator create a table or function in the team's schema."""
    if not URL:
        pytest.skip("THUMB_TEST_POSTGRES is not set")
    owner = create_engine(URL)
    try:
        with owner.begin() as connection:
            connection.execute(text("GRANT CREATE ON SCHEMA public TO PUBLIC"))
        with team_on(URL, {"alice": False}) as team, \
                team.engine("alice").connect() as alice:
            assert not alice.execute(text(
                "SELECT has_schema_privilege('public', 'CREATE')")).scalar_one()
            with pytest.raises(DBAPIError, match="permission denied for schema public"):
                alice.execute(text("CREATE TABLE public.planted (id integer)"))
    finally:
        with owner.begin() as connection:
            connection.execute(text("REVOKE CREATE ON SCHEMA public FROM PUBLIC"))
        owner.dispose()
