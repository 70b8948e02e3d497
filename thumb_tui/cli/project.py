"""Project commands: import, export, status and next, releasing claims and the
double-rating assignment."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.table import Table

import storage
from rubrics import for_markup, printable
from storage import EXPORT_FORMATS
from storage.events import os_login
from thumb_tui.cli.common import (
    ActorOption,
    AnnotatorOption,
    OutsideImagesOption,
    check_format,
    collector_paused,
    console,
    database_for_import,
    fail,
    known_annotator,
    named_tasks,
    progress_bar,
    state,
    value_errors,
    working,
)
from thumb_tui.cli.outputs import ForceOption, Outputs, RawOption, output_file

if TYPE_CHECKING:  # the storage modules that read a project load when a command runs
    from sqlalchemy import Engine

    from storage.rating.dashboard import AnnotatorProgress, Dashboard

app = typer.Typer()


@app.command("import")
def import_command(
    file: Annotated[Path, typer.Argument(help="CSV or JSONL of captions (and ratings).")],
    allow_outside_images: OutsideImagesOption = False,
    by: ActorOption = "",
    rubric: Annotated[
        str | None,
        typer.Option("--rubric", help="A rubric TOML file (or a bundled name such as "
                                      "thumb-1.0): the file's ratings and all new ones use "
                                      "it. Default: the project's rubric (THUMB 1.0 at first)."),
    ] = None,
) -> None:
    """Import captions, references and optional ratings (all or nothing)."""
    from rubrics import load_rubric

    with value_errors():
        chosen = None if rubric is None else load_rubric(rubric)
    with (value_errors(), database_for_import() as engine, collector_paused(),
          progress_bar() as bar):
        summary = storage.import_captions(engine, file, actor=by or os_login(),
                                          rubric=chosen,
                                          allow_outside_images=allow_outside_images,
                                          progress=named_tasks(bar))
    typer.echo(str(summary))


@app.command("import-thumb")
def import_thumb_command(
    file: Annotated[Path, typer.Argument(help="THUMB release JSONL (mscoco_THumB-1.0.jsonl).")],
    references: Annotated[
        Path, typer.Option("--references", help="References JSON lines of the release.")
    ],
    images: Annotated[
        Path | None, typer.Option("--images", help="Folder with the COCO val2014 images.")
    ] = None,
    allow_outside_images: OutsideImagesOption = False,
    by: ActorOption = "",
) -> None:
    """Import the public THUMB 1.0 release; its scores become annotator `thumb-1.0`, final."""
    with database_for_import() as engine:
        summary = storage.import_thumb(engine, file, references,
                                       actor=by or os_login(), images_dir=images,
                                       allow_outside_images=allow_outside_images)
    typer.echo(str(summary))


@app.command("export")
def export_command(
    out: Annotated[Path, typer.Option("--out", help="Output file (written under this name "
                                                    "in --format).")],
    fmt: Annotated[
        str, typer.Option("--format", help=f"One of: {', '.join(EXPORT_FORMATS)}.")
    ] = "csv",
    references_out: Annotated[
        Path | None,
        typer.Option("--references-out", help="With thumb-jsonl: also write the references."),
    ] = None,
    force: ForceOption = False,
    raw: RawOption = False,
) -> None:
    """Export captions, references and ratings (thumb-jsonl: final scores, release format)."""
    if fmt not in EXPORT_FORMATS:
        fail(f"unknown format {fmt!r}; expected one of {', '.join(EXPORT_FORMATS)}")
    if references_out is not None and fmt != "thumb-jsonl":
        fail(f"--references-out is for --format thumb-jsonl; {fmt} writes the references in "
             "every row")
    output_file(out, force=force, fmt=fmt)
    output_file(references_out, "--references-out", force=force)
    engine = state.existing_engine
    signatures = None
    with Outputs(force) as files, working(f"exporting the project as {fmt}"):
        temporary = files.file(out, fmt=fmt)
        if fmt == "thumb-jsonl":
            with value_errors():
                count = storage.export_thumb(engine, temporary, references_out and files.file(
                    references_out, "--references-out"))
        else:
            from reports.exports import export_project, signatures_path

            signatures = signatures_path(out)
            count, written_signatures = export_project(
                engine, temporary, fmt, raw=raw,
                signatures_out=files.file(signatures, optional=True))
            signatures = signatures if written_signatures else None
    typer.echo(f"wrote {count} rows to {out}"
               + (f" (metric signatures in {signatures})" if signatures else ""))
    if fmt != "thumb-jsonl":
        _say_what_import_needs(engine, out)


def _say_what_import_needs(engine: Engine, out: Path) -> None:
    """Notes on what an export leaves out or what importing it needs: ratings in progress;
    ratings on another rubric than THUMB 1.0, which `thumb import` reads on THUMB 1.0's
    scales unless given their rubric; image paths leading out of the file's folder, which
    it refuses unless --allow-outside-images (SECURITY.md)."""
    from rubrics import THUMB_1_0
    from storage.exporter import exported_rubrics, images_outside, in_progress_ratings

    if pending := in_progress_ratings(engine):
        typer.echo(f"note: {pending} rating(s) in progress (P or R not set yet) are not "
                   "exported")
    if others := [rubric for rubric in exported_rubrics(engine) if rubric != THUMB_1_0]:
        named = ", ".join(f"{rubric.signature} ({rubric.title})" for rubric in others)
        typer.echo(printable(
            f"note: the ratings are on rubric {named}; `thumb import` refuses a rating on "
            "another rubric than the importing project's (THUMB 1.0 in a new database), so "
            "import this file with --rubric and that rubric's file",
            newlines=False))
    if outside := images_outside(engine, out):
        typer.echo(printable(
            f"note: {len(outside.paths)} image path(s) in {out} lead out of its folder (the "
            f"first: {outside.paths[0]}); `thumb import` refuses them unless you add "
            "--allow-outside-images (for a file you trust, like this one), or export into "
            f"{outside.holding_folder} or a folder above it", newlines=False))


@app.command("status")
def status_command(
    fmt: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
) -> None:
    """Pipeline per stage, each annotator's work and what waits for them, broken images.

    Stages: stage 1, second blind rating, review, resolution, fluency round; each with how
    many images (or captions) wait, are in progress and are done. `--format json` gives
    all of it, every system included."""
    import dataclasses
    import json

    check_format(fmt, ("table", "json"))
    from storage.rating.dashboard import dashboard

    board = dashboard(state.existing_engine)
    if fmt == "json":
        typer.echo(json.dumps(dataclasses.asdict(board), indent=2))
        return
    console.print(_overview_table(board))
    console.print(_pipeline_table(board))
    if board.annotators:
        console.print(_annotator_table(board))
    if board.claims:
        console.print(_claims_table(board))
    for item in board.broken_images:
        console.print(f"broken image {for_markup(item.key, newlines=False)}: "
                      f"{for_markup(item.reason, newlines=False)} "
                      f"(flagged by {for_markup(item.annotator, newlines=False)})")


MAX_SYSTEMS_LISTED = 12  # beyond this, one summary line (all of them: --format json)


def _overview_table(board: Dashboard) -> Table:
    table = Table(title=f"thumb-tui project: {for_markup(state.shown_db, newlines=False)}",
                  show_header=False)
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_row("images", str(board.images))
    table.add_row("captions", str(board.captions))
    sizes = sorted(board.systems.values())
    table.add_row("systems", str(len(sizes)))
    if len(sizes) > MAX_SYSTEMS_LISTED:
        spread = f"{sizes[0]}" if sizes[0] == sizes[-1] else f"{sizes[0]}–{sizes[-1]}"
        table.add_row(f"  captions per system ({len(sizes)} systems; --format json "
                      "lists them)", spread)
    else:
        for system, count in board.systems.items():
            table.add_row(f"  captions by {for_markup(system, newlines=False)}", str(count))
    table.add_row("annotators", str(len(board.annotators)))
    if board.bison_items:
        table.add_row("BISON items", str(board.bison_items))
    if board.gold_captions:
        table.add_row("gold captions (thumb gold; not in the counts above)",
                      str(board.gold_captions))
    _judgment_rows(table)
    table.add_row("images flagged as broken", str(len({b.key for b in board.broken_images})))
    return table


def _judgment_rows(table: Table) -> None:
    """One row per judgment set: its kind, scale and number of judgments."""
    from storage.judgments import judgment_counts, judgment_sets

    counts = judgment_counts(state.existing_engine)
    for info in judgment_sets(state.existing_engine):
        table.add_row(f"judgment set {for_markup(info.name, newlines=False)} ({info.kind}"
                      + (f", scale {info.scale}" if info.kind == "score" else "") + ")",
                      f"{counts.get(info.name, 0)} judgments")


def _pipeline_table(board: Dashboard) -> Table:
    table = Table(title="Pipeline")
    for column in ("stage", "of", "waiting", "in progress", "done", "not ready"):
        table.add_column(column, justify="left" if column in ("stage", "of") else "right")
    for stage in board.stages:
        table.add_row(stage.stage, stage.unit, str(stage.waiting), str(stage.in_progress),
                      str(stage.done), str(stage.not_ready) if stage.not_ready else "")
    return table


WAITING_WORD = "fluency-round"  # the longest word of the waiting column


def _annotator_table(board: Dashboard) -> Table:
    # no vertical rules, padding on the right only: nine columns of whole words fit 80
    table = Table(title="Annotators (images done +open; captions resolved and checked)",
                  caption="waiting: what each can do now (thumb next --annotator NAME)",
                  box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0))
    gold = ("gold",) if board.gold_captions else ()  # right/answered, accuracy
    waiting_width = max([len(WAITING_WORD), *(len(f"{w.command} {w.count}")
                                              for person in board.annotators
                                              for w in person.waiting)])
    for column in ("annotator", "stage 1", "review", "resolved", "fluency", "BISON", *gold,
                   "waiting"):
        # whole words: a long name folds (never cut to "maximili…"), the header and the
        # commands waiting with their counts (`fluency-round 56`) keep their width
        table.add_column(column, justify="left" if column in ("annotator", "waiting")
                         else "right", overflow="fold" if column == "annotator" else "ellipsis",
                         min_width=waiting_width if column == "waiting" else len(column),
                         no_wrap=column == "waiting")
    for person in board.annotators:
        waiting = "\n".join(f"{w.command} {w.count}" for w in person.waiting) or "-"
        name = for_markup(person.name, newlines=False) + (" (native)" if person.native_english
                                                           else "")
        table.add_row(name, _done_open(person.rated_images, person.rating_images),
                      _done_open(person.reviewed_images, person.reviewing_images),
                      str(person.resolved_captions), str(person.fluency_verdicts),
                      str(person.bison_answers), *(_gold_cell(person) for _ in gold),
                      waiting)
    return table


def claim_age(seconds: float) -> str:
    """A claim's age in its largest units: `45 s`, `12 min`, `3 h 05 min`, `2 d 04 h`."""
    minutes, hours = int(seconds // 60), int(seconds // 3600)
    if seconds < 60:
        return f"{int(seconds)} s"
    if hours < 1:
        return f"{minutes} min"
    if hours < 24:
        return f"{hours} h {minutes % 60:02d} min"
    return f"{hours // 24} d {hours % 24:02d} h"


def _claims_table(board: Dashboard) -> Table:
    """The claims that hold their images, oldest first: a killed session's stays until
    `thumb release`."""
    table = Table(title="Claims held (age: since the annotator last worked on the image)",
                  caption="thumb release --annotator NAME frees their untouched claims; "
                          "--image KEY --force frees one they rated part of",
                  box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0))
    for column in ("annotator", "image", "stage", "rated", "age"):
        table.add_column(column, justify="right" if column in ("stage", "rated", "age")
                         else "left", overflow="fold")
    for claim in board.claims:
        table.add_row(for_markup(claim.annotator, newlines=False),
                      for_markup(claim.image, newlines=False), str(claim.stage),
                      str(claim.rated_captions), claim_age(claim.age_seconds))
    return table


