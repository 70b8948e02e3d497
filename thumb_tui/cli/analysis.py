"""Analysis commands: agreement, the project report, and the automatic metrics."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from rubrics.escape import for_markup, printable
from thumb_tui.cli.common import (
    AllowDownloadOption,
    BootstrapOption,
    CiOption,
    SeedOption,
    check_format,
    collector_paused,
    fail,
    model_hub,
    named_tasks,
    progress_bar,
    state,
    value_errors,
    warnings_as_notes,
    working,
)
from thumb_tui.cli.outputs import (
    ForceOption,
    Outputs,
    RawOption,
    output_file,
    output_folder,
    write_or_echo,
)

# Each command's formats, one list for its help, its check and its error message.
AGREEMENT_FORMATS = ("table", "csv", "json", "md", "latex")
REPORT_FORMATS = ("md", "html", "json", "latex")

app = typer.Typer()
metrics_app = typer.Typer(help="Automatic metrics: compute and list stored scores.",
                          no_args_is_help=True)
app.add_typer(metrics_app, name="metrics")


@app.command("agreement")
def agreement_command(
    fmt: Annotated[str, typer.Option("--format", help=", ".join(AGREEMENT_FORMATS) + ".")
                   ] = "table",
    out: Annotated[Path | None, typer.Option("--out", help="Write to this file.")] = None,
    bootstrap: BootstrapOption = 1000,
    ci: CiOption = 0.90,
    seed: SeedOption = 0,
    force: ForceOption = False,
    raw: RawOption = False,
) -> None:
    """Agreement on P, R, "fluency penalty > 0" and Total: Cohen's kappa (plain, linear,
    quadratic), Krippendorff's alpha (ordinal, interval), exact and within-1 agreement,
    change rate, confusion matrices; per pair and overall, with bootstrap CIs.

    With no pairs yet the output is still written: CSV with its header, JSON an empty
    list, the other formats saying so."""
    from reports.agreement import agreement_report
    from reports.thumb.text import NO_PAIRS, agreement_text
    from storage.rubric_registry import project_rubric

    check_format(fmt, AGREEMENT_FORMATS)
    output_file(out, force=force, fmt=fmt)
    engine = state.existing_engine
    with working("computing agreement"):
        report = agreement_report(engine, bootstrap=bootstrap, ci=ci, seed=seed)
    if report.empty and fmt in ("json", "csv"):  # the data cannot say it: a note beside
        typer.echo(NO_PAIRS, err=True)
    if fmt == "json":
        import json

        from reports.numbers import json_records

        text = json.dumps(json_records(report), indent=1)
    elif fmt == "csv":
        from storage.exporter import csv_text

        text = csv_text(report, raw=raw)
    elif fmt == "latex":
        from reports.thumb.latex import agreement_document

        text = agreement_document(report, ci=ci, bootstrap=bootstrap,
                                  rubric=project_rubric(engine))
    else:
        text = agreement_text(report, markdown=fmt == "md", ci=ci, bootstrap=bootstrap,
                              rubric=project_rubric(engine))
    write_or_echo(text, out, f"{len(report)} rows" if fmt in ("json", "csv")
                  else "the agreement tables", force=force)


@app.command("report")
def report_command(
    fmt: Annotated[str, typer.Option(
        "--format", help=f"{', '.join(REPORT_FORMATS)} (latex: report.tex, which \\inputs "
                         "each booktabs table from tables/).")] = "md",
    out: Annotated[Path, typer.Option("--out", help="Folder for the report.")] = Path(
        "thumb-report"),
    exclude_system: Annotated[
        list[str] | None,
        typer.Option("--exclude-system", help="Also report correlations without this "
                                              "system (repeatable; default: Human)."),
    ] = None,
    bootstrap: BootstrapOption = 1000,
    ci: CiOption = 0.90,
    seed: SeedOption = 0,
    force: ForceOption = False,
    print_figures: Annotated[bool, typer.Option(
        "--print-figures", help="Also write each figure as PDF (vector) and PNG (300 dpi) "
                                "for print (latex: report.tex includes the PDFs); needs "
                                "matplotlib (the metrics extra).")] = False,
) -> None:
    """The THUMB paper's analyses for this project: systems table, strictly best/worst,
    metric-human correlations with Williams tests, BISON-style pairwise accuracy.

    The folder is made if its parent exists; a report file or figure that is there already
    is replaced only with --force."""
    check_format(fmt, REPORT_FORMATS)
    if print_figures and fmt == "json":
        fail("--print-figures goes with --format md, html or latex (the reports with "
             "figures)")
    if fmt == "latex":  # the LaTeX renderer (and its tables' modules) only for LaTeX
        from reports.thumb import latex

        output_folder(out, force=force, expect=[latex.REPORT_FILE])
        if out.is_dir():
            output_folder(out / latex.TABLES_FOLDER, force=force,
                          expect=[f"{name}.tex" for name in latex.REPORT_TABLES])
    else:
        output_folder(out, force=force, expect=[f"report.{fmt}"])
    with collector_paused(), value_errors(), warnings_as_notes(), working(
            "computing the report"):
        from reports.thumb.render import write_report
        from reports.thumb.tables import build_report

        report = build_report(state.existing_engine, exclude_systems=exclude_system,
                              bootstrap=bootstrap, ci=ci, seed=seed)
        with Outputs(force) as files:
            folder = files.folder(out)
            main_file = (latex.write_report(report, folder, _tables_folder(files, out, folder),
                                            print_figures=print_figures)
                         if fmt == "latex" else write_report(report, folder, fmt,
                                                              print_figures=print_figures))
            path = out / main_file.name
    from reports.thumb.render import missing_lines

    typer.echo(f"report written to {path}")
    for line in missing_lines(report):  # an early project: what is still to do
        typer.echo(f"not computed yet: {line}")
    if fmt == "latex":  # the sections only the Markdown and HTML reports have
        for line in latex.omitted_sections(report, with_figures=print_figures):
            typer.echo(f"not in the LaTeX report: {line}", err=True)


def _tables_folder(files: Outputs, out: Path, staging: Path) -> Path:
    """Where the LaTeX report's tables/ is written: inside the report's temporary folder
    when --out is new (renamed into place with it), else a temporary folder of its own,
    whose tables replace those there only with --force."""
    from reports.thumb.latex import TABLES_FOLDER

    if out.is_dir():
        return files.folder(out / TABLES_FOLDER)
    tables = staging / TABLES_FOLDER
    tables.mkdir()
    return tables


def metric_option_parameters() -> list[inspect.Parameter]:
    """One command-line option per option that some metric declares (metrics.registry),
    built-in or plugin; help texts shown literally (never read as Rich markup)."""
    from metrics.registry import metric_options

    parameters = []
    for option in metric_options().values():
        kind = option.kind | None if option.default is None else option.kind
        # a switch that is on unless turned off needs its off form (`--no-…`)
        flags = (f"{option.flag}/--no-{option.flag.removeprefix('--')}"
                 if option.kind is bool and option.default else option.flag)
        parameters.append(inspect.Parameter(
            option.option, inspect.Parameter.KEYWORD_ONLY, default=option.default,
            annotation=Annotated[kind, typer.Option(flags, help=for_markup(option.help),
                                                    min=option.minimum)]))
    return parameters


def with_metric_options(command: Callable[..., None], fixed: list[inspect.Parameter],
                        doc: str) -> Callable[..., None]:
    """`command` (which takes `**metric_settings`) with the signature Typer reads: its
    `fixed` options, then one per option some metric declares (`metric_option_parameters`),
    and its help text: `metrics compute` and `bison evaluate` take a metric's options
    alike."""
    parameters = fixed + metric_option_parameters()
    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in parameters}
    command.__doc__ = doc
    return command


def metrics_compute_command(
    metric: list[str] | None = None, keep_self_references: bool = False,
    clean: str | None = None, judgments: str | None = None, allow_download: bool = False,
    **metric_settings: object,
) -> None:
    if clean not in (None, "thumb", "none"):
        fail(f"--clean must be thumb or none, not {clean!r}")
    model_hub(allow_download)

    from metrics.registry import DEFAULT_METRICS, MetricOptions, plugin_problems
    from reports.scoring import compute_judgment_metrics, compute_metrics

    names = metric or list(DEFAULT_METRICS)
    for problem in plugin_problems():  # left out: an error only if its metric is asked for
        if not set(problem.metrics) & set(names):
            typer.echo(f"warning: {problem}", err=True)
    options = MetricOptions(keep_self_references=keep_self_references, clean=clean,
                            **metric_settings)
    with progress_bar() as bar:
        report = named_tasks(bar)
        with value_errors():
            if judgments is None:
                runs = compute_metrics(state.existing_engine, names, options,
                                       progress=report)
            else:
                runs = compute_judgment_metrics(state.existing_engine, judgments, names,
                                                options, progress=report)
    for run in runs:  # a count of the data goes beside the signature, never into it
        typer.echo(f"{run.summary}\n  {run.signature}"
                   + (f"\n  {run.self_references}" if run.self_references else ""))


def _register_compute() -> None:
    """`thumb metrics compute` with the options the metrics declare and a help text that
    lists the metrics."""
    from metrics.registry import DEFAULT_METRICS, metric_classes, plugin_problems

    fixed = [
        inspect.Parameter("metric", inspect.Parameter.KEYWORD_ONLY, default=None,
                          annotation=Annotated[list[str] | None, typer.Option(
                              "--metric", help="Metric to compute (repeatable); default: "
                                               f"{', '.join(DEFAULT_METRICS)}.")]),
        inspect.Parameter("keep_self_references", inspect.Parameter.KEYWORD_ONLY,
                          default=False, annotation=Annotated[bool, typer.Option(
                              "--keep-self-references",
                              help="Score a caption also against a reference identical to it "
                                   "(as the THUMB 1.0 paper's numbers were computed); the "
                                   "signature says so.")]),
        inspect.Parameter("clean", inspect.Parameter.KEYWORD_ONLY, default=None,
                          annotation=Annotated[str | None, typer.Option(
                              "--clean", metavar="thumb|none",
                              help="Text clean-up before scoring: thumb (THUMB's: strip, "
                                   "capitalise the first letter, end with a period, no "
                                   "space before it) or none (the texts as stored). "
                                   "Default: thumb for the project, none for a judgment "
                                   "set (the texts as released); the signature's clean: "
                                   "says which.")]),
        inspect.Parameter("judgments", inspect.Parameter.KEYWORD_ONLY, default=None,
                          annotation=Annotated[str | None, typer.Option(
                              "--judgments", help="Score the captions of this judgment set "
                                                  "(against its own references) instead of "
                                                  "the project's.")]),
        inspect.Parameter("allow_download", inspect.Parameter.KEYWORD_ONLY, default=False,
                          annotation=AllowDownloadOption),
    ]
    doc = ("Score every caption; scores already stored with the same signature are reused.\n\n"
           + "\n\n".join(f"{name}: {for_markup(cls.help)}"
                         for name, cls in metric_classes().items())
           + "".join(f"\n\nLeft out: {for_markup(str(problem))}"
                     for problem in plugin_problems()))
    metrics_app.command("compute")(with_metric_options(metrics_compute_command, fixed, doc))


_register_compute()


@metrics_app.command("list")
def metrics_list_command(
    judgments: Annotated[str | None, typer.Option(
        "--judgments", help="The scores of this judgment set's captions instead.")] = None,
) -> None:
    """Stored metric scores: one line per signature with count, mean and how many captions
    the metric could not score (e.g. images without references)."""
    from storage.judgments import judgment_metric_summary, judgment_set, judgment_sets
    from storage.metric_scores import metric_score_summary

    engine = state.existing_engine
    if judgments is None:
        summary = metric_score_summary(engine)
    else:
        with value_errors():
            summary = judgment_metric_summary(engine, judgment_set(engine, judgments).id)
    if not summary and judgments is None and (sets := judgment_sets(engine)):
        names = ", ".join(printable(repr(info.name), newlines=False) for info in sets)
        typer.echo("no metric scores of the project's own captions; those of a judgment set "
                   f"are listed by `thumb metrics list --judgments NAME` (sets: {names})")
    elif not summary:
        typer.echo("no metric scores stored yet: run `thumb metrics compute"
                   + (f" --judgments {printable(judgments, newlines=False)}" if judgments
                      else "") + "`")
    for signature, count, mean, undefined in summary:
        shown = f"{mean:9.4f}" if mean is not None else f"{'-':>9}"
        missing = f"  ({undefined} undefined)" if undefined else ""
        typer.echo(f"{count:>7} captions  mean {shown}  {signature}{missing}")
