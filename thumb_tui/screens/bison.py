"""BISON for annotators: a query caption and two images side by side (order randomised
once per item and stored); which image does the caption describe?"""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, Static

from rubrics import printable
from storage.bison import BisonSession, BisonView
from storage.db.engine import DatabaseBusy
from storage.imports.images import image_problem
from thumb_tui.screens.busy import busy
from thumb_tui.screens.confirm_flag import SIDES, ChooseBrokenScreen
from thumb_tui.screens.help import HelpScreen, keys_markdown
from thumb_tui.screens.rating import CAPTION_BINDINGS
from thumb_tui.widgets.caption_text import CaptionText
from thumb_tui.widgets.image_view import ImageView, open_in_viewer
from thumb_tui.widgets.keybar import KeyBar, KeyBarScreen

CHOICES = {"left": "left", "right": "right", "both": "both", "neither": "neither"}
BISON_HELP = """# BISON: which image does the caption describe?

Each item shows one caption and two images that are alike (Hu et al. 2019). Choose the
image the caption describes: **left** or **right**; **both** when it fits both equally
well, **neither** when it fits neither. The order of the two images is random and kept
for each item, and the time you take is recorded. An answer is saved at once and moves
on to the next item you have not answered; you can go back and change it."""


class BisonScreen(KeyBarScreen):
    CSS_PATH = "bison.tcss"
    BINDINGS = [
        Binding("l,left", "choose('left')", "left image", key_display="l ←", id="bison-left"),
        Binding("r,right", "choose('right')", "right image", key_display="r →",
                id="bison-right"),
        Binding("b", "choose('both')", "both", id="bison-both"),
        Binding("n", "choose('neither')", "neither", id="bison-neither"),
        Binding("x", "flag_broken", "broken image", id="bison-flag-broken"),
        Binding("right_square_bracket,pagedown", "step(1)", "item", key_display="[ ]",
                id="bison-next"),
        Binding("left_square_bracket,pageup", "step(-1)", "previous item", show=False,
                id="bison-previous"),
        # the rating screens' keys and ids: one keymap entry scrolls a long caption anywhere
        *(b for b in CAPTION_BINDINGS if b.action.startswith("scroll_text")),
        Binding("o", "open_images", "open", id="bison-open"),
        Binding("question_mark", "help", "help", key_display="?", id="bison-help"),
        Binding("q", "quit_app", "quit", id="bison-quit"),
    ]

    def __init__(self, session: BisonSession, image_mode: str) -> None:
        super().__init__()
        self.session, self.image_mode = session, image_mode
        self.index = session.first_unanswered()
        self.answered = session.answered()  # over all sessions: progress survives restarts
        self.view: BisonView | None = None
        self.shown_at = time.monotonic()

    def compose(self) -> ComposeResult:
        with Vertical(id="bison"):
            yield Static(id="bison-title")
            yield CaptionText(id="bison-query")
            with Horizontal(id="bison-images"):
                with Vertical(classes="bison-side"):
                    yield Label("left (l)", classes="bison-label")
                    yield ImageView(self.image_mode, id="bison-left-image")
                with Vertical(classes="bison-side"):
                    yield Label("right (r)", classes="bison-label")
                    yield ImageView(self.image_mode, id="bison-right-image")
            yield Static(id="bison-message")
        yield KeyBar(self.BINDINGS)

    def on_mount(self) -> None:
        if not self.session.item_ids:
            self.query_one("#bison-title", Static).update(
                "No BISON items: import some with `thumb bison import FILE`.")
            return
        self.show()

    def say(self, message: str) -> None:
        """Show a message as literal text (it may quote stored image keys and paths)."""
        self.query_one("#bison-message", Static).update(Text(printable(message,
                                                                       newlines=False)))

    def show(self) -> None:
        try:
            self.view = self.session.view(self.index)
        except DatabaseBusy:
            self.view = None  # no answer goes to the item shown before
            self.say("database busy, the item did not open — press the key again")
            return
        self.shown_at = time.monotonic()
        view = self.view
        total = len(self.session.item_ids)
        self.query_one("#bison-title", Static).update(Text.assemble(
            (f"BISON item {self.index + 1}/{total}  ", "bold"),
            (f"answer: {view.answer or '-'}  ", "dim"),
            ("all done" if len(self.answered) == total else
             f"{len(self.answered)}/{total} answered", "")))
        query = self.query_one("#bison-query", CaptionText)
        query.update(Text(f"Which image does this caption describe?\n{printable(view.query)}",
                          style="bold"))
        query.scroll_home(animate=False)
        self.query_one("#bison-left-image", ImageView).show(view.left[2], view.left[1])
        self.query_one("#bison-right-image", ImageView).show(view.right[2], view.right[1])

    def action_choose(self, choice: str) -> None:
        """Save the answer and go to the next unanswered item; when none is left, stay
        and say that all are done."""
        if self.view is None:
            return
        try:
            self.session.answer(self.view, CHOICES[choice], time.monotonic() - self.shown_at)
        except DatabaseBusy:
            self.say(busy("answer"))
            return
        self.answered.add(self.view.item_id)
        ids = self.session.item_ids
        after = [*range(self.index + 1, len(ids)), *range(self.index)]
        following = next((i for i in after if ids[i] not in self.answered), None)
        if following is None:
            self.say(f"saved: {choice}; all done: {len(ids)}/{len(ids)} answered; q quits")
        else:
            self.index = following
            self.say(f"saved: {choice}")
        self.show()

    def action_flag_broken(self) -> None:
        """Ask which image is broken (each listed with what the file check found), flag
        the one the annotator picks, or both, and move on to the next item."""
        if self.view is None:
            return
        view = self.view
        images = dict(zip(SIDES, (view.left, view.right), strict=True))
        problems = {side: image_problem(path) if path else "no image file"
                    for side, (_, _, path) in images.items()}

        def chosen(sides: tuple[str, ...] | None) -> None:
            if sides is None:
                self.say("nothing flagged")
                return
            self.flag_broken(view, {images[side][0]: problems[side] or
                                    "the annotator sees no usable image" for side in sides})

        self.app.push_screen(ChooseBrokenScreen(
            {side: (key, problems[side]) for side, (_, key, _) in images.items()},
            "A flagged image leaves your rating queue, review and the report (for everyone) "
            "until the lead's `thumb image unflag` takes it back."), chosen)

    def flag_broken(self, view: BisonView, reasons: dict[int, str]) -> None:
        sides = (view.left, view.right)
        try:
            self.session.flag_broken(view, reasons)
        except DatabaseBusy:
            self.say(busy("flag"))
            return
        keys = [key for image_id, key, _ in sides if image_id in reasons]
        if self.index < len(self.session.item_ids) - 1:
            self.index += 1
        self.show()
        self.query_one("#bison-message", Static).update(Text(printable(
            f"flagged {' and '.join(keys)} as broken "
            f"({'; '.join(dict.fromkeys(reasons.values()))})",
            newlines=False)))

    def action_scroll_text(self, step: int) -> None:
        """Scroll the caption when it is longer than its box."""
        query = self.query_one("#bison-query", CaptionText)
        if said := query.scrolled(step):
            self.say(said)

    def action_step(self, step: int) -> None:
        """The next or previous item; stops at either end and says so."""
        if not self.session.item_ids:
            return
        target = self.index + step
        if not 0 <= target < len(self.session.item_ids):
            self.say("this is the last item" if step > 0 else "this is the first item")
            return
        self.index = target
        self.show()

    def action_open_images(self) -> None:
        """Both images in the system viewer (left first)."""
        if self.view is not None:
            self.say("; ".join(open_in_viewer(path, key) for _, key, path in
                               (self.view.left, self.view.right)))

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(BISON_HELP + keys_markdown(self.shown_bindings)))

    def action_quit_app(self) -> None:
        self.app.exit()
