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
from storage.db.engine import DatabaseBusy
from storage.imports.images import broken_reason
from storage.match import HOLD_HEARTBEAT_S, MatchSession
from storage.rating.project_queues import ProtocolError
from thumb_tui.screens.busy import busy
from thumb_tui.screens.confirm_flag import ConfirmFlagScreen
from thumb_tui.screens.help import HelpScreen, code, keys_markdown
from thumb_tui.screens.rating import CAPTION_BINDINGS
from thumb_tui.widgets.caption_text import CaptionText
from thumb_tui.widgets.image_view import ImageView, open_in_viewer
from thumb_tui.widgets.keybar import KeyBar, KeyBarScreen, display_keys

QUESTION = "Does this caption describe the image?"
ANSWER_IDS = tuple(f"match-answer-{a.value}" for a in ANSWERS)
DEFAULT_ANSWER_KEYS = "1-4"  # how the key bar shows the answer keys while they are the digits
FLAG_NOTE = ("No pair on it is asked or decided, for anyone, until the lead's "
             "`thumb image unflag` takes it back.")
FLAGGED = "image flagged as broken: this pair is not asked"


def match_help_markdown(keys: list[Binding]) -> str:
    """The four answers with definitions and examples, what happens to them, and the keys
    as they are bound (after the user's keymap), each with its id."""
    key = {b.id: code(display_keys(b.key)) for b in keys if b.id}
    lines = ["# Match verification", "", f"**{QUESTION}** Look at the whole image "
             f"({key['match-open-image']} opens it full size) and read the caption; answer "
             "how well it describes the image.", ""]
    for answer, answer_id in zip(ANSWERS, ANSWER_IDS, strict=True):
        lines += [f"## {answer.value} · {answer.label} (key {key[answer_id]})", "",
                  answer.definition, "", f"*Example:* {answer.example}", ""]
    lines += ["## What happens to your answers", "",
              f"- Each answer is saved the moment you press its key; {key['match-undo']} "
              "undoes your last one. Closing the app (or losing the connection) loses "
              "nothing: you come back to the same pair.",
              "- Pairs come in batches. A few pairs in every batch have a known answer and "
              "check that answers are careful; a wrong answer there sends the batch for "
              "checking.",
              "- Time per pair is recorded; there is no time limit, but very fast answers "
              "are reviewed.",
              f"- An image that cannot be seen (the panel says why) is not answered: "
              f"{key['match-flag-broken']} flags it as broken. {FLAG_NOTE}"]
    return "\n".join(lines) + keys_markdown(keys)


def _answer_bindings() -> list[Binding]:
    """One key per answer, each with its id; the key bar shows them as one entry
    (`MatchScreen.key_bar_bindings`), the help each with its answer."""
    return [Binding(str(a.value), f"answer({a.value})", f"answer {a.value} · {a.label}",
                    show=False, id=answer_id)
            for a, answer_id in zip(ANSWERS, ANSWER_IDS, strict=True)]


def answer_keys(bindings: list[Binding]) -> str:
    """How the key bar shows the four answer keys: `1-4`, or after a keymap each key as
    bound, in answer order (`y 2 3 4`)."""
    keys = [display_keys(b.key) for b in bindings if b.id in ANSWER_IDS]
    digits = [str(a.value) for a in ANSWERS]
    return DEFAULT_ANSWER_KEYS if keys == digits else " ".join(keys)


