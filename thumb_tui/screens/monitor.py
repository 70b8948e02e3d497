"""`thumb monitor`: the campaign lead's live, read-only dashboard. It reads the project
every few seconds (and on `r`) in a background thread, in short read transactions, and
shows the pipeline per stage, each annotator's progress, pace, rushed share, gold accuracy
(where the project has gold captions) and drift, agreement so far on the blind double
ratings, broken images, and alerts where a figure crosses the lead's thresholds. It never
writes. Every stored text (annotator names, image keys, reasons) is shown literally, as
escaped Rich Text, never as markup."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from metrics.stats.campaign import (
    CONSENSUS_RATERS,
    MIN_AGREEMENT_IMAGES,
    RECENT,
    AgreementFigure,
    Alert,
    Drift,
    Pace,
    PairDifference,
    Thresholds,
    agreement_so_far,
    alerts,
    captions_per_stage,
    drifts,
    paces,
    pair_differences,
)
from rubrics import printable
from storage.rating.dashboard import HeldClaim, StageProgress
from storage.rating.gold import GoldAccuracy
from storage.rating.image_flags import BrokenImage
from storage.rating.monitor import MonitorBusy, MonitorData, read_monitor
from thumb_tui.screens.help import keys_markdown
from thumb_tui.widgets.keybar import KeyBar, KeyBarScreen

BUSY = "database busy, retrying"
SHORT_DIMENSION = {"precision": "P", "recall": "R"}
# An annotator name is cut (ending in "…") only where the table would not fit the screen
# otherwise, and to no fewer characters than this (alerts show it whole).
NAME_WIDTH = 14


@dataclass(frozen=True)
class MonitorSettings:
    every: float = 2.0  # seconds between readings
    rushed_below: float = 3.0  # a caption rated faster than this is rushed
    recent: int = RECENT  # drift "recent": each annotator's last N compared captions
    thresholds: Thresholds = field(default_factory=Thresholds)
    bootstrap: int = 500  # resamples of the agreement CIs


@dataclass(frozen=True)
class AnnotatorRow:
    name: str
    stages: dict[int, int]  # stage -> captions rated completely
    pace: Pace
    drift: Drift
    gold: GoldAccuracy | None = None  # None: no complete gold answer yet


@dataclass(frozen=True)
class Figures:
    """One reading, computed: what the screen shows."""

    stages: list[StageProgress]
    annotators: list[AnnotatorRow]
    agreement: list[AgreementFigure]
    broken_images: list[BrokenImage]
    alerts: list[Alert]
    read_at: float
    gold_captions: int = 0  # the project's gold captions (0: no gold column)
    pairs: list[PairDifference] = field(default_factory=list)  # drift no one is blamed for
    claims: list[HeldClaim] = field(default_factory=list)  # held, oldest first


class FigureMaker:
    """The figures of a reading; agreement (a bootstrap) is computed again only when the
    blind pairs changed."""

    def __init__(self, settings: MonitorSettings, clock: Callable[[], float] = time.time
                 ) -> None:
        self.settings, self.clock = settings, clock
        self._agreement: tuple[object, list[AgreementFigure]] | None = None

    def agreement(self, data: MonitorData) -> list[AgreementFigure]:
        pairs = data.blind_pairs
        key = (data.double_images, tuple(map(tuple, pairs.itertuples(index=False))))
        if self._agreement is None or self._agreement[0] != key:
            self._agreement = (key, agreement_so_far(pairs, marked=data.double_images,
                                                     bootstrap=self.settings.bootstrap))
        return self._agreement[1]

    def __call__(self, data: MonitorData) -> Figures:
        settings = self.settings
        counts = captions_per_stage(data.ratings)
        pace_of = paces(data.ratings, settings.rushed_below)
        drift_of = drifts(data.ratings, settings.recent)
        pairs = pair_differences(data.ratings)
        agreement = self.agreement(data)
        gold_of = {record.annotator: record for record in data.gold}
        rows = [AnnotatorRow(name, counts.get(name, {}), pace_of.get(name, Pace(0, None, 0,
                                                                                None)),
                             drift_of.get(name, Drift(0, None, None, 0, None, None)),
                             gold_of.get(name))
                for name in data.annotators]
        found = alerts(pace_of, drift_of, agreement, settings.thresholds,
                       {name: (record.answered, record.correct)
                        for name, record in gold_of.items()}, pairs)
        return Figures(data.stages, rows, agreement, data.broken_images, found, self.clock(),
                       data.gold_captions, pairs, data.claims)


def _first_line(error: object) -> str:
    lines = str(error).strip().splitlines()
    return printable(lines[0] if lines else type(error).__name__, newlines=False)[:120]


def literal(text: str, style: str = "") -> Text:
    """A stored text as it is: control characters escaped, never read as markup."""
    return Text(printable(str(text), newlines=False), style=style)


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.2f}"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _duration(seconds: float) -> str:
    """Seconds as "45s", "4m 05s" or "1h 02m"."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


