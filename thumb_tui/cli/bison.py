"""`thumb bison …`: binary image selection by annotators, models and caption metrics."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Annotated

import typer

from rubrics import printable
from storage.events import os_login
from thumb_tui.cli.analysis import with_metric_options
from thumb_tui.cli.common import (
    ActorOption,
    AllowDownloadOption,
    AnnotatorOption,
    CiOption,
    ImageModeOption,
    ItemsBootstrapOption,
    OutsideImagesOption,
    SeedOption,
    check_format,
    database_for_import,
    image_mode,
    known_annotator,
    model_hub,
    run_app,
    state,
    stop_if_empty,
    value_errors,
)

REPORT_FORMATS = ("table", "json")  # `bison report`'s: its help, check and error message

app = typer.Typer(help="BISON: binary image selection by annotators and models.",
                  no_args_is_help=True)


@app.command("import")
def bison_import_command(
    file: Annotated[Path, typer.Argument(help="COCO-BISON .json, or our .csv/.jsonl.")],
    captions: Annotated[Path | None, typer.Option(
        "--captions", help="COCO captions file (needed for COCO-BISON).")] = None,
    images: Annotated[Path | None, typer.Option(
        "--images", help="Folder with the COCO images.")] = None,
    allow_outside_images: OutsideImagesOption = False,
    by: ActorOption = "",
) -> None:
    """Import BISON items (all or nothing)."""
    from storage.bison import import_bison

    with database_for_import() as engine:
        added = import_bison(engine, file, actor=by or os_login(),
                             captions=captions, images_dir=images,
                             allow_outside_images=allow_outside_images)
    typer.echo(f"{file}: {added} BISON item{'' if added == 1 else 's'} imported")


@app.command("annotate")
def bison_annotate_command(
    annotator: AnnotatorOption = None,
    image_mode_name: ImageModeOption = "auto",
) -> None:
    """Answer BISON items: which of the two images does the caption describe?"""
    from storage.bison import BisonSession
    from thumb_tui.app import ThumbApp
    from thumb_tui.screens.bison import BisonScreen

    mode = image_mode(image_mode_name)
    session = BisonSession(state.existing_engine, known_annotator(annotator))
    stop_if_empty(session.item_ids, "No BISON items: import some with `thumb bison import "
                                    "FILE`.")
    run_app(ThumbApp(screen=BisonScreen(session, mode)))


def bison_evaluate_command(scorer: str = "clip", seed: int = 0, allow_download: bool = False,
                           **metric_settings: object) -> None:
    model_hub(allow_download)
    from metrics.registry import MetricOptions, metric_classes
    from metrics.retrieval.bison import ClipScorer
    from reports.bison import baseline, evaluate

    engine = state.existing_engine
    with value_errors():
        options = MetricOptions(**metric_settings)
        if scorer == "clip":
            signature, count = evaluate(engine, ClipScorer(
                options.clip_model, options.device, options.batch_size))  # type: ignore[arg-type]
        elif scorer in metric_classes():
            signature, count = baseline(engine, scorer, seed=seed, options=options)
        else:
            raise ValueError(f"unknown scorer {scorer!r}: clip or one of "
                             f"{', '.join(metric_classes())}")
    typer.echo(f"{count} items scored\n  {signature}")


def _register_evaluate() -> None:
    """`thumb bison evaluate` with the options every metric declares, as `thumb metrics
    compute` has them: a baseline's metric (BERTScore's model and layer, CLIP-S's model, …)
    is chosen as it is there, and `--scorer clip` takes `--clip-model` like the others."""
    fixed = [
        inspect.Parameter("scorer", inspect.Parameter.KEYWORD_ONLY, default="clip",
                          annotation=Annotated[str, typer.Option(
                              "--scorer", help="clip (the CLIP model of --clip-model), or a "
                                               "caption metric for the BISON baseline (bleu, "
                                               "cider-d, bertscore, …).")]),
        inspect.Parameter("seed", inspect.Parameter.KEYWORD_ONLY, default=0,
                          annotation=Annotated[int, typer.Option(
                              "--seed", help="Baseline: reference sampling.")]),
        inspect.Parameter("allow_download", inspect.Parameter.KEYWORD_ONLY, default=False,
                          annotation=AllowDownloadOption),
    ]
    app.command("evaluate")(with_metric_options(
        bison_evaluate_command, fixed,
        "Let a model (or a caption-metric baseline) choose an image for every item."))


_register_evaluate()


@app.command("report")
def bison_report_command(
    fmt: Annotated[str, typer.Option("--format", help=" or ".join(REPORT_FORMATS) + ".")
                   ] = "table",
    bootstrap: ItemsBootstrapOption = 1000,
    ci: CiOption = 0.90,
    seed: SeedOption = 0,
) -> None:
    """Human accuracy, model and baseline accuracy, human-model agreement."""
    check_format(fmt, REPORT_FORMATS)
    from reports.bison import bison_header, bison_json, bison_report
    from reports.thumb.text import bison_text

    tables = bison_report(state.existing_engine, bootstrap=bootstrap, ci=ci, seed=seed)
    header = bison_header(bootstrap=bootstrap, ci=ci, seed=seed)
    if fmt == "json":
        typer.echo(json.dumps(bison_json(tables, header), indent=1))
        return
    typer.echo(printable(bison_text(tables, header)))
