"""Project commands: import, export, status, annotators and the double-rating assignment."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

import storage
from rubrics import for_markup
from storage import EXPORT_FORMATS, import_captions
from thumb_tui.cli.common import (
    ActorOption,
    NativeOption,
    OutsideImagesOption,
    annotator_name,
    console,
    database_for_import,
    default_actor,
    fail,
    output_file,
    protocol_refusals,
    state,
    value_errors,
)

app = typer.Typer()


@app.command("import")
def import_command(
    file: Annotated[Path, typer.Argument(help="CSV or JSONL of captions (and ratings).")],
    allow_outside_images: OutsideImagesOption = False,
    by: ActorOption = "",
) -> None:
    """Import captions, references and optional ratings (all or nothing)."""
    with database_for_import() as engine:
        summary = import_captions(engine, file, actor=by or default_actor(),
                                  allow_outside_images=allow_outside_images)
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
                                       actor=by or default_actor(), images_dir=images,
                                       allow_outside_images=allow_outside_images)
    typer.echo(str(summary))


@app.command("export")
def export_command(
    out: Annotated[Path, typer.Option("--out", help="Output file.")],
    fmt: Annotated[
        str, typer.Option("--format", help=f"One of: {', '.join(EXPORT_FORMATS)}.")
    ] = "csv",
    references_out: Annotated[
        Path | None,
        typer.Option("--references-out", help="With thumb-jsonl: also write the references."),
    ] = None,
) -> None:
    """Export captions, references and ratings (thumb-jsonl: final scores, release format)."""
    if fmt not in EXPORT_FORMATS:
        fail(f"unknown format {fmt!r}; expected one of {', '.join(EXPORT_FORMATS)}")
    if references_out is not None and fmt != "thumb-jsonl":
        fail(f"--references-out is for --format thumb-jsonl; {fmt} writes the references in "
             "every row")
    output_file(out)
    output_file(references_out, "--references-out")
    engine = state.existing_engine
    signatures = None
    if fmt == "thumb-jsonl":
        count = storage.export_thumb(engine, out, references_out)
    else:
        from reports.exports import export_project

        count, signatures = export_project(engine, out, fmt)
    typer.echo(f"wrote {count} rows to {out}"
               + (f" (metric signatures in {signatures})" if signatures else ""))
    from storage.exporter import in_progress_ratings

    if fmt != "thumb-jsonl" and (pending := in_progress_ratings(engine)):
        typer.echo(f"note: {pending} rating(s) in progress (P or R not set yet) are not "
                   "exported")


@app.command("status")
def status_command() -> None:
    """Images, captions, systems, annotators, ratings per stage and progress."""
    status = storage.project_status(state.existing_engine)
    table = Table(title=f"thumb-tui project: {for_markup(state.db, newlines=False)}",
                  show_header=False)
    table.add_column("what")
    table.add_column("count", justify="right")
    for key in ("images", "captions", "references", "annotators"):
        table.add_row(key, str(status[key]))
    for system, count in status["systems"].items():
        table.add_row(f"  captions by {for_markup(system, newlines=False)}", str(count))
    for stage, (total, complete) in status["ratings_per_stage"].items():
        table.add_row(f"ratings at stage {stage}", f"{complete} complete ({total} started)")
    captions, images = status["captions"] or 1, status["images"] or 1
    table.add_row(
        "captions with a complete rating",
        f"{status['rated_captions']} ({100 * status['rated_captions'] / captions:.0f}%)",
    )
    table.add_row(
        "images with every caption rated",
        f"{status['complete_images']} ({100 * status['complete_images'] / images:.0f}%)",
    )
    table.add_row("images for blind double rating", str(status["double_images"]))
    table.add_row("stage-1/2 disagreements unresolved", str(status["unresolved"]))
    table.add_row("captions awaiting the fluency round", str(status["fluency_pending"]))
    broken = status["broken_images"]
    table.add_row("images flagged as broken", str(len({b.key for b in broken})))
    for item in broken:
        table.add_row(f"  {for_markup(item.key, newlines=False)}: "
                      f"{for_markup(item.reason, newlines=False)} "
                      f"({for_markup(item.annotator, newlines=False)})", "")
    console.print(table)


@app.command("annotator")
def annotator_command(
    name: Annotated[str, typer.Argument(help="Annotator name.")],
    native: NativeOption = None,
) -> None:
    """Add an annotator or record whether they are a native English speaker."""
    from storage.annotation import register_annotator

    with protocol_refusals():
        native_english = register_annotator(state.existing_engine, annotator_name(name),
                                            native)
    word = {True: "a native", False: "not a native", None: "unknown as a"}[native_english]
    typer.echo(f"{name}: {word} English speaker")


@app.command("assign")
def assign_command(
    double: Annotated[float, typer.Option("--double", help="Share of images (0-1) that get a "
                                                           "second, blind stage-1 rating.")],
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random choice.")] = 0,
    by: ActorOption = "",
) -> None:
    """Choose images for blind double rating (the basis of honest agreement figures)."""
    from storage.workflow import assign_double

    with value_errors():
        result = assign_double(state.existing_engine, double, seed=seed,
                               actor=by or default_actor())
    typer.echo(f"{len(result.added)} image(s) newly marked; {len(result.marked)} image(s) "
               "get two blind stage-1 ratings (marks are never removed)"
               + (":" if result.marked else "."))
    if result.marked:
        typer.echo(textwrap.fill(", ".join(result.marked), width=78, initial_indent="  ",
                                 subsequent_indent="  ", break_on_hyphens=False))
    if result.seen:
        typer.echo(f"{result.seen} image(s) could not be chosen: someone has already seen "
                   "their scores (opened for review or resolution), so they cannot be "
                   "rated blind")