def _gold_cell(person: AnnotatorProgress) -> str:
    """Gold captions answered right of those answered, with the share: `3/4 75%`."""
    if not person.gold_answered:
        return "-"
    return (f"{person.gold_correct}/{person.gold_answered} "
            f"{person.gold_correct / person.gold_answered:.0%}")


def _done_open(done: int, going: int) -> str:
    return f"{done}" + (f" +{going}" if going else "")


@app.command("next")
def next_command(annotator: AnnotatorOption = None) -> None:
    """What this annotator can do now, as the commands to run."""
    import shlex

    from storage.rating.dashboard import work_for
    from storage.rating.protocol import is_retired

    name = known_annotator(annotator)
    engine = state.existing_engine
    work = work_for(engine, name)
    if not work:
        with engine.connect() as connection:
            retired = is_retired(connection, name)
        why = " (retired: a retired annotator takes no new image)" if retired else ""
        typer.echo(f"Nothing waits for {printable(name, newlines=False)} now{why}.")
        return
    for item in work:
        typer.echo(f"thumb{state.db_option} {item.command} --annotator {shlex.quote(name)}"
                   f"    # {item.description}")


def _listed(image_keys: list[str]) -> str:
    """Image keys as an indented paragraph of the terminal's width, each shown literally."""
    return textwrap.fill(", ".join(printable(key, newlines=False) for key in image_keys),
                         width=78, initial_indent="  ", subsequent_indent="  ",
                         break_on_hyphens=False)


