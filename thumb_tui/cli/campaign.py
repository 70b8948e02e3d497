"""Campaign commands for the lead: `thumb monitor`, the live dashboard."""

from __future__ import annotations

from typing import Annotated

import typer

from thumb_tui.cli.common import run_app, state

app = typer.Typer()


@app.command("monitor")
def monitor_command(
    every: Annotated[float, typer.Option(
        "--every", min=0.1, help="Seconds between readings (r reads at once).")] = 2.0,
    rushed_below: Annotated[float, typer.Option(
        "--rushed-below", min=0.0,
        help="A caption rated in fewer seconds than this counts as rushed.")] = 3.0,
    recent: Annotated[int, typer.Option(
        "--recent", min=1,
        help="Recent drift: over each annotator's last N captions compared with others.")
    ] = 20,
    alert_rushed: Annotated[float, typer.Option(
        "--alert-rushed", min=0.0, max=1.0,
        help="Alert when an annotator's rushed share is above this (0-1).")] = 0.2,
    alert_drift: Annotated[float, typer.Option(
        "--alert-drift", min=0.0,
        help="Alert when an annotator's mean P or R differs from the consensus (the median) on "
             "captions three or more rated (or two annotators' from each other on captions "
             "only they rated) by more than this.")] = 0.5,
    alert_agreement: Annotated[float, typer.Option(
        "--alert-agreement", min=-1.0, max=1.0,
        help="Alert when Krippendorff's alpha of P or R on the blind double ratings is "
             "below this.")] = 0.4,
    alert_gold: Annotated[float, typer.Option(
        "--alert-gold", min=0.0, max=1.0,
        help="Alert when an annotator's share of gold captions rated right is below this "
             "(0-1; from 3 gold answers on).")] = 0.7,
) -> None:
    """Watch the campaign live (read only): the pipeline, each annotator's progress, pace,
    rushed share, gold accuracy (with gold captions) and drift, agreement so far, broken
    images, and alerts.

    Reads the project every --every seconds; keys: r refresh, p pause, arrows and PgUp/PgDn
    scroll, q quit. Pace and rushed share read stage-1 and stage-2 ratings, each caption
    timed by its first pass (paging back shows apart, as revisits); an alert on
    rushed share or drift needs 5 timed (compared) captions, one on gold accuracy 3 gold
    answers; agreement waits for 5 double-rated images rated twice."""
    from metrics.stats.campaign import Thresholds
    from thumb_tui.app import ThumbApp
    from thumb_tui.screens.monitor import MonitorScreen, MonitorSettings

    shown = state.require_existing()
    settings = MonitorSettings(every=every, rushed_below=rushed_below, recent=recent,
                               thresholds=Thresholds(rushed=alert_rushed, drift=alert_drift,
                                                     agreement=alert_agreement,
                                                     gold=alert_gold))
    run_app(ThumbApp(screen=MonitorScreen(state.existing_engine, settings, source=shown)))
