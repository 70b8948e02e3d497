"""The Textual application: opens one work screen (rating, review, resolution, fluency)."""

from __future__ import annotations

from collections.abc import Mapping

from textual.app import App
from textual.screen import Screen

from storage.rating_sessions import AnnotationSession
from thumb_tui.keymap import load_keymap
from thumb_tui.screens.annotate import AnnotateScreen
from thumb_tui.startup import first_screen_drawn


class ThumbApp(App[None]):
    TITLE = "thumb-tui"
    ENABLE_COMMAND_PALETTE = False

    def __init__(self, session: AnnotationSession | None = None, image_mode: str = "auto",
                 *, screen: Screen | None = None,
                 keymap: Mapping[str, str] | None = None) -> None:
        """`keymap`: binding id -> keys; by default the user's keymap file (KeymapError
        when it is unusable)."""
        super().__init__()
        self.keymap = dict(load_keymap() if keymap is None else keymap)
        self.set_keymap(self.keymap)
        if screen is None:
            if session is None:
                raise ValueError("give a session (stage-1 rating) or a screen")
            screen = AnnotateScreen(session, image_mode)
        self.first_screen = screen

    async def on_mount(self) -> None:
        await self.push_screen(self.first_screen)
        self.call_after_refresh(first_screen_drawn)
