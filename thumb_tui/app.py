"""The Textual application: opens the annotation screen for one annotator."""

from __future__ import annotations

from textual.app import App

from storage.annotation import AnnotationSession
from thumb_tui.screens.annotate import AnnotateScreen


class ThumbApp(App[None]):
    TITLE = "thumb-tui"
    ENABLE_COMMAND_PALETTE = False

    def __init__(self, session: AnnotationSession, image_mode: str = "auto") -> None:
        super().__init__()
        self.session = session
        self.image_mode = image_mode

    def on_mount(self) -> None:
        self.push_screen(AnnotateScreen(self.session, self.image_mode))