def _gold(record: GoldAccuracy | None) -> str:
    """Right of answered gold captions and the share: "3/4 75%"; "-" before any answer."""
    if record is None or not record.answered:
        return "-"
    return f"{record.correct}/{record.answered} {record.accuracy:.0%}"


# The per-annotator table: (header, justify, cell). Progress, pace and rushed share come
# first, drift last.
AnnotatorColumn = tuple[str, str, Callable[[AnnotatorRow], Text]]
PROGRESS_COLUMNS: list[AnnotatorColumn] = [
    ("annotator", "left", lambda row: literal(row.name)),
    ("s1", "right", lambda row: Text(str(row.stages.get(1, 0)))),
    ("s2", "right", lambda row: Text(str(row.stages.get(2, 0)))),
    ("fin", "right", lambda row: Text(str(row.stages.get(3, 0)))),
    ("s/cap", "right", lambda row: Text(_seconds(row.pace.median_seconds))),
    ("rush", "right", lambda row: Text(_share(row.pace.rushed_share))),
]
# Quality columns sit between pace and drift; the gold column only where the project has
# gold captions (GOLD_ONLY), so that a project without gold keeps its table.
QUALITY_COLUMNS: list[AnnotatorColumn] = [
    ("gold", "right", lambda row: Text(_gold(row.gold))),
]
GOLD_ONLY = {"gold"}
DRIFT_COLUMNS: list[AnnotatorColumn] = [
    ("ΔP", "right", lambda row: Text(_signed(row.drift.precision))),
    ("ΔR", "right", lambda row: Text(_signed(row.drift.recall))),
    ("ΔP rec", "right", lambda row: Text(_signed(row.drift.recent_precision))),
    ("ΔR rec", "right", lambda row: Text(_signed(row.drift.recent_recall))),
]


def annotator_table(rows: list[AnnotatorRow], settings: MonitorSettings,
                    gold: bool = False, pairs: Sequence[PairDifference] = ()) -> Group:
    """The table, and a legend of its columns; the gold column only with `gold` (the
    project has gold captions); then the revisit time each annotator's pace leaves out,
    and the differences between two raters that no one is blamed for."""
    legend = Text(f"captions rated at s1 (stage 1), s2 (review), fin (resolution); s/cap: "
                  f"median seconds to a caption's first complete rating; rush: share under "
                  f"{settings.rushed_below:g} s; "
                  + ("gold: gold captions right/answered; " if gold else "")
                  + f"Δ: mean minus the median where {CONSENSUS_RATERS}+ rated a caption, "
                  f"rec: last {settings.recent}", style="dim")
    if not rows:
        return Group(Text("nobody has rated yet", style="dim"), legend)
    return Group(AnnotatorRows(rows, gold), legend, *revisits_text(rows),
                 *pairs_text(pairs))


def revisits_text(rows: list[AnnotatorRow]) -> list[Text]:
    """One line: the time each annotator spent on images after their first pass (left
    out of s/cap and rush); none where no one's is known."""
    known = [row for row in rows if row.pace.revisit_seconds is not None]
    if not known:
        return []
    text = Text("revisits (time on rated images, not in s/cap or rush): ", style="dim")
    for number, row in enumerate(known):
        text.append(", " if number else "")
        text.append(literal(row.name))
        text.append(f" {_duration(row.pace.revisit_seconds or 0.0)}")
    return [text]


