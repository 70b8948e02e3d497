"""The `thumb` command line."""

from __future__ import annotations

import getpass
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table
from sqlalchemy import Engine

import storage
from storage import EXPORT_FORMATS, InputError, import_captions, open_database

if TYPE_CHECKING:
    from storage.annotation import AnnotationSession
    from storage.models import Stage

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


def _check_ci(value: float) -> float:
    if not 0 < value < 1:
        raise typer.BadParameter("must be between 0 and 1 (0.90 for 90%)")
    return value


CiOption = Annotated[float, typer.Option("--ci", callback=_check_ci,
                                         help="Confidence level of the bootstrap CIs.")]


@contextmanager
def _protocol() -> Iterator[None]:
    """What the THUMB protocol refuses ends the command with its reason, not a traceback."""
    from storage.workflow import ProtocolError

    try:
        yield
    except ProtocolError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


def _stop_if_empty(queue: object, message: str) -> None:
    """Say why there is nothing to do and end, instead of opening an empty screen."""
    if not queue:
        typer.echo(message)
        raise typer.Exit(0)


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


@contextmanager
def _database_for_import() -> Iterator[Engine]:
    """The database to import into, created if need be. A SQLite file that this import
    created is removed again when the input is rejected: a failed import leaves nothing."""
    path = None if "://" in state.db else Path(state.db).expanduser()
    existed = path is None or path.exists()
    engine = state.engine
    try:
        yield engine
    except InputError:
        if path is not None and not existed:
            engine.dispose()
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        raise


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
        with _database_for_import() as engine:
            summary = import_captions(engine, file, actor=by or default_actor())
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
        with _database_for_import() as engine:
            summary = storage.import_thumb(engine, file, references,
                                           actor=by or default_actor(), images_dir=images)
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
    if references_out is not None and fmt != "thumb-jsonl":
        typer.echo(f"error: --references-out is for --format thumb-jsonl; {fmt} writes the "
                   "references in every row", err=True)
        raise typer.Exit(2)
    engine = state.existing_engine
    if fmt == "thumb-jsonl":
        count = storage.export_thumb(engine, out, references_out)
    else:
        count = storage.export_ratings(engine, out, fmt)
    typer.echo(f"wrote {count} rows to {out}")
    from storage.exporter import in_progress_ratings

    if fmt != "thumb-jsonl" and (pending := in_progress_ratings(engine)):
        typer.echo(f"note: {pending} rating(s) in progress (P or R not set yet) are not "
                   "exported")


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
    table.add_row("images for blind double rating", str(status["double_images"]))
    table.add_row("stage-1/2 disagreements unresolved", str(status["unresolved"]))
    table.add_row("captions awaiting the fluency round", str(status["fluency_pending"]))
    console.print(table)


def _image_mode(image_mode: str) -> str:
    """Validate --image-mode and probe the terminal before Textual takes it over."""
    from thumb_tui.widgets.image_view import IMAGE_MODES, image_backend

    if image_mode not in IMAGE_MODES:
        typer.echo(f"error: --image-mode must be one of {', '.join(IMAGE_MODES)}", err=True)
        raise typer.Exit(2)
    if image_mode != "none" and image_backend() is None:
        typer.echo("warning: this terminal could not be probed for images; showing none",
                   err=True)
        return "none"
    return image_mode


def _name(annotator: str) -> str:
    if not annotator.strip():
        typer.echo("error: --annotator needs a name", err=True)
        raise typer.Exit(2)
    return annotator.strip()


ImageModeOption = Annotated[
    str, typer.Option("--image-mode", help="auto, tgp, sixel, halfcell, unicode or none.")
]
NativeOption = Annotated[
    bool | None, typer.Option("--native/--non-native", help="Are you a native English speaker?")
]


def _rating_session(annotator: str, stage: Stage, native: bool | None) -> AnnotationSession:
    """The annotator's session at stage 1 or 2; ends the command with the reason when the
    protocol refuses or there is nothing to rate."""
    from storage.annotation import AnnotationSession
    from thumb_tui.screens.annotate import EMPTY_QUEUE

    with _protocol():
        session = AnnotationSession(state.existing_engine, _name(annotator), stage=stage,
                                    native_english=native)
    _stop_if_empty(session.images, EMPTY_QUEUE[stage])
    return session


@app.command("review")
def review_command(
    annotator: Annotated[str, typer.Option("--annotator", help="Your annotator name.")],
    image_mode: ImageModeOption = "auto",
    native: NativeOption = None,
) -> None:
    """THUMB stage 2: check and modify another annotator's stage-1 scores."""
    from storage.models import Stage
    from thumb_tui.app import ThumbApp
    from thumb_tui.screens.annotate import ReviewScreen

    mode = _image_mode(image_mode)
    session = _rating_session(annotator, Stage.SECOND, native)
    ThumbApp(screen=ReviewScreen(session, mode)).run()


