"""`thumb gold`: gold items in THUMB rating — captions with known acceptable answers,
seeded into annotators' stage-1 queues and scored per annotator (storage/rating/gold.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rubrics import PENALTY_KEYS, SCORE_KEYS, printable
from storage.events import os_login
from thumb_tui.cli.common import (
    ActorOption,
    OutsideImagesOption,
    database_for_import,
    fail,
    state,
)

app = typer.Typer(help="Gold items: captions with known answers seeded into stage 1.",
                  no_args_is_help=True)

RateOption = Annotated[float | None, typer.Option(
    "--rate", help="Share of each annotator's stage-1 queue that is gold (0-0.5; "
                   "default 0.1).")]
FeedbackOption = Annotated[bool | None, typer.Option(
    "--feedback/--no-feedback",
    help="After leaving a gold image answered wrongly, show the annotator its reason.")]


def _settings_line() -> str:
    """The gold settings, and what the rate will really be where there are too few gold
    images to reach it (a session seeds only the gold images there are)."""
    from storage.rating.gold import gold_settings, gold_share

    settings = gold_settings(state.existing_engine)
    line = (f"gold rate {settings.rate:g} of each stage-1 queue; feedback "
            f"{'on' if settings.feedback else 'off'}")
    share = gold_share(state.existing_engine)
    if share.short:
        line += (f"\ngold rate {share.asked:g} asked; with {share.gold_images} gold image"
                 f"{'' if share.gold_images == 1 else 's'} and {share.real_images} real "
                 f"images the rate will be {share.rate:.2f} ({share.wanted} gold images "
                 "would reach it)")
    return line


@app.command("import")
def gold_import_command(
    file: Annotated[Path, typer.Argument(
        help="CSV or JSONL: image, path (optional), caption, precision and recall (a "
             "level or a range like 4-5), each penalty's most acceptable amount "
             "(optional, 0 when left out), reason.")],
    rate: RateOption = None,
    feedback: FeedbackOption = None,
    allow_outside_images: OutsideImagesOption = False,
    replace: Annotated[bool, typer.Option(
        "--replace", help="A caption already gold for its image takes this file's ranges, "
                          "penalties and reason (its answers are judged by them from now "
                          "on; logged).")] = False,
    by: ActorOption = "",
) -> None:
    """Import gold captions (all or nothing; every problem names file:line)."""
    from storage.rating.gold import check_rate, import_gold

    try:
        if rate is not None:
            check_rate(rate)  # before the database is opened (or made)
        with database_for_import() as engine:
            added = import_gold(engine, file, actor=by or os_login(), rate=rate,
                                feedback=feedback,
                                allow_outside_images=allow_outside_images,
                                replace=replace)
    except ValueError as exc:
        fail(str(exc))
    typer.echo(f"{printable(str(file), newlines=False)}: {added} gold caption"
               f"{'' if added == 1 else 's'} {'imported or corrected' if replace else 'imported'}"
               f"; {_settings_line()}")


@app.command("rate")
def gold_rate_command(
    rate: Annotated[float, typer.Argument(help="Share of a stage-1 queue that is gold, "
                                               "0-0.5 (0: no gold shown).")],
    by: ActorOption = "",
) -> None:
    """Set the share of each annotator's stage-1 queue that is gold."""
    from storage.rating.gold import set_gold_settings

    try:
        set_gold_settings(state.existing_engine, actor=by or os_login(), rate=rate)
    except ValueError as exc:
        fail(str(exc))
    typer.echo(_settings_line())


@app.command("feedback")
def gold_feedback_command(
    setting: Annotated[str, typer.Argument(help="on or off.")],
    by: ActorOption = "",
) -> None:
    """Whether an annotator who answered a gold image wrongly sees its reason afterwards."""
    from storage.rating.gold import set_gold_settings

    if setting not in ("on", "off"):
        fail("gold feedback is on or off")
    set_gold_settings(state.existing_engine, actor=by or os_login(),
                      feedback=setting == "on")
    typer.echo(_settings_line())


@app.command("accuracy")
def gold_accuracy_command() -> None:
    """Per annotator: gold captions answered, first answers right, accuracy, and how many
    answers were changed after the first (`thumb gold results` lists them)."""
    from storage.rating.gold import gold_accuracy

    rows = gold_accuracy(state.existing_engine)
    typer.echo(_settings_line())
    if not rows:
        typer.echo("No gold answers yet.")
    for row in rows:
        changed = f"; {row.changed} changed afterwards" if row.changed else ""
        typer.echo(f"{printable(row.annotator, newlines=False)}: {row.correct}/{row.answered}"
                   f" right ({row.accuracy:.0%}){changed}")


def _answer_text(values: dict[str, object]) -> str:
    """An answer as the screens key it: P5 R1, then any penalty held (fluency 0.5)."""
    return " ".join([*(f"{key[0].upper()}{values[key]}" for key in SCORE_KEYS),
                     *(f"{key} {values[key]:g}" for key in PENALTY_KEYS if values[key])])


@app.command("results")
def gold_results_command() -> None:
    """Per annotator and gold caption: the first complete answer (the one scored), right
    or wrong, and the answer now where it was changed — after the feedback, where the
    first was wrong and feedback is on."""
    from storage.rating.gold import gold_results, gold_settings

    results = gold_results(state.existing_engine)
    feedback = gold_settings(state.existing_engine).feedback
    typer.echo(_settings_line())
    if not results:
        typer.echo("No gold answers yet.")
    for result in results:
        line = (f"{printable(result.annotator, newlines=False)}  "
                f"{printable(result.image, newlines=False)}  "
                f"“{printable(result.caption, newlines=False)}”: "
                f"{_answer_text(result.answer)} {'right' if result.right else 'wrong'}")
        if result.changed_to is not None:
            after = "after feedback" if feedback and not result.right else "afterwards"
            line += f"; changed {after} to {_answer_text(result.changed_to)}"
        typer.echo(line)
