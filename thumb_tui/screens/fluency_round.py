"""The fluency round (THUMB section 2.1): a native English speaker checks the fluency of
captions neither of whose raters was native; the answer sets the final fluency penalty."""

from __future__ import annotations

from dataclasses import replace

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Static

from rubrics import printable
from storage.db.engine import DatabaseBusy
from storage.rating.project_queues import FluencyItem
from storage.rating.rating_sessions import FluencyRoundSession, fluency_value
from thumb_tui.screens.busy import busy
from thumb_tui.screens.fluency import CLEAR, FluencyScreen
from thumb_tui.screens.help import HelpScreen, help_markdown
from thumb_tui.widgets.image_view import open_in_viewer
from thumb_tui.widgets.keybar import KeyBar, KeyBarScreen


def penalty_text(rated: dict[str, object]) -> str:
    """`0.2 (spelling, grammar)`, or `none` for a rating without fluency errors."""
    amount = float(rated.get("fluency") or 0.0)
    if not amount:
        return "none"
    types = rated.get("fluency_type")
    return f"{amount:g}" + (f" ({printable(str(types), newlines=False)})" if types else "")


class FluencyRoundScreen(KeyBarScreen):
    CSS_PATH = "fluency_round.tcss"
    BINDINGS = [
        # the rubric names the penalty: see shown_bindings
        Binding("f", "add_error", "add fluency error", id="round-add"),
        Binding("x", "no_errors", "no fluency errors", id="round-fluent"),
        Binding("u", "undo", "undo", id="round-undo"),
        Binding("right_square_bracket,pagedown", "step(1)", "next", key_display="[ ]",
                id="round-next"),
        Binding("left_square_bracket,pageup", "step(-1)", "previous", show=False,
                id="round-previous"),
        Binding("o", "open_image", "open image", id="round-open-image"),
        Binding("question_mark", "help", "help", key_display="?", id="round-help"),
        Binding("q", "quit_app", "quit", id="round-quit"),
    ]

    def __init__(self, session: FluencyRoundSession, queue: list[FluencyItem]) -> None:
        super().__init__()
        self.session, self.queue = session, queue
        self.checker, self.rubric = session.checker, session.rubric
        self.position = 0
        self.verdicts: dict[int, tuple[float, str | None]] = {}
        self.label = printable(self.rubric.penalty("fluency").label, newlines=False)
        self.word = self.label.lower()

    @property
    def shown_bindings(self) -> list[Binding]:
        """The keys, with the rubric's name of the penalty checked."""
        words = {"round-add": f"add {self.word} error", "round-fluent": f"no {self.word} errors"}
        return [replace(b, description=words[b.id]) if b.id in words else b
                for b in super().shown_bindings]

    def compose(self) -> ComposeResult:
        with Vertical(id="round"):
            yield Static(id="round-title")
            yield Static(id="round-caption")
            yield Static(id="round-message")
        yield KeyBar(self.shown_bindings)

    def on_mount(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        title = self.query_one("#round-title", Static)
        if not self.queue:
            title.update(Text(f"No captions are waiting for the {self.word} round."))
            return
        item = self.queue[self.position]
        title.update(Text.assemble(
            (f"{self.label} round {self.position + 1}/{len(self.queue)}  ", "bold"),
            (f"{printable(self.checker, newlines=False)} (native speaker)", "dim")))
        body = Text(printable(item.text) + "\n\n", style="bold")
        for label, rated in (("stage 1", item.first), ("stage 2", item.second)):
            body.append(f"{label} {self.word} penalty: {penalty_text(rated)}\n")
        verdict = self.verdicts.get(item.caption_id)
        body.append("your verdict: " + ("-" if verdict is None else
                    f"{verdict[0]:g}" + (f" ({printable(verdict[1], newlines=False)})"
                                         if verdict[1] else " (no errors)")))
        self.query_one("#round-caption", Static).update(body)

    def save(self, fluency: float, types: str | None) -> bool:
        """Store the verdict on the caption and its twins; False (and why) if not saved."""
        item = self.queue[self.position]
        try:
            self.session.record(item, fluency, types)
        except DatabaseBusy as exc:
            self.query_one("#round-message", Static).update(
                Text(printable(busy("verdict", exc.holders))))
            return False
        caption_id = item.caption_id
        self.verdicts[caption_id] = (fluency, types)
        left = len(self.queue) - len(self.verdicts)
        last = self.position == len(self.queue) - 1
        self.say("saved; " + (f"{left} to check (] next)" if left and not last
                              else self.end_of_queue()))
        self.redraw()
        return True

    def action_add_error(self) -> None:
        if not self.queue:
            return
        item = self.queue[self.position]
        caption_id, text = item.caption_id, item.text
        current = self.verdicts.get(caption_id, (0.0, None))

        def chosen(result: tuple[str, float] | None) -> None:
            if result is None:
                return
            code, value = result
            if code == CLEAR:
                self.save(0.0, None)
                return
            types = [t for t in (current[1] or "").split(",") if t]
            amount, type_text = fluency_value([*types, code], [current[0], value])
            if self.save(min(amount, self.rubric.penalty("fluency").max_total), type_text):
                self.move_on()  # like x: a verdict moves on ([ goes back to add another)

        self.app.push_screen(FluencyScreen(self.rubric, text, current[1] or "none"), chosen)

    def action_no_errors(self) -> None:
        if self.queue and self.save(0.0, None):
            self.move_on()

    def move_on(self) -> None:
        """After a verdict, the next caption; the last one stays (its message stands)."""
        if self.position < len(self.queue) - 1:
            self.action_step(1)

    def action_undo(self) -> None:
        """Take back this session's last verdict and go back to its caption, whose
        verdict is then the one before it, or none."""
        try:
            undone = self.session.undo()
        except DatabaseBusy as exc:
            self.say(busy("undo", exc.holders))
            return
        position = next((n for n, item in enumerate(self.queue)
                         if not set(item.caption_ids).isdisjoint(undone)), None)
        if position is None:
            self.say("nothing to undo in this session")
            return
        self.position = position
        caption_id = self.queue[position].caption_id
        if (verdict := self.session.verdict(caption_id)) is None:
            self.verdicts.pop(caption_id, None)
        else:
            self.verdicts[caption_id] = verdict
        self.say(f"undid the verdict on {position + 1}/{len(self.queue)}")
        self.redraw()

    def action_step(self, step: int) -> None:
        """The next or previous caption; at either end of the queue it stops and says so
        (wrapping round hid that the round was over, and a verdict then went to the
        first caption again)."""
        if not self.queue:
            return
        target = self.position + step
        if 0 <= target < len(self.queue):
            self.position = target
            self.redraw()
        elif step > 0:
            self.say(self.end_of_queue())
        else:
            self.say("this is the first caption")

    def end_of_queue(self) -> str:
        """What the screen says at the last caption: what is left to check, if any."""
        left = [number + 1 for number, item in enumerate(self.queue)
                if item.caption_id not in self.verdicts]
        if not left:
            return f"all {len(self.queue)} captions checked: q quits"
        return (f"last caption; still to check: {', '.join(map(str, left[:8]))}"
                + (" …" if len(left) > 8 else "") + " ([ goes back)")

    def say(self, message: str) -> None:
        self.query_one("#round-message", Static).update(Text(message))

    def action_open_image(self) -> None:
        """The caption's image in the system viewer (fluency is judged on the text, but
        the image may explain a word)."""
        if self.queue:
            key, path = self.session.image_of(self.queue[self.position])
            self.say(open_in_viewer(path, key))

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(help_markdown(self.rubric, self.shown_bindings)))

    def action_quit_app(self) -> None:
        self.app.exit()
