"""`thumb team`: the administrator's commands for a team on PostgreSQL, whose server keeps
each annotator's view blind (roles, grants and row-level security: `storage/team.py`)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from rubrics import printable
from thumb_tui.cli.common import fail, state

# storage.team (SQLAlchemy, the tables) is imported by each command: building the command
# line, which every `thumb` start does, needs none of it

app = typer.Typer(help="A team on PostgreSQL: one database role per person, and a server "
                       "that shows each annotator only what the THUMB protocol does.")

NameArgument = Annotated[str, typer.Argument(
    help="The person's database role, which is also their annotator name.")]


@contextmanager
def _team_errors() -> Iterator[None]:
    """A team command that cannot run here ends in one line."""
    from storage.team import TeamError

    try:
        yield
    except TeamError as exc:
        fail(printable(str(exc), newlines=False))


@app.command("init")
def init_command(
    prefix: Annotated[str | None, typer.Option(
        "--prefix", help="Names the group roles PREFIX_owner, PREFIX_lead and "
                         "PREFIX_annotator (role names are global to the server); "
                         "without it, thumb_owner, thumb_lead and thumb_annotator.")]
    = None,
) -> None:
    """Make the team's roles, grants and row-level security on this database. Run it as
    the administrator (the role that ran `thumb db upgrade`), once after the superuser ran
    `thumb team setup-sql`'s SQL, and again after every `thumb db upgrade`."""
    from storage.team import TeamRoles, init_team

    with _team_errors():
        roles = TeamRoles.named() if prefix is None else TeamRoles.named(prefix)
        init_team(state.existing_engine, roles)
    typer.echo(f"team ready: {roles.owner} owns the schema, {roles.lead} reads and writes "
               f"everything, {roles.annotator} sees what the protocol shows. Add people "
               "with `thumb team add NAME [--lead]`.")


@app.command("setup-sql")
def setup_sql_command(
    admin: Annotated[str, typer.Option(
        "--admin", help="The administrator's login role (the database's owner), which "
                        "then needs no CREATEROLE.")],
    prefix: Annotated[str, typer.Option(
        "--prefix", help="The prefix `thumb team init` will be given.")] = "thumb",
) -> None:
    """Print the SQL that the server's superuser runs once in the project's database
    (`| sudo -u postgres psql -v ON_ERROR_STOP=1 -d DB`): the team's group roles, and a
    registrar role through which the administrator adds and removes people, so that the
    administrator never holds CREATEROLE (with which it could make itself a server
    program runner or change other projects' roles). Connects to nothing."""
    from storage.team import setup_statements

    with _team_errors():
        statements = setup_statements(prefix, admin)
    typer.echo("".join(f"{statement};\n" for statement in statements), nl=False)


def _password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    return typer.prompt("password", hide_input=True, confirmation_prompt=True)


@app.command("add")
def add_command(
    name: NameArgument,
    lead: Annotated[bool, typer.Option("--lead", help="A lead (reads everything) rather "
                                                     "than an annotator.")] = False,
    password_stdin: Annotated[bool, typer.Option(
        "--password-stdin", help="Read the password from the first line of standard "
                                 "input instead of asking for it.")] = False,
    cert: Annotated[bool, typer.Option(
        "--cert", help="No password: the person logs in with a client certificate whose "
                       "CN is NAME (a `hostssl … cert` line in pg_hba.conf).")] = False,
) -> None:
    """Give one person a login role in the team (and an annotator name). Only the
    password's SCRAM verifier reaches the server; nothing is printed or stored here."""
    from storage.team import add_member, checked_role_name

    if cert and password_stdin:
        fail("--cert and --password-stdin exclude each other")
    with _team_errors():
        checked_role_name(name)
        engine = state.existing_engine
        add_member(engine, name, lead=lead, password=None if cert else _password(password_stdin))
    typer.echo(f"{name} added as {'a lead' if lead else 'an annotator'}"
               + ("; they log in with their certificate" if cert else ""))


@app.command("remove")
def remove_command(name: NameArgument) -> None:
    """Take a person's rights and login away. Their role stays, unable to log in, so that
    no one added later under the same name inherits their ratings."""
    from storage.team import remove_member

    with _team_errors():
        remove_member(state.existing_engine, name)
    typer.echo(f"{name} can no longer log in or reach the project")


@app.command("status")
def status_command() -> None:
    """The team's roles and what each may do."""
    from storage.team import members, team_roles

    engine = state.existing_engine
    with _team_errors():
        roles, people = team_roles(engine), members(engine)
    typer.echo(f"owner {roles.owner} · leads {roles.lead} · annotators {roles.annotator}")
    for member in people:
        typer.echo(f"{printable(member.name, newlines=False):<24} {member.group:<10} "
                   f"{member.can}")
    if not people:
        typer.echo("no one yet: `thumb team add NAME [--lead]`")
