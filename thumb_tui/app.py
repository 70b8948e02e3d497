"""The Textual application: opens one work screen (rating, review, resolution, fluency)."""

from __future__ import annotations

import sys
from collections.abc import Mapping

from textual.app import App
from textual.screen import Screen

from storage.rating.rating_sessions import AnnotationSession
from thumb_tui.keymap import load_keymap
from thumb_tui.screens.annotate import AnnotateScreen
from thumb_tui.startup import first_screen_drawn


class NoTerminal(RuntimeError):
    """The screens were asked for where there is no terminal to show them on."""


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

    def run(self, *args: object, headless: bool = False, **kwargs: object) -> None:
        """Run the screens; NoTerminal where standard input or output is not a terminal
        (a pipe, a file, a script without one): the app would wait for keys that never
        come, writing escape codes into the file."""
        if not headless and not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise NoTerminal("the rating screens need a terminal, and standard input or "
                             "output is not one here (a pipe, a file or a script): run the "
                             "command in a terminal; `thumb next --annotator NAME` and "
                             "`thumb status` work anywhere")
        return super().run(*args, headless=headless, **kwargs)

    async def on_mount(self) -> None:
        await self.push_screen(self.first_screen)
        self.call_after_refresh(first_screen_drawn)

    async def action_quit(self) -> None:
        """Textual's own quit key (ctrl+q) leaves as the work screen's `q` does (the place
        saved, the claim on an untouched image given up), even under a dialog."""
        if not await self.run_action("quit_app", self.first_screen):
            self.exit()