def pairs_text(pairs: Sequence[PairDifference]) -> list[Text]:
    """Two raters' difference on the captions only they rated, named as a pair and
    saying why no one is blamed."""
    if not pairs:
        return []
    lines = [Text("rated by two only (no Δ: two raters cannot say which one drifted):",
                  style="dim")]
    for pair in pairs:
        line = Text("  ")
        line.append(literal(pair.first))
        line.append(" − ")
        line.append(literal(pair.second))
        line.append(f": ΔP {pair.precision:+.2f} ΔR {pair.recall:+.2f} on {pair.captions} "
                    f"captions")
        lines.append(line)
    return lines


class AnnotatorRows:
    """The per-annotator table, with two spaces between columns where it fits and one
    where it would not (the gold column at 80 columns); names whole where the screen has
    room for them, else cut with "…" by what does not fit (to NAME_WIDTH at the least)."""

    def __init__(self, rows: list[AnnotatorRow], gold: bool = False) -> None:
        self.rows, self.gold = rows, gold

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        unbounded = options.update(width=10 * options.max_width)  # (get clamps to it)
        for padding in ((0, 1), (0, 0)):
            table = _annotator_rows(self.rows, self.gold, padding=padding)
            excess = Measurement.get(console, unbounded, table).maximum - options.max_width
            if excess <= 0:
                yield table
                return
            names = max(literal(row.name).cell_len for row in self.rows)
            if names - excess >= NAME_WIDTH:
                yield _annotator_rows(self.rows, self.gold, padding, names - excess)
                return
        yield _annotator_rows(self.rows, self.gold, (0, 0), NAME_WIDTH)


def _annotator_rows(rows: list[AnnotatorRow], gold: bool = False,
                    padding: tuple[int, ...] = (0, 1), name_width: int | None = None) -> Table:
    quality = [column for column in QUALITY_COLUMNS if gold or column[0] not in GOLD_ONLY]
    columns = [*PROGRESS_COLUMNS, *quality, *DRIFT_COLUMNS]
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, expand=False, padding=padding,
                  collapse_padding=True, show_edge=False)
    for header, justify, _ in columns:
        table.add_column(header, justify=justify, no_wrap=True, overflow="ellipsis",
                         max_width=name_width if header == "annotator" else None)
    for row in rows:
        table.add_row(*(cell(row) for _, _, cell in columns))
    return table


def pipeline_table(stages: list[StageProgress]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1))
    for column in ("stage", "of", "waiting", "in progress", "done", "not ready"):
        table.add_column(column, justify="left" if column in ("stage", "of") else "right",
                         no_wrap=True)
    for stage in stages:
        table.add_row(stage.stage, stage.unit, str(stage.waiting), str(stage.in_progress),
                      str(stage.done), str(stage.not_ready) if stage.not_ready else "")
    return table


def agreement_view(figures: list[AgreementFigure]) -> Group:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1))
    # The label, level and value columns keep their width at 80 columns; a long note
    # ("too few: … thumb assign --double") wraps in its own column instead of squeezing them.
    for column, justify, width in (("", "left", 1), ("α", "left", len("interval")),
                                   ("value", "right", len("value"))):
        table.add_column(column, justify=justify, no_wrap=True, min_width=width)
    table.add_column("90% CI", justify="left", overflow="fold")
    table.add_column("on", justify="left", no_wrap=True)
    warnings: list[str] = []
    for figure in figures:
        label = SHORT_DIMENSION.get(figure.dimension, figure.dimension)
        if figure.value is None:
            table.add_row(label, figure.level, Text("-"),
                          Text(figure.note or "undefined", style="yellow"), "")
            continue
        ci = ("-" if figure.ci_low is None else f"[{figure.ci_low:.2f}, {figure.ci_high:.2f}]")
        if figure.ci_warning and figure.ci_warning not in warnings:
            warnings.append(figure.ci_warning)
        table.add_row(label, figure.level, f"{figure.value:.2f}", Text(ci),
                      f"{figure.captions} captions, {figure.images} images")
    parts: list[object] = [table]
    parts += [Text(f"note: {warning}", style="dim") for warning in warnings]
    return Group(*parts)


