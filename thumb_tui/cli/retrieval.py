"""`thumb retrieval …`: score image-text retrieval models on many-to-many positives."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rubrics.escape import for_markup
from storage.errors import InputError
from storage.events import os_login
from thumb_tui.cli.common import (
    ActorOption,
    BootstrapOption,
    QueriesBootstrapOption,
    SeedOption,
    check_format,
    fail,
    progress_bar,
    state,
    value_errors,
    warnings_as_notes,
)
from thumb_tui.cli.outputs import ForceOption, Outputs, output_file, write_or_echo, written

app = typer.Typer(help="Image-text retrieval: R@K, R-Precision, mAP@R, PMRP, NCS, SR.",
                  no_args_is_help=True)

FORMATS = ("table", "md", "json")


def _integers(text: str, option: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        fail(f"{option} takes comma-separated integers, not {text!r}")
    if not values or min(values) < 0:
        fail(f"{option} takes comma-separated non-negative integers, not {text!r}")
    return values


@app.command("evaluate")
def evaluate_command(
    name: Annotated[str, typer.Option("--name", help="The model's name.")],
    i2t: Annotated[Path | None, typer.Option(
        "--i2t",
        help=for_markup("Image→caption ranked lists: JSON {image id: [caption ids…]}.")
    )] = None,
    t2i: Annotated[Path | None, typer.Option(
        "--t2i",
        help=for_markup("Caption→image ranked lists: JSON {caption id: [image ids…]}.")
    )] = None,
    scores: Annotated[Path | None, typer.Option(
        "--scores", help="Similarity matrix: .npz (scores, image_ids, caption_ids) or "
                         ".parquet (image_id, caption_id, score).")] = None,
    positives: Annotated[list[str] | None, typer.Option(
        "--positives", help="eccv, cxc, coco-5k, coco-1k, project or a DIR in the "
                            "eccv-caption layout (repeat for several).")] = None,
    pm: Annotated[Path | None, typer.Option(
        "--pm", help="DIR with pm_image_to_caption.json and pm_caption_to_image.json.")]
    = None,
    pm_from: Annotated[Path | None, typer.Option(
        "--pm-from", help="COCO instances JSON: plausible matches from 80-class vectors.")]
    = None,
    zeta: Annotated[str, typer.Option("--zeta", help="ζ values for --pm-from.")] = "0,1,2",
    pmrp_cap: Annotated[str, typer.Option(
        "--pmrp-cap", help="R = min(R, cap) for PMRP, or 'none'.")] = "50",
    relevance: Annotated[list[Path] | None, typer.Option(
        "--relevance", help="Relevance matrix from `thumb retrieval relevance` (NCS, SR).")]
    = None,
    ks: Annotated[str, typer.Option("--k", help="Cut-offs for R@K, NCS@K, SR@K.")] = "1,5,10",
    sr_m: Annotated[str, typer.Option("--sr-m", help="SR's m: the m most relevant items "
                                                     "count as relevant.")] = "1,2,3",
    ncs_averaging: Annotated[str, typer.Option(
        "--ncs-averaging",
        help="How NCS@K is averaged over queries: authors (the default; as the authors' "
             "public code computes the paper's tables: each query's mean φ(top-K) / "
             "(mean φ(ideal top-K) + 1e-10), averaged over every query, so a query whose "
             "ideal top-K is all 0 counts 0), eq5 (the paper's Eq. 5 as printed: each "
             "query's ratio, averaged; queries whose ideal top-K is all 0 are left out "
             "of the mean and of n; per-query is its earlier name) or ratio (Σ over "
             "queries of Σ φ(top-K) / Σ over queries of Σ φ(ideal top-K), the authors' "
             "earlier, commented-out line). The signature records it.")] = "authors",
    bootstrap: QueriesBootstrapOption = 1000,
    ci: Annotated[float, typer.Option("--ci", help="Confidence level of the CIs.")] = 0.95,
    seed: SeedOption = 0,
    output: Annotated[str, typer.Option("--format", help="table, md or json.")] = "table",
    out: Annotated[Path | None, typer.Option("--out", help="Write to this file.")] = None,
    replace: Annotated[bool, typer.Option(
        "--replace", help="Re-evaluate a stored model from other files.")] = False,
    by: ActorOption = "",
    force: ForceOption = False,
) -> None:
    """Evaluate a model on positive sets (stored results are reused)."""
    from metrics.retrieval.evaluation import ncs_averaging_name
    from reports.retrieval import (
        ModelFiles,
        Settings,
        evaluate_model,
        resolve_plausible,
        resolve_positives,
        resolve_relevance,
    )

    check_format(output, FORMATS)
    if not name.strip():
        fail("--name needs a model name")
    output_file(out, force=force, fmt=output)
    if scores is not None and (i2t or t2i):
        fail("give either --i2t and --t2i, or --scores")
    if scores is None and not (i2t and t2i):
        fail("give --i2t and --t2i (ranked lists), or --scores (a similarity matrix)")
    from metrics.untrusted import regular_file

    for path in (i2t, t2i, scores):
        if path is not None:
            try:
                regular_file(path)  # a FIFO would block the read (and the hashing) forever
            except ValueError as error:
                fail(str(error))
    cutoffs, ms = _integers(ks, "--k"), _integers(sr_m, "--sr-m")
    if min(cutoffs) < 1 or min(ms) < 1:
        fail("--k and --sr-m take positive integers")
    cap = None if pmrp_cap.strip().lower() == "none" else _integers(pmrp_cap, "--pmrp-cap")[0]
    if cap == 0:
        fail("--pmrp-cap must be positive or 'none'")
    if not 0 < ci < 1:
        fail("--ci must be between 0 and 1 (0.95 for 95%)")
    try:
        ncs_averaging = ncs_averaging_name(ncs_averaging)
    except ValueError as error:
        fail(f"--ncs-averaging: {error}")
    if not (positives or pm or pm_from or relevance):
        fail("nothing to evaluate against: give --positives (eccv, cxc, coco-5k, coco-1k, "
             "project or DIR), --pm, --pm-from or --relevance")
    engine = state.engine
    settings = Settings(ks=cutoffs, ms=ms, pmrp_cap=cap, bootstrap=bootstrap, ci=ci,
                        seed=seed, ncs_averaging=ncs_averaging)
    try:
        targets = resolve_positives(engine, positives or [])
        zetas = _integers(zeta, "--zeta") if pm_from is not None else ()
        targets += resolve_plausible(pm, pm_from, zetas, targets)
        targets += resolve_relevance(relevance or [])
        records, computed = evaluate_model(
            engine, name.strip(), ModelFiles(i2t, t2i, scores), targets, settings,
            actor=by or os_login(), replace=replace)
    except ValueError as error:  # PositivesError, RankingsError, RelevanceError, …
        fail(str(error))
    from reports.retrieval_text import json_text, results_markdown, results_table

    if output == "json":
        write_or_echo(json_text(records), out, "the results", force=force)
    elif output == "md":
        write_or_echo(results_markdown(records, ci=ci), out, "the results", force=force)
    else:
        with written(out, force=force) as path:
            results_table(records, ci=ci, out=path)
    if output != "json" or out is not None:
        reused = len(targets) - computed
        typer.echo(f"{name.strip()}: {computed} set(s) computed, {reused} read back "
                   "from the database", err=True)


@app.command("relevance")
def relevance_command(
    metric: Annotated[str, typer.Option("--metric", help="cider-d or spice-approx.")]
    = "cider-d",
    out: Annotated[Path | None, typer.Option(
        "--out", help="The .npz to write (default: relevance-METRIC.npz).")] = None,
    tokenizer: Annotated[str, typer.Option("--tokenizer", help="auto, ptb-java or ptb-python.")]
    = "auto",
    force: ForceOption = False,
) -> None:
    """Build the project's semantic-relevance matrix (every caption vs every image). A
    matrix file with the same signature is kept; one with another is replaced only with
    --force."""
    from metrics.retrieval.relevance import RELEVANCE_METRICS
    from reports.retrieval import project_relevance

    if metric not in RELEVANCE_METRICS:
        fail(f"--metric must be one of {', '.join(RELEVANCE_METRICS)}")
    target = out or Path(f"relevance-{metric}.npz")
    output_file(target, may_exist=True)  # kept or replaced: project_relevance decides
    with value_errors(), progress_bar() as progress, Outputs(force) as files:
        task = progress.add_task("scoring captions against every image", total=None)
        temporary = files.file(target, may_exist=True)
        matrix, built = project_relevance(
            state.existing_engine, metric, target, tokenizer=tokenizer,
            progress=lambda done, total: progress.update(task, completed=done, total=total),
            replace=force, write_to=temporary)
        if not built:
            files.drop(temporary)
    verb = "wrote" if built else "kept (same signature)"
    typer.echo(f"{verb} {target}: {len(matrix.images)} images x {len(matrix.captions)} "
               f"captions\n{matrix.signature}")


@app.command("compare")
def compare_command(
    positives: Annotated[list[str] | None, typer.Option(
        "--positives", help="Only these positive sets (default: all stored).")] = None,
    direction: Annotated[str, typer.Option("--direction", help="i2t, t2i or mean.")]
    = "mean",
    output: Annotated[str, typer.Option("--format", help="table, md, json or latex.")
                      ] = "table",
    out: Annotated[Path | None, typer.Option("--out", help="Write to this file.")] = None,
    plot: Annotated[Path | None, typer.Option(
        "--plot", help="Also draw the metric-by-metric τ heat map (.png/.svg).")] = None,
    force: ForceOption = False,
) -> None:
    """Rank the evaluated models under every metric, with Kendall τ-b between metrics (an
    undefined τ, where a metric ties every model, shows as —; so does a model not scored
    under a metric). Only results computed on the same version of a set are ranked
    together: when a set's contents changed between evaluations (new captions in the
    project, an edited positives folder, a rebuilt relevance matrix), or its PMRP cap or
    the thumb-tui version differ, each version gets its own rows, labelled with what tells
    them apart (`project (content:5472d2f8aa) recall@1`), and a note says which models
    were scored on which; a version scored for one model only is not ranked."""
    from reports.numbers import json_records
    from reports.retrieval import comparison
    from reports.retrieval_text import (
        comparison_markdown,
        comparison_table,
        draw_tau,
        json_text,
        tau_warning,
        unranked_note,
        versions_note,
    )

    check_format(output, (*FORMATS, "latex"))
    if direction not in ("i2t", "t2i", "mean"):
        fail("--direction must be i2t, t2i or mean")
    output_file(out, force=force, fmt=output)
    output_file(plot, "--plot", force=force)
    with value_errors():
        compared = comparison(state.existing_engine, positives, direction)
    ranks, tau = compared.ranks, compared.tau
    for note in (versions_note(compared.versions), unranked_note(compared.unranked),
                 tau_warning(ranks)):
        if note is not None:
            typer.echo(note, err=True)
    if output == "json":
        payload = {"ranks": json_records(ranks),
                   "kendall_tau_b": json_records(tau.reset_index(names="metric")),
                   "versions": {name: [{"label": label, "models": models}
                                       for label, models in versioned]
                                for name, versioned in compared.versions.items()},
                   "unranked": [{"metric": metric, "model": model}
                                for metric, model in compared.unranked.items()]}
        write_or_echo(json_text(payload), out, "the comparison", force=force)
    elif output == "md":
        write_or_echo(comparison_markdown(ranks, tau), out, "the comparison", force=force)
    elif output == "latex":
        from reports.thumb.latex import comparison_document

        write_or_echo(comparison_document(ranks, tau), out, "the comparison", force=force)
    else:
        with written(out, force=force) as path:
            comparison_table(ranks, tau, out=path)
    if plot is not None:
        with value_errors(), warnings_as_notes(), written(plot, force=force,
                                                          option="--plot") as path:
            draw_tau(tau, path)
        typer.echo(f"wrote the τ heat map to {plot}", err=True)


@app.command("agreement")
def agreement_command(
    judgments: Annotated[Path, typer.Option(
        "--judgments", help="CSV of graded pairs: image_id, caption_id, grade (one "
                            "grade per pair).")],
    positives: Annotated[list[str] | None, typer.Option(
        "--positives", help="Binary relevance from these sets (repeat).")] = None,
    relevance: Annotated[list[Path] | None, typer.Option(
        "--relevance", help="Graded relevance from these matrices (repeat).")] = None,
    bootstrap: BootstrapOption = 1000,
    ci: Annotated[float, typer.Option("--ci", help="Confidence level of the CIs.")] = 0.95,
    seed: SeedOption = 0,
    output: Annotated[str, typer.Option("--format", help="table, md or json.")] = "table",
    out: Annotated[Path | None, typer.Option("--out", help="Write to this file.")] = None,
    force: ForceOption = False,
) -> None:
    """Correlate binary and graded relevance with human grades (NCS paper, Table 1). The
    judgments give one grade per pair (average several raters' first), and every image and
    caption must be known to every set and matrix compared; every problem of the file is
    listed, each at its line, and nothing is computed while there is one."""
    from metrics.retrieval.positives import PositivesError
    from metrics.retrieval.relevance import RelevanceError
    from reports.numbers import json_records
    from reports.retrieval import (
        read_judgments,
        relevance_agreement,
        resolve_positives,
        resolve_relevance,
    )
    from reports.retrieval_text import agreement_markdown, agreement_table, json_text

    check_format(output, FORMATS)
    if not (positives or relevance):
        fail("give --positives (binary relevance) and/or --relevance (graded relevance)")
    if not 0 < ci < 1:
        fail("--ci must be between 0 and 1 (0.95 for 95%)")
    output_file(out, force=force, fmt=output)
    engine = state.engine if positives else None
    try:
        targets = resolve_positives(engine, positives or []) + resolve_relevance(relevance
                                                                                 or [])
        table = relevance_agreement(read_judgments(judgments, targets), targets,
                                    bootstrap=bootstrap, ci=ci, seed=seed)
    except InputError as refused:
        fail(f"the judgments were refused; nothing was computed.\n{refused}")
    except (PositivesError, RelevanceError, ValueError) as error:
        fail(str(error))
    if output == "json":
        write_or_echo(json_text(json_records(table)), out, "the agreement", force=force)
    elif output == "md":
        write_or_echo(agreement_markdown(table, ci), out, "the agreement", force=force)
    else:
        with written(out, force=force) as path:
            agreement_table(table, ci, out=path)
