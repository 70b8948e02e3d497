"""`thumb judgments`: human judgments collected elsewhere (Likert scores by many judges or
choices between two captions), and how well the automatic metrics agree with them."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Annotated

import typer

from storage.events import os_login
from thumb_tui.cli.common import (
    ActorOption,
    BootstrapOption,
    CiOption,
    OutsideImagesOption,
    SeedOption,
    check_format,
    database_for_import,
    fail,
    state,
    value_errors,
)
from thumb_tui.cli.outputs import ForceOption, Outputs, RawOption, output_file, write_or_echo

app = typer.Typer(help="Human judgments from elsewhere: Likert scores by many judges or "
                       "pairwise choices, and the metric-correlation tables.",
                  no_args_is_help=True)

REPORT_FORMATS = ("table", "md", "json", "latex")
EXPORT_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".parquet": "parquet"}


IMPORT_HELP = (
    "Import a judgment set (all or nothing). Needs no image files and no systems.\n\n"
    "A judged caption is an (image, caption) pair: one caption_id may be judged under "
    "several images. A caption whose caption_id equals a reference_id of its image (or, "
    "without ids, whose text is a reference's) is left out of its own references.\n\n"
    "Crowd proportions (the share of workers who said that a caption fits the image), "
    "e.g. a CSV with the header image_id,caption_id,caption,judge,score and rows like "
    "img7,cap12,a dog on a skateboard,crowd,0.333333:\n\n"
    "    thumb judgments import crowd.csv --name crowd --scale 0-1 --continuous")


@app.command("import", help=IMPORT_HELP)
def import_command(
    file: Annotated[Path, typer.Argument(help="CSV or JSONL of judgments, one per row.")],
    name: Annotated[str, typer.Option("--name", help="Name of the new judgment set.")],
    kind: Annotated[str, typer.Option(
        "--kind", help="score (image_id, caption, judge, score) or pairwise (image_id, "
                       "caption_a, caption_b, judge, choice).")] = "score",
    scale: Annotated[str | None, typer.Option(
        "--scale", help="A score set's scale, MIN-MAX (e.g. 1-4); enforced.")] = None,
    halves: Annotated[bool, typer.Option(
        "--halves", help="Scores may be halves (2.5); default whole numbers.")] = False,
    continuous: Annotated[bool, typer.Option(
        "--continuous", help="Scores may be any real number within the scale (crowd "
                             "proportions, averaged scores); agreement is then interval "
                             "Krippendorff alpha only.")] = False,
    references: Annotated[Path | None, typer.Option(
        "--references", help="References: CSV/JSONL of image_id, reference (optional "
                             "reference_id), or a COCO captions JSON.")] = None,
    allow_outside_images: OutsideImagesOption = False,
    by: ActorOption = "",
) -> None:
    from storage.imports.judgment_import import CONTINUOUS, Scale, import_judgments, kind_mismatch

    if halves and continuous:
        fail("--halves and --continuous exclude each other")
    parsed = None
    if scale is not None:
        with value_errors():
            parsed = Scale.parse(scale, CONTINUOUS if continuous else 0.5 if halves else 1.0)
    elif halves or continuous:
        fail(f"{'--halves' if halves else '--continuous'} needs --scale MIN-MAX")
    if kind not in ("score", "pairwise"):
        fail(f"--kind must be score or pairwise, not {kind!r}")
    if (kind == "score") != (parsed is not None):
        # a pairwise file imported without --kind is told so, not to give a scale
        fail(kind_mismatch(file, kind) or (
            "a score set needs --scale MIN-MAX (e.g. 1-5)" if kind == "score"
            else "a pairwise set has no scale; leave out --scale"))
    with value_errors(), database_for_import() as engine:
        summary = import_judgments(engine, file, name=name, kind=kind, scale=parsed,
                                   references=references, actor=by or os_login(),
                                   allow_outside_images=allow_outside_images)
    typer.echo(str(summary))


@app.command("list")
def list_command() -> None:
    """The judgment sets: name, kind, scale, where they came from."""
    from reports.thumb.text import terminal_text
    from storage.judgments import judgment_sets

    sets = judgment_sets(state.existing_engine)
    if not sets:
        typer.echo("no judgment sets yet: thumb judgments import FILE --name NAME")
    for info in sets:
        typer.echo(f"{terminal_text(info.name)}  {info.kind}  scale {info.scale}  from "
                   f"{terminal_text(info.source)}")


@app.command("report")
def report_command(
    name: Annotated[str, typer.Argument(help="The judgment set.")],
    aggregate: Annotated[str, typer.Option(
        "--aggregate", help="flat: one pair per judgment (the literature's usual "
                            "protocol); mean: judges averaged per caption.")] = "flat",
    metric: Annotated[list[str] | None, typer.Option(
        "--metric", help="A metric (name or report label; repeatable); default: every "
                         "stored one.")] = None,
    bootstrap: BootstrapOption = 1000,
    ci: CiOption = 0.90,
    seed: SeedOption = 0,
    fmt: Annotated[str, typer.Option("--format", help="table, md, json or latex.")
                   ] = "table",
    out: Annotated[Path | None, typer.Option("--out", help="Write to this file.")] = None,
    force: ForceOption = False,
) -> None:
    """Kendall tau-b/tau-c, Spearman and Pearson of every metric with the human scores
    (score sets), or accuracy against the majority choice (pairwise sets), with bootstrap
    CIs over images; differences between metrics; agreement among the judges."""
    from reports.judgments import build_judgment_report
    from reports.thumb.render import judgment_json, judgment_sections
    from reports.thumb.text import judgment_text

    check_format(fmt, REPORT_FORMATS)
    output_file(out, force=force, fmt=fmt)
    with value_errors():
        report = build_judgment_report(state.existing_engine, name, aggregate=aggregate,
                                       metrics=metric, bootstrap=bootstrap, ci=ci, seed=seed)
    if fmt == "json":
        text = json.dumps(judgment_json(report), indent=1)
    elif fmt == "md":
        text = "\n\n".join(f"## {title}\n\n{body}" for title, body in
                           judgment_sections(report)) + "\n"
    elif fmt == "latex":
        from reports.thumb.latex import judgment_document

        text = judgment_document(report)
    else:
        text = judgment_text(report)
    write_or_echo(text, out, f"the report of {len(report.records)} records", force=force)


@app.command("export")
def export_command(
    name: Annotated[str, typer.Argument(help="The judgment set.")],
    out: Annotated[Path, typer.Option("--out", help="Output file: .csv, .jsonl or "
                                                    ".parquet.")],
    force: ForceOption = False,
    raw: RawOption = False,
) -> None:
    """The judgments as a tidy table with each caption's metric scores (one column per
    metric, named as in reports; signatures in OUT.signatures.json), and the set's
    references with their ids in OUT's name with .references before its suffix: what
    `thumb judgments import` takes to make the set again (the command is printed)."""
    from reports.exports import export_judgment_set, signatures_path
    from reports.thumb.text import terminal_text
    from storage.exporter import write_frame
    from storage.judgments import judgment_image_paths, judgment_references, judgment_set

    fmt = EXPORT_FORMATS.get(out.suffix.lower())
    if fmt is None:
        fail(f"--out must end in {', '.join(EXPORT_FORMATS)}")
    output_file(out, force=force, fmt=fmt)
    signatures = signatures_path(out)
    references = out.with_name(f"{out.stem}.references{out.suffix}")
    engine = state.existing_engine
    with value_errors(), Outputs(force) as files:
        info = judgment_set(engine, name)
        rows, written_signatures = export_judgment_set(
            engine, name, files.file(out, fmt=fmt), fmt, raw=raw,
            signatures_out=files.file(signatures, optional=True))
        reference_rows = judgment_references(engine, info.id)
        if len(reference_rows):
            write_frame(reference_rows, files.file(references, fmt=fmt), fmt, raw=raw)
    typer.echo(f"wrote {rows} rows to {out}"
               + (f" (metric signatures in {signatures})" if written_signatures else ""))
    again = ["thumb", "judgments", "import", str(out), "--name", name, *info.import_options]
    if len(reference_rows):
        typer.echo(f"wrote {len(reference_rows)} references to {references}")
        again += ["--references", str(references)]
    images = judgment_image_paths(engine, info.id, out.resolve().parent).values()
    if any(path.split(os.sep, 1)[0] == os.pardir for path in images):  # as written
        again.append("--allow-outside-images")
    typer.echo(f"import it again with: {terminal_text(shlex.join(again))}")