@app.command("resolve")
def resolve_command(
    annotator: Annotated[str, typer.Option("--annotator", help="Your annotator name.")],
    image_mode: ImageModeOption = "auto",
) -> None:
    """Settle captions whose stage-1 and stage-2 values differ, worst first."""
    from storage.annotation import AnnotationSession
    from storage.models import Stage
    from storage.workflow import disagreements
    from thumb_tui.app import ThumbApp
    from thumb_tui.screens.resolve import ResolveScreen

    mode = _image_mode(image_mode)
    engine = state.existing_engine
    name = _name(annotator)
    queue = disagreements(engine, resolver=name)
    _stop_if_empty(queue, "Nothing for you to resolve: no caption's stage-1 and stage-2 "
                          "values differ without a resolution, on an image you neither "
                          "rated nor reviewed.")
    session = AnnotationSession(engine, name, stage=Stage.FINAL)
    ThumbApp(screen=ResolveScreen(session, queue, mode)).run()


@app.command("fluency-round")
def fluency_round_command(
    annotator: Annotated[str, typer.Option("--annotator", help="A native English speaker.")],
) -> None:
    """Check the fluency of captions neither of whose raters was a native speaker."""
    from sqlalchemy import select

    from rubrics import THUMB_1_0
    from storage.models import Annotator
    from storage.workflow import fluency_queue
    from thumb_tui.app import ThumbApp
    from thumb_tui.screens.fluency_round import FluencyRoundScreen

    engine, name = state.existing_engine, _name(annotator)
    with engine.connect() as connection:
        native = connection.execute(select(Annotator.__table__.c.native_english)
                                    .where(Annotator.__table__.c.name == name)).scalar()
    if not native:
        typer.echo(f"error: {name!r} is not recorded as a native English speaker (set it with "
                   "`thumb annotator NAME --native`)", err=True)
        raise typer.Exit(2)
    queue = fluency_queue(engine)
    _stop_if_empty(queue, "No captions are waiting for the fluency round.")
    ThumbApp(screen=FluencyRoundScreen(engine, name, THUMB_1_0, queue)).run()


@app.command("annotator")
def annotator_command(
    name: Annotated[str, typer.Argument(help="Annotator name.")],
    native: NativeOption = None,
) -> None:
    """Add an annotator or record whether they are a native English speaker."""
    from storage.annotation import register_annotator

    with _protocol():
        native_english = register_annotator(state.existing_engine, _name(name), native)
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

    try:
        result = assign_double(state.existing_engine, double, seed=seed,
                               actor=by or default_actor())
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    import textwrap

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


@app.command("annotate")
def annotate_command(
    annotator: Annotated[str, typer.Option("--annotator", help="Your annotator name.")],
    image_mode: ImageModeOption = "auto",
    native: NativeOption = None,
) -> None:
    """Rate captions (THUMB stage 1): one image at a time, all of its captions."""
    from storage.models import Stage
    from thumb_tui.app import ThumbApp

    mode = _image_mode(image_mode)
    session = _rating_session(annotator, Stage.FIRST, native)
    ThumbApp(session, mode).run()


@app.command("agreement")
def agreement_command(
    fmt: Annotated[str, typer.Option("--format", help="table, csv, json or md.")] = "table",
    out: Annotated[Path | None, typer.Option("--out", help="Write to this file.")] = None,
    bootstrap: Annotated[int, typer.Option("--bootstrap", min=0,
                                           help="Bootstrap resamples of images.")] = 1000,
    ci: CiOption = 0.90,
    seed: Annotated[int, typer.Option("--seed")] = 0,
) -> None:
    """Agreement on P, R, "fluency penalty > 0" and Total: Cohen's kappa (plain, linear,
    quadratic), Krippendorff's alpha (ordinal, interval), exact and within-1 agreement,
    change rate, confusion matrices; per pair and overall, with bootstrap CIs."""
    from metrics.agreement import agreement_report
    from thumb_tui.text_output import agreement_text

    if fmt not in ("table", "csv", "json", "md"):
        typer.echo("error: --format must be table, csv, json or md", err=True)
        raise typer.Exit(2)
    report = agreement_report(state.existing_engine, bootstrap=bootstrap, ci=ci, seed=seed)
    if report.empty:
        typer.echo("no pairs of ratings to compare yet (blind double ratings or stage 2)")
        return
    if fmt == "json":
        text = report.to_json(orient="records", indent=1)
    elif fmt == "csv":
        text = report.to_csv(index=False)
    else:
        text = agreement_text(report, markdown=fmt == "md", ci=ci, bootstrap=bootstrap)
    if out is None:
        typer.echo(text)
    else:
        out.write_text(text, encoding="utf-8")
        typer.echo(f"wrote {len(report)} records to {out}")


