"""Image commands for the lead: `thumb image unflag` takes back broken-image flags."""

from __future__ import annotations

from typing import Annotated

import typer

from rubrics import printable
from storage.events import os_login
from thumb_tui.cli.common import ActorOption, fail, known_annotator, state

# What taking back an image's last flag changes, true whether or not it has been rated.
UNFLAGGED = "it is no longer kept out of the queues, review, agreement and the report"

app = typer.Typer(help="The lead's image commands (unflag an image flagged as broken).")


@app.command("unflag")
def unflag_command(
    image: Annotated[str, typer.Argument(help="The image's id (as `thumb status` lists it).")],
    annotator: Annotated[str | None, typer.Option(
        "--annotator", help="Remove only this annotator's flag (default: every flag).")]
    = None,
    by: ActorOption = "",
) -> None:
    """Take back the broken-image flags of an image: once none is left it is no longer kept
    out of the annotators' queues, review, agreement and the report (whether it has been
    rated or not); each removal is logged with who made it."""
    from storage.rating.image_flags import UnflagError, unflag

    engine = state.existing_engine
    name = None if annotator is None else known_annotator(annotator)
    try:
        removed, still = unflag(engine, image, by or os_login(), annotator=name)
    except UnflagError as exc:
        fail(str(exc))

    def names(people: list[str]) -> str:
        return ", ".join(printable(who, newlines=False) for who in people)

    typer.echo(f"{printable(image, newlines=False)}: removed the broken-image flag of "
               f"{names(removed)}; " + (f"it stays flagged by {names(still)}" if still else
                                        UNFLAGGED))
