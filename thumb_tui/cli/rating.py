"""Rating commands: the screens of stage 1, stage 2, resolution and the fluency round."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from thumb_tui.cli.common import (
    AnnotatorOption,
    ImageModeOption,
    NativeOption,
    image_mode,
    known_annotator,
    protocol_refusals,
    run_app,
    state,
    stop_if_empty,
)
from thumb_tui.startup import collector_held

if TYPE_CHECKING:
    from storage.models import Stage
    from storage.rating.rating_sessions import AnnotationSession

app = typer.Typer()


def _rating_session(annotator: str | None, stage: Stage, native: bool | None) -> AnnotationSession:
    """The annotator's session at stage 1 or 2 (with `--native`/`--non-native` recorded
    first); ends the command with the reason when the protocol refuses or there is nothing
    to rate."""
    from storage.models import Stage
    from storage.rating.annotators import register_annotator
    from storage.rating.dashboard import nothing_open_at_stage_one
    from storage.rating.rating_sessions import AnnotationSession
    from thumb_tui.screens.annotate import EMPTY_QUEUE

    name = known_annotator(annotator)
    with protocol_refusals():
        if native is not None:  # said on the command line: recorded even with nothing to rate
            register_annotator(state.existing_engine, name, native)
        session = AnnotationSession(state.existing_engine, name, stage=stage,
                                    native_english=native)
    if stage == Stage.FIRST and not session.images:  # say why, in counts
        stop_if_empty(session.images, nothing_open_at_stage_one(state.existing_engine, name))
    stop_if_empty(session.images, EMPTY_QUEUE[stage])
    return session


@app.command("annotate")
@collector_held()
def annotate_command(
    annotator: AnnotatorOption = None,
    image_mode_name: ImageModeOption = "auto",
    native: NativeOption = None,
) -> None:
    """Rate captions (THUMB stage 1): one image at a time, all of its captions."""
    from storage.models import Stage
    from thumb_tui.app import ThumbApp

    mode = image_mode(image_mode_name)
    session = _rating_session(annotator, Stage.FIRST, native)
    run_app(ThumbApp(session, mode))


@app.command("review")
@collector_held()
def review_command(
    annotator: AnnotatorOption = None,
    image_mode_name: ImageModeOption = "auto",
    native: NativeOption = None,
) -> None:
    """THUMB stage 2: check and modify another annotator's stage-1 scores."""
    from storage.models import Stage
    from thumb_tui.app import ThumbApp
    from thumb_tui.screens.annotate import ReviewScreen

    mode = image_mode(image_mode_name)
    session = _rating_session(annotator, Stage.SECOND, native)
    run_app(ThumbApp(screen=ReviewScreen(session, mode)))


@app.command("resolve")
@collector_held()
def resolve_command(
    annotator: AnnotatorOption = None,
    image_mode_name: ImageModeOption = "auto",
) -> None:
    """Settle captions whose stage-1 and stage-2 values differ, worst first."""
    from storage.rating.rating_sessions import ResolutionSession
    from thumb_tui.app import ThumbApp
    from thumb_tui.screens.resolve import ResolveScreen

    mode = image_mode(image_mode_name)
    session = ResolutionSession(state.existing_engine, known_annotator(annotator))
    queue = session.queue()
    resolved = session.resolved_count()
    stop_if_empty(queue, f"All done: the {resolved} disagreements open to you are resolved."
                  if resolved else "Nothing for you to resolve: no caption's stage-1 and "
                  "stage-2 values differ without a resolution, on an image you neither "
                  "rated nor reviewed.")
    run_app(ThumbApp(screen=ResolveScreen(session, queue, mode, resolved_before=resolved)))


@app.command("fluency-round")
@collector_held()
def fluency_round_command(
    annotator: Annotated[str | None, typer.Option(
        "--annotator", help="A native English speaker (on a PostgreSQL team database: "
                            "your login role, the default).")] = None,
) -> None:
    """Check the fluency of captions neither of whose raters was a native speaker."""
    from storage.rating.rating_sessions import FluencyRoundSession
    from thumb_tui.app import ThumbApp
    from thumb_tui.screens.fluency_round import FluencyRoundScreen

    with protocol_refusals():
        session = FluencyRoundSession(state.existing_engine, known_annotator(annotator))
    queue = session.queue()
    stop_if_empty(queue, "No captions are waiting for the fluency round.")
    run_app(ThumbApp(screen=FluencyRoundScreen(session, queue)))
