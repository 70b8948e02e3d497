"""The `thumb` command line."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from sqlalchemy import Engine

import storage
from storage import EXPORT_FORMATS, InputError, import_captions, open_database

app = typer.Typer(
    help="Rate image captions with the THUMB 1.0 rubric and analyse the ratings.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console()


class State:
    db: str = "thumb.db"

    @property
    def engine(self) -> Engine:
        """The database; commands that only read or rate need it to exist already."""
        return open_database(self.db)

    @property
    def existing_engine(self) -> Engine:
        if "://" not in self.db and not Path(self.db).expanduser().is_file():
            typer.echo(f"error: no database at {self.db}; create one with `thumb --db "
                       f"{self.db} import FILE`", err=True)
            raise typer.Exit(2)
        return self.engine


state = State()

ActorOption = Annotated[
    str, typer.Option("--by", help="Who makes the change (recorded in the event log).")
]


def default_actor() -> str:
    try:
        return getpass.getuser()
    except OSError:
        return "unknown"


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


def _fail_on_input_error(exc: InputError) -> None:
    typer.echo("error: input rejected; the database is unchanged.", err=True)
    typer.echo(str(exc), err=True)
    raise typer.Exit(2)


@app.command("import")
def import_command(
    file: Annotated[Path, typer.Argument(help="CSV or JSONL of captions (and ratings).")],
    by: ActorOption = "",
) -> None:
    """Import captions, references and optional ratings (all or nothing)."""
    try:
        summary = import_captions(state.engine, file, actor=by or default_actor())
    except InputError as exc:
        _fail_on_input_error(exc)
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
    by: ActorOption = "",
) -> None:
    """Import the public THUMB 1.0 release; its scores become annotator `thumb-1.0`, final."""
    try:
        summary = storage.import_thumb(
            state.engine, file, references, actor=by or default_actor(), images_dir=images
        )
    except InputError as exc:
        _fail_on_input_error(exc)
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
        typer.echo(f"error: unknown format {fmt!r}; expected one of {', '.join(EXPORT_FORMATS)}",
                   err=True)
        raise typer.Exit(2)
    if fmt == "thumb-jsonl":
        count = storage.export_thumb(state.existing_engine, out, references_out)
    else:
        count = storage.export_ratings(state.existing_engine, out, fmt)
    typer.echo(f"wrote {count} rows to {out}")


@app.command("status")
def status_command() -> None:
    """Images, captions, systems, annotators, ratings per stage and progress."""
    status = storage.project_status(state.existing_engine)
    table = Table(title=f"thumb-tui project: {state.db}", show_header=False)
    table.add_column("what")
    table.add_column("count", justify="right")
    for key in ("images", "captions", "references", "annotators"):
        table.add_row(key, str(status[key]))
    for system, count in status["systems"].items():
        table.add_row(f"  captions by {system}", str(count))
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
    console.print(table)


@app.command("annotate")
def annotate_command(
    annotator: Annotated[str, typer.Option("--annotator", help="Your annotator name.")],
    image_mode: Annotated[
        str,
        typer.Option("--image-mode", help="auto, tgp, sixel, halfcell, unicode or none."),
    ] = "auto",
    native: Annotated[
        bool | None,
        typer.Option("--native/--non-native", help="Are you a native English speaker?"),
    ] = None,
) -> None:
    """Rate captions (THUMB stage 1): one image at a time, all of its captions."""
    from storage.annotation import AnnotationSession
    from thumb_tui.app import ThumbApp
    from thumb_tui.widgets.image_view import IMAGE_MODES, image_backend

    if image_mode not in IMAGE_MODES:
        typer.echo(f"error: --image-mode must be one of {', '.join(IMAGE_MODES)}", err=True)
        raise typer.Exit(2)
    if image_mode != "none" and image_backend() is None:
        typer.echo("warning: this terminal could not be probed for images; showing none",
                   err=True)
        image_mode = "none"
    if not annotator.strip():
        typer.echo("error: --annotator needs a name", err=True)
        raise typer.Exit(2)
    session = AnnotationSession(state.existing_engine, annotator.strip(),
                                native_english=native)
    ThumbApp(session, image_mode).run()


metrics_app = typer.Typer(help="Automatic metrics: compute and list stored scores.",
                          no_args_is_help=True)
app.add_typer(metrics_app, name="metrics")


@metrics_app.command("compute")
def metrics_compute_command(
    metric: Annotated[
        list[str] | None,
        typer.Option("--metric", help="Metric to compute (repeatable); default: all text "
                                      "metrics."),
    ] = None,
    device: Annotated[str, typer.Option("--device", help="auto, cpu or cuda.")] = "auto",
    batch_size: Annotated[int, typer.Option("--batch-size", min=1)] = 64,
    cider_corpus: Annotated[
        str, typer.Option("--cider-corpus", help="per-system (THUMB) or pooled.")
    ] = "per-system",
    tokenizer: Annotated[
        str, typer.Option("--tokenizer", help="auto, ptb-java or ptb-python (CIDEr-D).")
    ] = "auto",
    keep_self_references: Annotated[
        bool,
        typer.Option("--keep-self-references",
                     help="Score a caption also against a reference identical to it (as the "
                          "THUMB 1.0 paper's numbers were computed); the signature says so."),
    ] = False,
    bert_model: Annotated[
        str, typer.Option("--bert-model", help="BERTScore model name or local folder.")
    ] = "roberta-large",
    bert_layer: Annotated[
        int | None, typer.Option("--bert-layer", help="Layer (default 17 for roberta-large).")
    ] = None,
    bert_idf: Annotated[bool, typer.Option("--bert-idf", help="idf weighting.")] = False,
    bert_rescale: Annotated[
        bool, typer.Option("--bert-rescale", help="Rescale with the baseline.")
    ] = False,
    bert_baseline: Annotated[
        str | None, typer.Option("--bert-baseline", help="Baseline file for a local model.")
    ] = None,
    clip_model: Annotated[
        str, typer.Option("--clip-model", help="CLIP model name or local folder.")
    ] = "openai/clip-vit-base-patch32",
) -> None:
    """Score every caption; scores already stored with the same signature are reused.
    Metrics: bleu, rouge-l, cider-d, bertscore, clip-s, refclip-s, refonly-c, spice,
    spice-approx."""
    from rich.progress import Progress

    from metrics.engine import compute_metrics
    from metrics.registry import DEFAULT_METRICS, MetricOptions

    options = MetricOptions(
        device=device, batch_size=batch_size, cider_corpus=cider_corpus, tokenizer=tokenizer,
        keep_self_references=keep_self_references, bert_model=bert_model,
        bert_layer=bert_layer, bert_idf=bert_idf, bert_rescale=bert_rescale,
        bert_baseline=bert_baseline, clip_model=clip_model,
    )
    with Progress(console=console, transient=True) as bar:
        tasks: dict[str, int] = {}

        def report(name: str, done: int, total: int) -> None:
            if name not in tasks:
                tasks[name] = bar.add_task(name, total=total)
            bar.update(tasks[name], completed=done)

        try:
            runs = compute_metrics(state.existing_engine, metric or list(DEFAULT_METRICS), options,
                                   progress=report)
        except (ValueError, RuntimeError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
    for run in runs:
        typer.echo(f"{run.metric}: computed {run.computed}, reused {run.reused} "
                   f"({run.seconds:.1f} s)\n  {run.signature}")


@metrics_app.command("list")
def metrics_list_command() -> None:
    """Stored metric scores: one line per signature with count and mean."""
    from sqlalchemy import func, select

    from storage.models import MetricScore

    table = MetricScore.__table__
    with state.existing_engine.connect() as connection:
        rows = connection.execute(
            select(table.c.signature, func.count(), func.avg(table.c.value))
            .group_by(table.c.signature).order_by(table.c.signature)
        ).all()
    if not rows:
        typer.echo("no metric scores stored yet: run `thumb metrics compute`")
    for signature, count, mean in rows:
        typer.echo(f"{count:>7} captions  mean {mean:9.4f}  {signature}")


if __name__ == "__main__":
    app()