@app.command("report")
def report_command(
    fmt: Annotated[str, typer.Option("--format", help="md, html or json.")] = "md",
    out: Annotated[Path, typer.Option("--out", help="Folder for the report.")] = Path(
        "reports"),
    exclude_system: Annotated[
        list[str] | None,
        typer.Option("--exclude-system", help="Also report correlations without this "
                                              "system (repeatable; default: Human)."),
    ] = None,
    bootstrap: Annotated[int, typer.Option("--bootstrap", min=0)] = 1000,
    ci: CiOption = 0.90,
    seed: Annotated[int, typer.Option("--seed")] = 0,
) -> None:
    """The THUMB paper's analyses for this project: systems table, strictly best/worst,
    metric-human correlations with Williams tests, BISON-style pairwise accuracy."""
    from metrics.report import build_report, write_report

    try:
        report = build_report(state.existing_engine, exclude_systems=exclude_system,
                              bootstrap=bootstrap, ci=ci, seed=seed)
        path = write_report(report, out, fmt)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"report written to {path}")


bison_app = typer.Typer(help="BISON: binary image selection by annotators and models.",
                        no_args_is_help=True)
app.add_typer(bison_app, name="bison")


@bison_app.command("import")
def bison_import_command(
    file: Annotated[Path, typer.Argument(help="COCO-BISON .json, or our .csv/.jsonl.")],
    captions: Annotated[Path | None, typer.Option(
        "--captions", help="COCO captions file (needed for COCO-BISON).")] = None,
    images: Annotated[Path | None, typer.Option(
        "--images", help="Folder with the COCO images.")] = None,
    by: ActorOption = "",
) -> None:
    """Import BISON items (all or nothing)."""
    from storage.bison import import_bison

    try:
        with _database_for_import() as engine:
            added = import_bison(engine, file, actor=by or default_actor(),
                                 captions=captions, images_dir=images)
    except InputError as exc:
        _fail_on_input_error(exc)
    typer.echo(f"{file}: {added} BISON item{'' if added == 1 else 's'} imported")


@bison_app.command("annotate")
def bison_annotate_command(
    annotator: Annotated[str, typer.Option("--annotator", help="Your annotator name.")],
    image_mode: ImageModeOption = "auto",
) -> None:
    """Answer BISON items: which of the two images does the caption describe?"""
    from storage.bison import BisonSession
    from thumb_tui.app import ThumbApp
    from thumb_tui.screens.bison import BisonScreen

    mode = _image_mode(image_mode)
    session = BisonSession(state.existing_engine, _name(annotator))
    _stop_if_empty(session.item_ids, "No BISON items: import some with `thumb bison import "
                                     "FILE`.")
    ThumbApp(screen=BisonScreen(session, mode)).run()


@bison_app.command("evaluate")
def bison_evaluate_command(
    scorer: Annotated[str, typer.Option("--scorer", help="clip, or a caption metric for the "
                                                         "BISON baseline (bleu, cider-d, …).")]
    = "clip",
    model: Annotated[str, typer.Option("--model", help="CLIP model name or local folder.")]
    = "openai/clip-vit-base-patch32",
    device: Annotated[str, typer.Option("--device")] = "auto",
    batch_size: Annotated[int, typer.Option("--batch-size", min=1)] = 64,
    seed: Annotated[int, typer.Option("--seed", help="Baseline: reference sampling.")] = 0,
) -> None:
    """Let a model (or a caption-metric baseline) choose an image for every item."""
    from metrics.bison import ClipScorer, baseline, evaluate
    from metrics.registry import BUILDERS, MetricOptions

    engine = state.existing_engine
    try:
        if scorer == "clip":
            signature, count = evaluate(engine, ClipScorer(model, device, batch_size))
        elif scorer in BUILDERS:
            signature, count = baseline(engine, scorer, seed=seed, options=MetricOptions(
                device=device, batch_size=batch_size))
        else:
            raise ValueError(f"unknown scorer {scorer!r}: clip or one of {', '.join(BUILDERS)}")
    except (ValueError, RuntimeError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"{count} items scored\n  {signature}")


@bison_app.command("report")
def bison_report_command(
    fmt: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
    bootstrap: Annotated[int, typer.Option("--bootstrap", min=0)] = 1000,
    ci: CiOption = 0.90,
    seed: Annotated[int, typer.Option("--seed")] = 0,
) -> None:
    """Human accuracy, model and baseline accuracy, human-model agreement."""
    import json

    from metrics.bison import bison_report
    from thumb_tui.text_output import bison_text

    tables = bison_report(state.existing_engine, bootstrap=bootstrap, ci=ci, seed=seed)
    if fmt == "json":
        typer.echo(json.dumps({k: json.loads(v.to_json(orient="records"))
                               for k, v in tables.items()}, indent=1))
        return
    typer.echo(bison_text(tables))


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