class MatchScreen(KeyBarScreen):
    CSS_PATH = "match.tcss"
    BINDINGS = [
        *_answer_bindings(),
        Binding("down,j", "move(1)", "pair", key_display="↑↓", id="match-next"),
        Binding("up,k", "move(-1)", "previous pair", show=False, id="match-previous"),
        # the rating screens' keys and ids: one keymap entry scrolls a long caption anywhere
        *(b for b in CAPTION_BINDINGS if b.action.startswith("scroll_text")),
        Binding("g", "next_unanswered", "next unanswered", id="match-next-unanswered"),
        Binding("u", "undo", "undo", id="match-undo"),
        Binding("o", "open_image", "open", id="match-open-image"),
        Binding("x", "flag_broken", "broken", id="match-flag-broken"),
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
                    yield CaptionText(id="match-caption")
                    yield Static(id="match-scale")
            yield Static(id="match-message")
        yield KeyBar(self.key_bar_bindings())

    def key_bar_bindings(self) -> list[Binding]:
        """The screen's keys as bound, the four answer keys as one entry (`1-4 answer`)."""
        bindings = self.shown_bindings
        answers = ",".join(b.key for b in bindings if b.id in ANSWER_IDS)
        return [Binding(answers, "", "answer", key_display=answer_keys(bindings)),
                *bindings]

    def key_of(self, binding_id: str) -> str:
        """The keys bound to `binding_id` as the key bar writes them (after a keymap)."""
        return next(display_keys(b.key) for b in self.shown_bindings if b.id == binding_id)

    def on_mount(self) -> None:
        self.set_interval(HOLD_HEARTBEAT_S, self.keep_alive)
        if not self.session.items:
            self.query_one("#match-title", Static).update(
                "No batch to verify: none is left that needs you.")
            return
        self.show(self.index)
        if self.session.batch_complete:
            self.say(f"every batch is done, thank you ({self.key_of('match-undo')} undoes "
                     f"your last answer; {self.key_of('match-quit')} quits)")

    def on_resize(self) -> None:
        self.call_after_refresh(self.fit_caption)

    # -- display ----------------------------------------------------------------------------

    def show(self, index: int) -> None:
        self.index = index
        self.session.show(index)
        view = self.session.items[index]
        self.query_one(ImageView).show(view.image_path, view.image_key)
        caption = self.query_one("#match-caption", CaptionText)
        caption.update(Text(printable(view.caption), style="bold"))
        caption.scroll_home(animate=False)
        self.query_one("#match-scale", Static).update(
            Text(FLAGGED, style="bold") if view.flagged else self.answer_scale(view.answer))
        self.update_title()
        self.call_after_refresh(self.fit_caption)

    def answer_scale(self, chosen_value: int | None) -> Text:
        """The four answers with their keys, the one given marked."""
        scale = Text()
        for answer, answer_id in zip(ANSWERS, ANSWER_IDS, strict=True):
            chosen = answer.value == chosen_value
            scale.append(f" {printable(self.key_of(answer_id), newlines=False)} ",
                         style="bold reverse" if chosen else "bold")
            scale.append(f" {answer.label}" + ("  ◀ your answer" if chosen else "") + "\n",
                         style="bold" if chosen else "")
        return scale

    def fit_caption(self) -> None:
        """Cap the caption's box at the room the question and the answer scale leave, so
        the scale stays on screen; the rest of a long caption scrolls. Deferred to after a
        refresh: it reads the rendered heights."""
        room = self.query_one("#match-right").content_region.height
        caption = self.query_one("#match-caption", CaptionText)
        caption.limit_height(room - caption.styles.margin.height - sum(
            self.query_one(f"#match-{part}").outer_size.height
            for part in ("question", "scale")))

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
        except DatabaseBusy:
            self.say(busy("answer"))
            return
        if following is not None:
            self.say(f"saved: {answer_label(value)}")
            self.show(following)
        else:
            self.open_next_batch(f"saved: {answer_label(value)} · ")

    def open_next_batch(self, said: str) -> None:
        """The batch is complete: claim the next one and show it, or say why not (after
        `said`, what the key that got here did)."""
        try:
            claimed = self.session.claim_next()
        except ProtocolError as exc:
            self.say(f"{said}no next batch here: {exc}")
            self.show(self.index)
            return
        except DatabaseBusy:
            self.say(f"{said}database busy, the next batch did not open — press "
                     f"{self.key_of('match-next-unanswered')} to try again")
            self.show(self.index)
            return
        if claimed is not None:
            self.say(f"{said}batch complete; here is the next one")
            self.show(self.session.focus)
        else:
            self.say(f"{said}every batch is done, thank you "
                     f"({self.key_of('match-quit')} quits)")
            self.show(self.index)

    def action_move(self, step: int) -> None:
        if self.session.items:
            self.show(min(max(self.index + step, 0), len(self.session.items) - 1))

    def action_next_unanswered(self) -> None:
        if not self.session.items:
            return
        following = self.session.next_unanswered(self.index)
        if following is None:
            self.open_next_batch("every pair of this batch is answered · ")
        else:
            self.show(following)

    def action_scroll_text(self, step: int) -> None:
        """Scroll the caption when it is longer than its box."""
        caption = self.query_one("#match-caption", CaptionText)
        if said := caption.scrolled(step):
            self.say(said)

    def action_undo(self) -> None:
        try:
            index = self.session.undo()
        except ProtocolError as exc:
            self.say(f"cannot undo: {exc}")
            return
        except DatabaseBusy:
            self.say(busy("undo"))
            return
        if index is None:
            self.say("nothing to undo")
            return
        self.show(index)
        self.say("undid your last answer")

    def action_flag_broken(self) -> None:
        """Ask, then flag the pair's image as broken (the reason the file check gives,
        else the annotator's word) and move on to the next pair to answer."""
        if not self.session.items:
            return
        index, view = self.index, self.session.items[self.index]
        name = printable(view.image_key, newlines=False)
        if view.flagged:
            self.say(f"{name} is flagged as broken already")
            return
        reason = broken_reason(view.image_path)

        def answered(flag: bool | None) -> None:
            if flag:  # (the dialog is modal: the same pair is still shown)
                self.flag_broken(index, reason)
            else:
                self.say(f"{name} is not flagged")

        self.app.push_screen(ConfirmFlagScreen(view.image_key, reason, FLAG_NOTE), answered)

    def flag_broken(self, index: int, reason: str) -> None:
        name = self.session.items[index].image_key
        try:
            following = self.session.flag_broken(index, reason)
        except ProtocolError as exc:
            self.say(f"not flagged: {exc}")
            return
        except DatabaseBusy:
            self.say(busy("flag"))
            return
        said = f"flagged {name} as broken ({reason}) · "
        if following is None:
            self.open_next_batch(said)
        else:
            self.show(following)
            self.say(f"{said}moved on")

    def action_open_image(self) -> None:
        if self.session.items:
            view = self.session.items[self.index]
            self.say(open_in_viewer(view.image_path, view.image_key))

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(match_help_markdown(self.shown_bindings)))

    def action_quit_app(self) -> None:
        self.app.exit()
