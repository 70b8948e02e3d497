"""The `thumb` command line: one module per command group, assembled here."""

from __future__ import annotations

from typing import Annotated

import typer

from thumb_tui.cli import (
    analysis,
    annotators,
    bison,
    campaign,
    database,
    gold,
    images,
    judgments,
    match,
    project,
    rating,
    retrieval,
    team,
)
from thumb_tui.cli.common import SafeGroup, state

app = typer.Typer(
    cls=SafeGroup,
    help="Rate image captions with the THUMB 1.0 rubric and analyse the ratings.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def main(
    db: Annotated[
        str,
        typer.Option(
            "--db", envvar="THUMB_DB",
            help="SQLite file path or any SQLAlchemy URL (e.g. postgresql://…).",
        ),
    ] = "thumb.db",
) -> None:
    state.db = db


for group in (project, rating, analysis, campaign):
    app.add_typer(group.app)
app.add_typer(bison.app, name="bison")
app.add_typer(judgments.app, name="judgments")
app.add_typer(database.app, name="db")
app.add_typer(retrieval.app, name="retrieval")
app.add_typer(match.app, name="match")
app.add_typer(gold.app, name="gold")
app.add_typer(images.app, name="image")
app.add_typer(team.app, name="team")
app.add_typer(annotators.app, name="annotator")

__all__ = ["app"]
