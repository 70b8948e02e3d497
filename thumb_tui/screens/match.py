"""Match verification for annotators: one image and one caption; does the caption describe
the image? Four answers, committed at once. Never says which model proposed the pair or
whether it is a gold item."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import ProgressBar, Static

from rubrics import printable
from rubrics.match import ANSWERS, answer_label
from storage.match import HOLD_HEARTBEAT_S, MatchSession
from storage.project_queues import ProtocolError
from thumb_tui.screens.help import HelpScreen
from thumb_tui.widgets.image_view import ImageView, open_in_viewer
from thumb_tui.widgets.keybar import KeyBar, KeyBarScreen

QUESTION = "Does this caption describe the image?"


def match_help_markdown(keys: list[Binding]) -> str:
    """The four answers with definitions and examples, what happens to them, the keys."""
    lines = ["# Match verification", "", f"**{QUESTION}** Look at the whole image (`o` "
             "opens it full size) and read the caption; answer how well it describes the "
             "image.", ""]
    for answer in ANSWERS:
        lines += [f"## {answer.value} · {answer.label}", "", answer.definition, "",
                  f"*Example:* {answer.example}", ""]
    lines += ["## What happens to your answers", "",
              "- Each answer is saved the moment you press the key; `u` undoes your last "
              "one. Closing the app (or losing the connection) loses nothing: you come back "
              "to the same pair.",
              "- Pairs come in batches. A few pairs in every batch have a known answer and "
              "check that answers are careful; a wrong answer there sends the batch for "
              "checking.",
              "- Time per pair is recorded; there is no time limit, but very fast answers "
              "are reviewed.", "", "## Keys", ""]
    lines += [f"- `{b.key_display or b.key}`: {b.description}" for b in keys if b.show]
    return "\n".join(lines)


def _answer_bindings() -> list[Binding]:
    return [Binding(str(a.value), f"answer({a.value})", "answer", key_display="1-4",
                    show=a.value == 1, id=f"match-answer-{a.value}") for a in ANSWERS]


class MatchScreen(KeyBarScreen):
    CSS_PATH = "match.tcss"
    BINDINGS = [
        *_answer_bindings(),
        Binding("down,j", "move(1)", "pair", key_display="↑↓", id="match-next"),
        Binding("up,k", "move(-1)", "previous pair", show=False, id="match-previous"),
        Binding("g", "next_unanswered", "next unanswered", id="match-next-unanswered"),
        Binding("u", "undo", "undo", id="match-undo"),
        Binding("o", "open_image", "open", id="match-open-image"),
        Binding("question_mark", "help", "help", key_display="?", id="match-help"),
        Binding("q", "quit_app", "quit", id="match-quit"),
    ]

    def __init__(self, session: MatchSession, image_mode: str) -> None:
        super().__init__()
        self.session, self.image_mode = session, image_mode
        self.index = session.focus if session.items else 0

    def compose(self) -> ComposeResult:
        with Vertical(id="match"):
            yield Static(id="match-title")
            with Horizontal(id="match-progress-row"):
                yield ProgressBar(id="match-progress", show_eta=False, show_percentage=False)
                yield Static(id="match-counts")
            with Horizontal(id="match-body"):
                yield ImageView(self.image_mode, id="match-image")
                with Vertical(id="match-right"):
                    yield Static(QUESTION, id="match-question")
                    yield Static(id="match-caption")
                    yield Static(id="match-scale")
            yield Static(id="match-message")
        yield KeyBar(self.BINDINGS)

    def on_mount(self) -> None:
        self.set_interval(HOLD_HEARTBEAT_S, self.keep_alive)
        if not self.session.items:
            self.query_one("#match-title", Static).update(
                "No batch to verify: none is left that needs you.")
            return
        self.show(self.index)
        if self.session.batch_complete:
            self.say("every batch is done, thank you (u undoes your last answer; q quits)")

    # -- display ----------------------------------------------------------------------------

    def show(self, index: int) -> None:
        self.index = index
        self.session.show(index)
        view = self.session.items[index]
        self.query_one(ImageView).show(view.image_path, view.image_key)
        self.query_one("#match-caption", Static).update(Text(printable(view.caption),
                                                              style="bold"))
        scale = Text()
        for answer in ANSWERS:
            chosen = answer.value == view.answer
            scale.append(f" {answer.value} ", style="bold reverse" if chosen else "bold")
            scale.append(f" {answer.label}" + ("  ◀ your answer" if chosen else "") + "\n",
                         style="bold" if chosen else "")
        self.query_one("#match-scale", Static).update(scale)
        self.update_title()

    def update_title(self) -> None:
        progress = self.session.progress()
        title = Text()
        title.append(f"Batch {progress.batch_number} · pair {self.index + 1}/"
                     f"{progress.batch_total}  ", style="bold")
        title.append(printable(self.session.annotator, newlines=False), style="dim")
        self.query_one("#match-title", Static).update(title)
        self.query_one("#match-counts", Static).update(
            f"batch {progress.batch_done}/{progress.batch_total} · "
            f"all {progress.answered}/{progress.needed}")
        self.query_one(ProgressBar).update(total=max(progress.batch_total, 1),
                                           progress=progress.batch_done)

    def say(self, message: str) -> None:
        self.query_one("#match-message", Static).update(Text(printable(message,
                                                                       newlines=False)))

    def keep_alive(self) -> None:
        """Tell other processes that this annotator still verifies here; say so when
        another process has taken the work over."""
        try:
            self.session.keep_alive()
        except ProtocolError as exc:
            self.say(str(exc))

    # -- actions ----------------------------------------------------------------------------

    def action_answer(self, value: int) -> None:
        if not self.session.items:
            return
        try:
            following = self.session.answer(self.index, value)
        except ProtocolError as exc:
            self.say(f"not saved: {exc}")
            return
        if following is not None:
            self.say(f"saved: {answer_label(value)}")
            self.show(following)
            return
        try:
            claimed = self.session.claim_next()
        except ProtocolError as exc:
            self.say(f"saved: {answer_label(value)} · no next batch here: {exc}")
            self.show(self.index)
            return
        if claimed is not None:
            self.say(f"saved: {answer_label(value)} · batch complete; here is the next one")
            self.show(self.session.focus)
        else:
            self.say(f"saved: {answer_label(value)} · every batch is done, thank you "
                     "(q quits)")
            self.show(self.index)

    def action_move(self, step: int) -> None:
        if self.session.items:
            self.show(min(max(self.index + step, 0), len(self.session.items) - 1))

    def action_next_unanswered(self) -> None:
        if not self.session.items:
            return
        following = self.session.next_unanswered(self.index)
        if following is None:
            self.say("every pair of this batch is answered")
        else:
            self.show(following)

    def action_undo(self) -> None:
        try:
            index = self.session.undo()
        except ProtocolError as exc:
            self.say(f"cannot undo: {exc}")
            return
        if index is None:
            self.say("nothing to undo")
            return
        self.show(index)
        self.say("undid your last answer")

    def action_open_image(self) -> None:
        if self.session.items:
            view = self.session.items[self.index]
            self.say(open_in_viewer(view.image_path, view.image_key))

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(match_help_markdown(self.BINDINGS)))

    def action_quit_app(self) -> None:
        self.app.exit()