@app.command("release")
def release_command(
    annotator: Annotated[str, typer.Option(
        "--annotator", help="Whose claims to give up (their untouched images).")],
    image: Annotated[str | None, typer.Option(
        "--image", help="Only this image (its key); default: every untouched claim.")]
    = None,
    force: Annotated[bool, typer.Option(
        "--force", help="With --image: free the claim even though they rated some of the "
                        "image (their ratings of it at that stage move to table "
                        "released_rating, out of every analysis; each logged with its "
                        "values).")] = False,
    by: ActorOption = "",
) -> None:
    """Give up an annotator's claims on images they have rated nothing of (stages 1 and 2).

    A session that was killed keeps the image it had open: it is offered to nobody else
    until its annotator starts the app again. The lead releases such claims here; a
    claim with a rating stays (a rated image stays its annotator's) unless --force frees
    it: the image is then open to others as if they had never rated it, and their ratings
    of it move, every value kept, to table released_rating, which no analysis, queue or
    annotator reads. Each release and each moved rating is logged."""
    import shlex

    from storage.rating.project_queues import release_claims

    name = known_annotator(annotator)
    with value_errors():
        result = release_claims(state.existing_engine, name, actor=by or os_login(),
                                image_key=image, force=force)
    shown = printable(name, newlines=False)
    for kept in result.kept:
        typer.echo(printable(
            f"kept {name}'s claim on {kept.image_key} at stage {kept.stage}: they rated "
            f"{kept.rated} caption(s) of it there"
            + (" and it has been resolved since" if force else
               f"; `thumb{state.db_option} release --annotator {shlex.quote(name)} --image "
               f"{shlex.quote(kept.image_key)} --force` frees it (their ratings of it move "
               "to table released_rating, each logged)"), newlines=False))
    if not result.released:
        if not result.kept:
            typer.echo(f"{shown} holds no claim on an image they have rated nothing of"
                       + (f" ({printable(image, newlines=False)})" if image else "") + ".")
        return
    typer.echo(f"released {len(result.released)} claim(s) of {shown}; open to others again:")
    typer.echo(_listed(result.released))
    if result.set_aside:
        typer.echo(f"{result.set_aside} rating(s) of theirs moved to table released_rating: "
                   "kept there with every value, counted by no analysis (each logged)")


@app.command("assign")
def assign_command(
    double: Annotated[float, typer.Option("--double", help="Share of images (0-1) that get a "
                                                           "second, blind stage-1 rating.")],
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random choice.")] = 0,
    by: ActorOption = "",
) -> None:
    """Choose images for blind double rating (the basis of honest agreement figures)."""
    from storage.rating.project_queues import assign_double

    with value_errors():
        result = assign_double(state.existing_engine, double, seed=seed,
                               actor=by or os_login())
    typer.echo(f"{len(result.added)} image(s) newly marked; {len(result.marked)} image(s) "
               "get two blind stage-1 ratings (marks are never removed)"
               + (":" if result.marked else "."))
    if result.marked:
        typer.echo(_listed(result.marked))
    if result.seen:
        typer.echo(f"{result.seen} image(s) could not be chosen: someone has already seen "
                   "their scores (opened for review or resolution), so they cannot be "
                   "rated blind")