def alerts_text(found: list[Alert]) -> Text:
    if not found:
        return Text("none", style="green")
    text = Text()
    for number, alert in enumerate(found):
        if number:
            text.append("\n")
        text.append("! ", style="bold red")
        text.append(literal(alert.subject, "bold"))
        text.append(f": {alert.message}")
    return text


CLAIMS_SHOWN = 3  # the oldest idle claims under the pipeline (all claims: thumb status)
IDLE_CLAIM_SECONDS = 600  # a claim untouched this long is likely a dead session's


def pipeline_view(stages: list[StageProgress], claims: list[HeldClaim]) -> Group:
    """The pipeline table, and under it the claims idle for 10 minutes or more with their
    age, oldest first: an annotator at work touches theirs all the time, and a killed
    session's grows until `thumb release`."""
    idle = [claim for claim in claims if claim.age_seconds >= IDLE_CLAIM_SECONDS]
    if not idle:
        return Group(pipeline_table(stages))
    text = Text(f"claims idle for {IDLE_CLAIM_SECONDS // 60} min or more: {len(idle)}; "
                "oldest:", style="dim")
    for claim in idle[:CLAIMS_SHOWN]:
        text.append("\n")
        text.append(literal(claim.annotator, "bold"))
        text.append(" on ")
        text.append(literal(claim.image))
        text.append(f" (stage {claim.stage}, {claim.rated_captions} rated) for "
                    f"{_duration(claim.age_seconds)}")
    return Group(pipeline_table(stages), text)


def broken_text(items: list[BrokenImage]) -> Text:
    if not items:
        return Text("none", style="dim")
    text = Text()
    for number, item in enumerate(items):
        if number:
            text.append("\n")
        text.append(literal(item.key, "bold"))
        text.append(": ")
        text.append(literal(item.reason))
        text.append(" (flagged by ")
        text.append(literal(item.annotator))
        text.append(")")
    return text


def help_markdown(settings: MonitorSettings, keys: list[Binding]) -> str:
    """How each figure is defined, with the lead's settings, and the keys (with their ids,
    for a keymap)."""

    limits = settings.thresholds
    lines = [
        "# thumb monitor",
        "",
        f"Read only. The project is read every {settings.every:g} s (`r`: now; `p`: pause).",
        "",
        "## Alerts",
        "",
        f"- **rushed share** above {limits.rushed:.0%} (from {limits.min_captions} timed "
        "captions on)",
        f"- **drift** of P or R beyond ±{limits.drift:g}, overall or recent (from "
        f"{limits.min_captions} compared captions on); the same for two annotators who "
        "alone rated as many captions, named as a pair",
        f"- **gold accuracy** below {limits.gold:.0%} (from {limits.min_gold} gold "
        "answers on)",
        f"- **agreement**: α of P or R below {limits.agreement:g} (once it has a value)",
        "",
        "## Annotators",
        "",
        "- **s1, s2, fin**: captions rated completely at stage 1, in review (stage 2) and "
        "in resolution",
        "- **s/cap**: median seconds per caption over stage-1 and stage-2 ratings, each "
        "timed by its first pass: from opening the image (or the previous caption's first "
        "complete rating there) to its own first complete rating, so paging back through "
        "rated images changes nothing (identical captions rated as one share its time; an "
        "imported rating's own seconds count as they are; "
        "a rating made before the app stored first passes gets an even share of its "
        "image's time). Untimed ratings are left out.",
        f"- **rush**: share of those timed captions rated in under "
        f"{settings.rushed_below:g} s",
        "- **revisits** (the line under the table): time spent on images after every "
        "caption had its first complete rating, kept out of s/cap and rush; images still "
        "in progress or with older ratings are left out.",
        "- **gold** (only where the project has gold captions, `thumb gold import`): of "
        "the gold captions seeded into the annotator's stage-1 images that they rated "
        "completely, how many were right (P and R within the gold ranges, every penalty "
        "at most the gold amount) and the share, as `thumb status` and the report count "
        "it; *-* before their first gold answer. Gold answers count in no other figure.",
        "- **ΔP, ΔR**: on every caption the annotator rated (stage 1 or 2) that at least "
        f"{CONSENSUS_RATERS} annotators rated, their value minus the consensus (the median "
        "of its raters' values: one rater who drifts cannot move it, nor blame the others), "
        f"averaged; **rec**: the same over their last {settings.recent} such "
        "captions. Reviewers see the stage-1 scores, so their drift is smaller by design.",
        "- **rated by two only**: where only two annotators rated a caption, a "
        "difference cannot say which one drifted, so no one gets a Δ from it: the lines "
        "under the table give each such pair's difference (the first minus the second), "
        "by name.",
        "",
        "## Agreement so far",
        "",
        "Krippendorff's α (ordinal and interval) of P and R over the blind pairs: the two "
        "independent stage-1 ratings of each caption of an image chosen for double rating "
        "(`thumb assign`), as `thumb agreement` reads them; 90% BCa bootstrap CI "
        f"resampling images. Below {MIN_AGREEMENT_IMAGES} images rated twice it says "
        "*too few* instead of a number.",
    ]
    return "\n".join(lines) + keys_markdown(keys)


