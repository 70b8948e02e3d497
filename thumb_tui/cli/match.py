"""`thumb match …`: image-caption match verification with machines in the loop (ECCV
Caption): models propose, humans verify on four points, verified pairs become positives."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rubrics import printable
from storage.events import os_login
from thumb_tui.cli.common import (
    ActorOption,
    AllowDownloadOption,
    AnnotatorOption,
    CiOption,
    ImageModeOption,
    PairsBootstrapOption,
    SeedOption,
    check_format,
    fail,
    image_mode,
    known_annotator,
    model_hub,
    protocol_refusals,
    run_app,
    state,
)
from thumb_tui.cli.outputs import (
    ForceOption,
    Outputs,
    RawOption,
    output_file,
    output_folder,
    write_or_echo,
)

if TYPE_CHECKING:
    from storage.match import PositiveCounts

app = typer.Typer(help="Match verification: models propose image-caption matches, people "
                       "verify them, verified pairs become positive sets (ECCV Caption).",
                  no_args_is_help=True)

DIRECTION_CHOICES = {"i2t": ("i2t",), "t2i": ("t2i",), "both": ("i2t", "t2i")}
RuleOption = Annotated[str, typer.Option(
    "--rule", help="yes: only '100% yes' counts; yes+partial: 'partially yes' too.")]
MinVotesOption = Annotated[int, typer.Option(
    "--min-votes", min=1, help="Pairs with fewer answers stay undecided.")]
FormatOption = Annotated[str, typer.Option("--format", help="table or json.")]


def _shown(text: str) -> str:
    """Stored or given text on one terminal line, control characters escaped."""
    return printable(text, newlines=False)


def _size(counts: PositiveCounts, done: str) -> str:
    """A positive set's size, what was `done` with it: its pairs, each direction's map
    beside them."""
    return (f"{counts.pairs} positives {done} (image-caption pairs; {counts.i2t} i2t and "
            f"{counts.t2i} t2i entries)")


@contextmanager
def match_errors() -> Iterator[None]:
    """Refusals and bad input end the command with one line and exit status 2."""
    from storage.match import MatchError

    try:
        with protocol_refusals():
            yield
    except typer.Exit:  # a RuntimeError too: the command already ended with fail()
        raise
    except (MatchError, ValueError, RuntimeError) as exc:
        fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)


def _table(frame, fmt: str, out: Path | None = None, what: str = "table") -> None:
    from reports.match import frame_text

    check_format(fmt, ("table", "json"))
    if fmt == "json":
        write_or_echo(frame.to_json(orient="records", indent=1), out, what)
    else:
        write_or_echo(frame_text(frame), out, what)


@app.command("propose")
def propose_command(
    model: Annotated[str, typer.Option("--model", help="A name for the proposing model.")],
    scores: Annotated[Path | None, typer.Option(
        "--scores", help="images x captions similarities (.npz with scores, image_ids, "
                         "caption_ids; .npy with --image-keys/--caption-keys; Parquet with "
                         "image_id, caption_id, score) or ranked lists (*_image_to_caption.json, "
                         "*_caption_to_image.json, or a folder with both).")] = None,
    scorer: Annotated[str | None, typer.Option(
        "--scorer", help="clip: compute the matrix with the project's CLIP scorer.")] = None,
    clip_model: Annotated[str, typer.Option(
        "--clip-model", help="CLIP model name or local folder.")]
    = "openai/clip-vit-base-patch32",
    device: Annotated[str, typer.Option("--device")] = "auto",
    batch_size: Annotated[int, typer.Option("--batch-size", min=1)] = 64,
    image_keys: Annotated[Path | None, typer.Option("--image-keys")] = None,
    caption_keys: Annotated[Path | None, typer.Option("--caption-keys")] = None,
    top_k: Annotated[int, typer.Option("--top-k", min=1)] = 5,
    direction: Annotated[str, typer.Option("--direction", help="i2t, t2i or both.")] = "both",
    depth: Annotated[int, typer.Option(
        "--depth", min=1, help="How deep each ranked list is kept (gold negatives are drawn "
                               "beyond it; models are compared on it).")] = 25,
    queries_sample: Annotated[int | None, typer.Option(
        "--queries-sample", help="Propose for a seeded sample of N queries per direction.")]
    = None,
    seed: SeedOption = 0,
    allow_download: AllowDownloadOption = False,
    by: ActorOption = "",
) -> None:
    """Store a model's top-k candidates per query, merged with other models' (known
    positives left out; which model proposed each pair, and at which rank, is kept)."""
    from reports import match as flow

    if direction not in DIRECTION_CHOICES:
        fail(f"--direction must be i2t, t2i or both, not {direction!r}")
    if (scores is None) == (scorer is None):
        fail("give either --scores FILE or --scorer clip")
    model_hub(allow_download)  # local files only: no network fails at once, not in minutes
    engine = state.existing_engine
    with match_errors():
        flow.check_can_propose(engine, model, queries_sample, seed)
        from storage.match import collection

        items = collection(engine)
        directions = DIRECTION_CHOICES[direction]
        if scorer is not None:
            if scorer != "clip":
                raise ValueError(f"unknown scorer {scorer!r}: the one scorer is clip")
            source = flow.clip_scores(engine, clip_model, device, batch_size)
            digest, origin, path = flow.clip_digest(clip_model), "clip", Path(clip_model)
        else:
            assert scores is not None
            if not scores.exists():
                raise ValueError(f"{scores}: no such file")
            digest, origin, path = flow.scores_digest(scores), scores.name, scores
        if scores is not None and (scores.is_dir() or scores.suffix.lower() == ".json"):
            lists = flow.read_ranked_lists(scores, items)
            lists = {d: (q, i[:, :depth]) for d, (q, i) in lists.items() if d in directions}
            if not lists:
                raise ValueError(f"{scores}: no ranked lists for --direction {direction}")
            if queries_sample is not None:
                raise ValueError("--queries-sample applies to score matrices; ranked lists "
                                 "already name their queries")
        else:
            if scores is not None:
                from metrics.retrieval.match import read_score_file

                source = read_score_file(scores, image_keys, caption_keys)
            lists = flow.top_lists_from_matrix(source, items, path, directions=directions,
                                               depth=max(depth, top_k),
                                               sample=queries_sample, seed=seed)
        kept = min(ranked.shape[1] for _, ranked in lists.values())
        signature = flow.proposal_signature(digest, source=origin, top_k=top_k, depth=kept,
                                            direction=direction, sample=queries_sample,
                                            seed=seed)
        summary = flow.propose(engine, lists, model=model, signature=signature,
                               direction=direction, top_k=top_k, sample=queries_sample,
                               seed=seed, actor=by or os_login())
    typer.echo(f"{_shown(model)}: {summary.proposals} proposals, {summary.new_pairs} new "
               f"pairs ({summary.pairs_total} pairs in all)\n  {signature}")


@app.command("batches")
def batches_command(
    size: Annotated[int, typer.Option("--size", help="Pairs per batch, gold included.")] = 20,
    redundancy: Annotated[int, typer.Option(
        "--redundancy", help="Annotators who verify each pair.")] = 1,
    negatives_beyond: Annotated[int | None, typer.Option(
        "--negatives-beyond",
        help="Known negatives: pairs no model ranks in its top N. Default: 25, or the depth "
             "the models kept their ranked lists to when that is less (said so).")]
    = None,
    gold_systems: Annotated[list[str] | None, typer.Option(
        "--gold-system",
        help="A system whose captions are true of their images (e.g. Human): known "
             "positives are drawn from its captions and from captions that repeat one of "
             "their image's references; repeatable.")] = None,
    seed: SeedOption = 0,
    by: ActorOption = "",
) -> None:
    """Pack the candidates not yet in a batch: SIZE - 2 candidates, one known positive and
    one known negative per batch, shuffled (seeded)."""
    from reports.match import make_batches

    with match_errors():
        plan = make_batches(state.existing_engine, size=size, redundancy=redundancy,
                            seed=seed, negatives_beyond=negatives_beyond,
                            gold_systems=tuple(gold_systems or ()), actor=by or os_login(),
                            notice=typer.echo)
    pairs = sum(len(batch) for batch in plan)
    typer.echo(f"{len(plan)} batches, {pairs} pairs ({2 * len(plan)} of them gold), "
               f"each verified by {redundancy}")


@app.command("annotate")
def annotate_command(
    annotator: AnnotatorOption = None,
    image_mode_name: ImageModeOption = "auto",
    take_over: Annotated[bool, typer.Option(
        "--take-over",
        help="Take your batch over from another thumb process verifying under your name "
             "(one left open, or one that died on another machine); that process's "
             "answers are refused from then on.")] = False,
) -> None:
    """Verify pairs: does the caption describe the image? 1 100% yes · 2 partially yes ·
    3 mostly no · 4 100% no. One process per annotator: a second one under the same name
    is refused (see --take-over)."""
    from storage.match import MatchSession
    from thumb_tui.app import ThumbApp
    from thumb_tui.screens.match import MatchScreen

    mode = image_mode(image_mode_name)
    with match_errors():
        session = MatchSession(state.existing_engine, known_annotator(annotator),
                               take_over=take_over)
    try:
        if not session.items:
            typer.echo("No batch to verify: none is left that needs you (create some with "
                       "`thumb match batches`).")
            raise typer.Exit(0)
        run_app(ThumbApp(screen=MatchScreen(session, mode)))
    finally:
        session.close()


@app.command("qc")
def qc_command(
    rushed_seconds: Annotated[float, typer.Option(
        "--rushed-seconds", min=0, help="Answers faster than this count as rushed.")] = 2.0,
    fmt: FormatOption = "table",
) -> None:
    """Gold accuracy, time per pair and rushed pairs per annotator and per batch; a batch
    with a wrong gold answer is flagged for checking (`thumb match reassign`)."""
    from reports.match import quality_control

    with match_errors():
        per_annotator, per_batch = quality_control(state.existing_engine, rushed_seconds)
    if fmt == "json":
        typer.echo(json.dumps({
            "annotators": json.loads(per_annotator.to_json(orient="records")),
            "batches": json.loads(per_batch.to_json(orient="records"))}, indent=1))
        return
    typer.echo(f"Annotators (rushed: under {rushed_seconds:g} s per pair)")
    _table(per_annotator, fmt)
    typer.echo("\nBatches (flagged: a gold answer was wrong)")
    _table(per_batch, fmt)


@app.command("reassign")
def reassign_command(
    flagged: Annotated[bool, typer.Option(
        "--flagged", help="Every flagged batch of every annotator.")] = False,
    batch: Annotated[int | None, typer.Option("--batch")] = None,
    annotator: Annotated[str | None, typer.Option("--annotator")] = None,
    by: ActorOption = "",
) -> None:
    """Reject an annotator's answers on a batch (after quality control): they leave the
    positives, and the batch is open to another verifier."""
    from reports.match import quality_control
    from storage.match import reject_claims

    if flagged == (batch is not None):
        fail("give --flagged, or --batch N --annotator NAME")
    engine = state.existing_engine
    with match_errors():
        if flagged:
            table = quality_control(engine, 0.0)[1]
            table = table[table["flagged"] & (table["status"] == "active")]
            claims = list(zip(table["batch"].astype(int), table["annotator"], strict=True))
        else:
            if annotator is None:
                raise ValueError("--batch needs --annotator NAME")
            claims = [(batch, known_annotator(annotator))]
        changed = reject_claims(engine, claims, actor=by or os_login())
    typer.echo(f"{changed} batch claim{'' if changed == 1 else 's'} rejected; those batches "
               "are open to another verifier")


@app.command("positives")
def positives_command(
    rule: RuleOption = "yes+partial",
    min_votes: MinVotesOption = 1,
    name: Annotated[str, typer.Option(
        "--name", help="The new positive set (NAME-human holds the verified pairs alone).")]
    = "verified",
    merge: Annotated[list[str] | None, typer.Option(
        "--merge", help="Also merge this positive set (e.g. cxc); repeatable.")] = None,
    replace: Annotated[bool, typer.Option(
        "--replace", help="Replace stored sets NAME and NAME-human (else refused).")]
    = False,
    bootstrap: PairsBootstrapOption = 1000,
    ci: CiOption = 0.90,
    seed: SeedOption = 0,
    fmt: FormatOption = "table",
    by: ActorOption = "",
) -> None:
    """Derive the verified positives by majority (a tie stays undecided), merge them with
    the original positives, and report each existing set's precision and recall against
    them (ECCV Table 2: per-query means as the paper's section 3.3 defines them, and the
    pooled-over-pairs figures beside them, labelled pooled_*) and the agreement of
    redundant verifiers."""
    from metrics.retrieval.match import QUALITY_COLUMNS
    from reports.match import POOLED_TITLE, TABLE2_TITLE, derive_positives, table2_parts

    with match_errors():
        result = derive_positives(state.existing_engine, name=name, rule=rule,
                                  min_votes=min_votes, merge=tuple(merge or ()),
                                  actor=by or os_login(), bootstrap=bootstrap, ci=ci,
                                  seed=seed, replace=replace)
    settings = f"rule:{rule}|min-votes:{min_votes}"
    if fmt == "json":
        typer.echo(json.dumps({
            "name": name, "settings": settings, "decided": result.decided,
            "positives": result.positives, "undecided": result.undecided,
            "undecided_ties": result.ties, "undecided_too_few_votes": result.too_few_votes,
            "undecided_on_flagged_images": result.on_flagged_images,
            "stored": {"pairs": result.stored.pairs, "i2t": result.stored.i2t,
                       "t2i": result.stored.t2i},
            "table2": json.loads(result.quality.to_json(orient="records")),
            "table2_columns": QUALITY_COLUMNS,
            "agreement": json.loads(result.agreement.to_json(orient="records"))}, indent=1))
        return
    from reports.terminal import TERMINAL_WIDTH

    for line in (
            f"{_shown(name)}: {result.positives} verified positives of {result.decided} "
            f"decided pairs ({settings})",
            _size(result.stored, "stored with the original ones"),
            f"{result.undecided} undecided: {result.ties} tied (as many yes as no votes), "
            f"{result.too_few_votes} with fewer than {min_votes} vote"
            f"{'' if min_votes == 1 else 's'}, {result.on_flagged_images} on images flagged "
            "as broken"):
        typer.echo(textwrap.fill(line, TERMINAL_WIDTH, subsequent_indent="  ",
                                 break_long_words=False, break_on_hyphens=False))
    paper, pooled = table2_parts(result.quality)
    typer.echo(f"\n{TABLE2_TITLE}")
    _table(paper, fmt)
    typer.echo(f"\n{POOLED_TITLE}")
    _table(pooled, fmt)
    typer.echo(f"\nAgreement of redundant verifiers ({ci:.0%} BCa bootstrap CIs over pairs)")
    _table(result.agreement, fmt)


@app.command("bias")
def bias_command(rule: RuleOption = "yes+partial", min_votes: MinVotesOption = 1,
                 fmt: FormatOption = "table") -> None:
    """Per proposing model: candidates verified positive; between models: overlap of their
    top k and Kendall tau of their ranked lists (ECCV Caption section 5)."""
    from reports.match import bias

    with match_errors():
        per_model, overlap = bias(state.existing_engine, rule=rule, min_votes=min_votes)
    typer.echo("Proposing models")
    _table(per_model, fmt)
    typer.echo("\nModels compared on the same queries")
    _table(overlap, fmt)


@app.command("export")
def export_command(
    out: Annotated[Path, typer.Option("--out", help="Folder (eccv-json) or file.")],
    fmt: Annotated[str, typer.Option("--format", help="eccv-json, csv or parquet.")]
    = "eccv-json",
    positives: Annotated[str | None, typer.Option(
        "--positives", help="The positive set to write (eccv-json).")] = None,
    force: ForceOption = False,
    raw: RawOption = False,
) -> None:
    """eccv-json: a positive set in the layout of the eccv-caption package's files;
    csv/parquet: every verification with its pair, annotator, answer, seconds, proposing
    models and ranks, and gold flag (written to --out as named, in --format)."""
    from reports.match import export_eccv, export_verifications

    with match_errors():
        if fmt == "eccv-json":
            if positives is None:
                raise ValueError("--format eccv-json needs --positives NAME")
            names = _eccv_outputs(out, positives, force)
            with Outputs(force) as files:
                paths = export_eccv(state.existing_engine, positives, files.folder(
                    out, expect=names))
            for path in paths:
                typer.echo(f"wrote {_shown(str(out / path.name))}")
        elif fmt in ("csv", "parquet"):
            if positives is not None:
                raise ValueError(f"--positives applies to --format eccv-json; {fmt} writes "
                                 "every verification, not a positive set")
            output_file(out, force=force, fmt=fmt)
            with Outputs(force) as files:
                count = export_verifications(state.existing_engine,
                                             files.file(out, fmt=fmt), fmt, raw=raw)
            typer.echo(f"wrote {count} verifications to {out}")
        else:
            raise ValueError(f"--format must be eccv-json, csv or parquet, not {fmt!r}")


def _eccv_outputs(out: Path, name: str, force: bool) -> list[str]:
    """The files an eccv-json export writes into `out`, checked before any work (a folder
    that holds another set's files is refused: it would become unreadable)."""
    from metrics.retrieval.positives import CAPTION_TO_IMAGE, IMAGE_TO_CAPTION

    names = [f"{name}{IMAGE_TO_CAPTION}", f"{name}{CAPTION_TO_IMAGE}", f"{name}_ids.json"]
    output_folder(out, force=force, expect=names)
    for suffix in (IMAGE_TO_CAPTION, CAPTION_TO_IMAGE) if out.is_dir() else ():
        other = next((p for p in sorted(out.glob(f"*{suffix}")) if p.name not in names),
                     None)
        if other is not None:
            raise ValueError(f"{out}: already holds {other.name}")
    return names


@app.command("import-positives")
def import_positives_command(
    name: Annotated[str, typer.Argument(help="Name of the set (eccv, cxc, coco: shipped).")],
    directory: Annotated[Path | None, typer.Argument(
        help="Folder with one *_image_to_caption.json and one *_caption_to_image.json.")]
    = None,
    by: ActorOption = "",
) -> None:
    """Import a positive set in the eccv-caption layout, or a set the eccv-caption package
    ships (eccv, cxc, coco) when no folder is given. Ids outside the project are kept."""
    from reports.match import import_positives

    with match_errors():
        source, counts = import_positives(state.engine, name, directory,
                                          actor=by or os_login())
    typer.echo(f"{_shown(name)}: {_size(counts, 'imported')} from {_shown(source)}")


@app.command("status")
def status_command() -> None:
    """Models, batches, answers and positive sets of the project."""
    from reports.match import match_status

    typer.echo(match_status(state.existing_engine))
