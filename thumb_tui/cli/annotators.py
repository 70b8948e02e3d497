"""Annotator commands: `thumb annotator add|list|rename|retire`. A subcommand's name is
never a new annotator's, so `thumb annotator list` lists and makes no annotator "list"."""

from __future__ import annotations

import difflib
from typing import Annotated

import typer
from rich import box
from rich.table import Table
from typer.core import TyperGroup

from rubrics import for_markup, printable
from storage.events import os_login
from thumb_tui.cli.common import (
    ActorOption,
    NativeOption,
    annotator_name,
    console,
    fail,
    known_annotator,
    protocol_refusals,
    state,
    value_errors,
)

SUBCOMMANDS = ("add", "list", "rename", "retire")


class AnnotatorCommands(TyperGroup):
    """`thumb annotator`'s group: a first word that is no subcommand is the old form,
    `thumb annotator NAME [--native]`, which still adds the annotator (`add NAME`), unless
    it looks like a mistyped subcommand (`lsit`, `Rename`): that is refused with the
    subcommand it resembles, so a typo never becomes an annotator."""

    def resolve_command(self, ctx: typer.Context, args: list[str]
                        ) -> tuple[str | None, object, list[str]]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            if resembled := mistyped_subcommand(args[0]):
                fail(f"{printable(args[0], newlines=False)!r} is no subcommand of `thumb "
                     f"annotator`: did you mean `{resembled}`? (To add an annotator of "
                     "that name: thumb annotator add NAME)")
            args = ["add", *args]
        return super().resolve_command(ctx, args)


def mistyped_subcommand(word: str) -> str | None:
    """The subcommand `word` looks like a slip of (the same but for case, or close by
    `difflib`'s ratio: `lsit`, `retier`), or None."""
    close = difflib.get_close_matches(word.lower(), SUBCOMMANDS, n=1, cutoff=0.75)
    return close[0] if close else None


app = typer.Typer(cls=AnnotatorCommands, no_args_is_help=True,
                  help="The project's annotators: add, list, rename, retire (`thumb "
                       "annotator NAME` is `thumb annotator add NAME`).")


def new_name(name: str) -> str:
    """A name for a new or renamed annotator: `annotator_name`'s rules, and none of this
    group's subcommands (`thumb annotator list` lists; it never names anyone)."""
    name = annotator_name(name)
    if name in SUBCOMMANDS:
        fail(f"{name!r} is a subcommand of `thumb annotator` ({', '.join(SUBCOMMANDS)}); "
             "choose another name")
    return name


@app.command("add")
def add_command(
    name: Annotated[str, typer.Argument(help="Annotator name.")],
    native: NativeOption = None,
) -> None:
    """Add an annotator or record whether they are a native English speaker."""
    from storage.rating.annotators import annotator_names
    from storage.rating.rating_sessions import register_annotator

    engine = state.existing_engine
    chosen = annotator_name(name)
    is_new = chosen not in annotator_names(engine)
    if is_new:  # an existing "list" may still get --native
        chosen = new_name(chosen)
    with protocol_refusals():
        native_english = register_annotator(engine, chosen, native)
    said = {True: "a native English speaker", False: "not a native English speaker",
            None: "native language not recorded (--native or --non-native records it)"}
    added = "added annotator " if is_new else ""
    typer.echo(printable(f"{added}{chosen}: {said[native_english]}", newlines=False))


@app.command("list")
def list_command() -> None:
    """Every annotator, retired ones included: native English speaker or not, when added,
    when retired."""
    from storage.rating.annotators import annotators

    people = annotators(state.existing_engine)
    if not people:
        typer.echo("No annotators yet (thumb annotator add NAME adds one).")
        return
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    for column in ("annotator", "native English", "added", "retired"):
        table.add_column(column, overflow="fold" if column == "annotator" else "ellipsis")
    native = {True: "yes", False: "no", None: "not recorded"}
    for person in people:
        table.add_row(for_markup(person.name, newlines=False), native[person.native_english],
                      f"{person.created_at:%Y-%m-%d}",
                      f"{person.retired_at:%Y-%m-%d}" if person.retired_at else "-")
    console.print(table)


@app.command("rename")
def rename_command(
    old: Annotated[str, typer.Argument(help="The annotator's name now.")],
    new: Annotated[str, typer.Argument(help="Their new name.")],
    by: ActorOption = "",
) -> None:
    """Rename an annotator: their work and history follow them; logged."""
    from storage.rating.annotators import rename_annotator

    name, renamed = known_annotator(old), new_name(new)
    with value_errors():
        rename_annotator(state.existing_engine, name, renamed, actor=by or os_login())
    typer.echo(printable(f"renamed {name} to {renamed}", newlines=False))


@app.command("retire")
def retire_command(
    name: Annotated[str, typer.Argument(help="Annotator name.")],
    by: ActorOption = "",
) -> None:
    """Retire an annotator: no new image for them from now on; their work, the claims they
    hold and their history stay (`thumb release` gives up the claims). Logged."""
    import shlex

    from storage.rating.annotators import retire_annotator

    person = known_annotator(name)
    with value_errors():
        retired = retire_annotator(state.existing_engine, person, actor=by or os_login())
    shown = printable(person, newlines=False)
    if not retired:
        typer.echo(f"{shown} is retired already.")
        return
    typer.echo(printable(
        f"retired {person}: no new image for them; their work stays. Images they still "
        f"hold: thumb{state.db_option} status lists them; thumb{state.db_option} release "
        f"--annotator {shlex.quote(person)} gives up the untouched ones", newlines=False))