class MonitorScreen(KeyBarScreen):
    """The live dashboard; reads never write, and a busy database is retried."""

    CSS_PATH = "monitor.tcss"
    BINDINGS = [
        Binding("r", "refresh_now", "refresh", id="monitor-refresh"),
        Binding("p", "pause", "pause/resume", id="monitor-pause"),
        Binding("down,j", "scroll(1)", "scroll", key_display="↑↓", id="monitor-down"),
        Binding("up,k", "scroll(-1)", "scroll up", show=False, id="monitor-up"),
        Binding("pagedown,space", "page(1)", "page", key_display="PgUp PgDn",
                id="monitor-page-down"),
        Binding("pageup", "page(-1)", "page up", show=False, id="monitor-page-up"),
        Binding("home", "top", "top", show=False, id="monitor-top"),
        Binding("question_mark", "help", "help", key_display="?", id="monitor-help"),
        Binding("q", "quit_app", "quit", id="monitor-quit"),
    ]

    def __init__(self, engine: Engine, settings: MonitorSettings | None = None, *,
                 source: str = "", clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.clock = clock
        self.engine, self.settings = engine, settings or MonitorSettings()
        self.source = source  # the database as the lead named it (shown escaped)
        self.make_figures = FigureMaker(self.settings, clock)
        self.figures: Figures | None = None
        self.last_data: MonitorData | None = None  # the last reading (its thread's own)
        self.paused = False
        self.reading = False
        self.readings = 0  # completed readings (a test waits on this)
        self.message = ""

    def compose(self) -> ComposeResult:
        yield Static(id="monitor-title")
        yield Static(id="monitor-message")
        with VerticalScroll(id="monitor-body", can_focus=False):
            yield Static(id="monitor-alerts", classes="panel")
            yield Static(id="monitor-annotators", classes="panel")
            yield Static(id="monitor-agreement", classes="panel")
            yield Static(id="monitor-pipeline", classes="panel")
            yield Static(id="monitor-broken", classes="panel")
        yield KeyBar(self.shown_bindings)

    def on_mount(self) -> None:  # KeyBarScreen's on_mount runs too (Textual calls both)
        for panel, title in (("alerts", "ALERTS"), ("annotators", "annotators"),
                             ("agreement", "agreement so far (blind double ratings)"),
                             ("pipeline", "pipeline"), ("broken", "broken images")):
            self.query_one(f"#monitor-{panel}").border_title = title
        self.say("reading the project…")
        self.redraw()
        self.timer = self.set_interval(self.settings.every, self.tick)
        self.action_refresh_now()

    def tick(self) -> None:
        """The timer: read again unless paused."""
        if not self.paused:
            self.action_refresh_now()

    def say(self, message: str) -> None:
        self.message = message
        line = self.query_one("#monitor-message", Static)
        line.update(Text(message))
        line.display = bool(message)  # the line takes room only while it says something

    # ---- reading, in a thread so that the keys stay live ----

    def action_refresh_now(self) -> None:
        """Read the project now (one reading at a time)."""
        if self.reading:
            return
        self.reading = True
        self.run_worker(self._read, thread=True, group="monitor-read", exit_on_error=False)

    def _read(self) -> None:
        try:
            data = read_monitor(self.engine, self.last_data)
            self.last_data = data
            figures = self.make_figures(data)
        except MonitorBusy:
            self._back(self._failed, BUSY)
        except DBAPIError as exc:
            self._back(self._failed, "cannot read the database "
                                     f"({_first_line(exc.orig or exc)}); retrying")
        except Exception as exc:  # a live view says why and tries again
            self._back(self._failed, f"reading failed ({type(exc).__name__}: "
                                     f"{_first_line(exc)}); retrying")
        else:
            self._back(self._shown, figures)

    def _back(self, callback: Callable[..., None], *arguments: object) -> None:
        """Hand the result to the screen (nothing to do once the app has closed)."""
        with suppress(RuntimeError):  # the app stopped while the reading ran
            self.app.call_from_thread(callback, *arguments)

    def _failed(self, message: str) -> None:
        self.reading = False
        self.readings += 1
        self.say(message)

    def _shown(self, figures: Figures) -> None:
        self.reading = False
        self.readings += 1
        self.figures = figures
        self.say("paused: p resumes" if self.paused else "")
        self.redraw()

    # ---- drawing ----

    def redraw(self) -> None:
        figures = self.figures
        self.query_one("#monitor-title", Static).update(self.title_text())
        if figures is None:
            return
        alerts_panel = self.query_one("#monitor-alerts", Static)
        alerts_panel.border_title = f"ALERTS ({len(figures.alerts)})"
        alerts_panel.set_class(bool(figures.alerts), "-alerting")
        alerts_panel.update(alerts_text(figures.alerts))
        self.query_one("#monitor-annotators", Static).update(
            annotator_table(figures.annotators, self.settings, figures.gold_captions > 0,
                            figures.pairs))
        self.query_one("#monitor-agreement", Static).update(
            agreement_view(figures.agreement))
        self.query_one("#monitor-pipeline", Static).update(
            pipeline_view(figures.stages, figures.claims))
        self.query_one("#monitor-broken", Static).update(broken_text(figures.broken_images))

    def title_text(self) -> Text:
        text = Text("thumb monitor", style="bold")
        if self.source:
            text.append(" ")
            text.append(literal(self.source, "dim"))
        figures = self.figures
        if figures is not None:
            text.append(f"  {time.strftime('%H:%M:%S', time.localtime(figures.read_at))}",
                        style="dim")
            text.append(f" every {self.settings.every:g} s" if not self.paused
                        else " paused", style="dim")
            count = len(figures.alerts)
            text.append("  ")
            text.append(f"{count} alert{'' if count == 1 else 's'}",
                        style="bold reverse red" if count else "green")
        return text

    # ---- keys ----

    def action_pause(self) -> None:
        self.paused = not self.paused
        self.say("paused: p resumes" if self.paused else "resumed")
        self.redraw()
        if not self.paused:
            self.action_refresh_now()

    def action_scroll(self, lines: int) -> None:
        self.query_one("#monitor-body", VerticalScroll).scroll_relative(y=lines,
                                                                        animate=False)

    def action_page(self, pages: int) -> None:
        body = self.query_one("#monitor-body", VerticalScroll)
        body.scroll_relative(y=pages * max(1, body.size.height - 1), animate=False)

    def action_top(self) -> None:
        self.query_one("#monitor-body", VerticalScroll).scroll_home(animate=False)

    def action_help(self) -> None:
        from thumb_tui.screens.help import HelpScreen

        self.app.push_screen(HelpScreen(help_markdown(self.settings, self.shown_bindings)))

    def action_quit_app(self) -> None:
        self.app.exit()
