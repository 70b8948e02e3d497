"""Stage-1 rating: one image at a time, every caption of it rated by one annotator."""

from __future__ import annotations

from contextlib import suppress
from dataclasses import replace
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import ProgressBar, Static

from rubrics import PENALTY_KEYS, SCORE_KEYS, ErrorType, Rubric, printable
from storage.db import DatabaseBusy
from storage.images import broken_reason
from storage.models import Stage
from storage.protocol import ProtocolError, is_started
from storage.rating_sessions import AnnotationSession, CaptionGroup, ImageItem, fluency_value
from thumb_tui.screens.busy import busy
from thumb_tui.screens.entry import EntryScreen, check_penalty, check_score, scale_text
from thumb_tui.screens.fluency import CLEAR, FluencyScreen
from thumb_tui.screens.help import HelpScreen, help_markdown
from thumb_tui.screens.note import NoteScreen
from thumb_tui.widgets.caption_card import CaptionCard
from thumb_tui.widgets.caption_text import CaptionText
from thumb_tui.widgets.image_view import ImageView, open_in_viewer
from thumb_tui.widgets.keybar import KeyBar, KeyBarScreen, key_label
from thumb_tui.widgets.rubric_panel import RubricPanel

PENALTY_ACTIONS = (*PENALTY_KEYS, "note")


EMPTY_QUEUE = {
    Stage.FIRST: "No image is open to you at stage 1: the project has none, or every one was "
                 "started by someone else (import with `thumb import FILE`).",
    Stage.SECOND: "Nothing to review: no image has a complete stage-1 rating by someone else "
                  "that nobody else reviews.",
    Stage.FINAL: "Nothing to resolve.",
}


def next_missing(group: CaptionGroup) -> str | None:
    """The first of P, R that is still unscored in the group."""
    return next((d for d in SCORE_KEYS if group.values[d] is None), None)


def field_labels(rubric: Rubric) -> dict[str, str]:
    """What a message calls each rating field: P, R, fluency, … for THUMB."""
    labels = {d.key: d.short for d in rubric.dimensions}
    for penalty in rubric.penalties:
        labels[penalty.key] = labels[f"{penalty.key}_type"] = penalty.label.lower()
    return labels


def digit_scores(rubric: Rubric) -> bool:
    """Whether the digit keys score this rubric: every level of its dimensions is one digit
    0-9 (a scale of up to ten levels). Otherwise the score is typed (`s`)."""
    return all(d.min >= 0 and d.max <= 9 for d in rubric.dimensions)


def penalty_word(rubric: Rubric, key: str) -> str:
    """What the screens call a penalty in running text: its label, e.g. `fluency`."""
    return printable(rubric.penalty(key).label.lower(), newlines=False)


def rubric_bindings(bindings: list[Binding], rubric: Rubric) -> list[Binding]:
    """The bindings as this rubric names them: the digit keys span its scale (or, for a
    scale the digits cannot cover, `s` types a score), the dimension keys carry its short
    labels and the penalty keys its penalties' labels; a penalty key it has no penalty for
    is left out."""
    first, second = (d.short for d in rubric.dimensions)
    low = min(d.min for d in rubric.dimensions)
    high = max(d.max for d in rubric.dimensions)
    digits = digit_scores(rubric)
    shown = []
    for binding in bindings:
        if binding.action in PENALTY_KEYS:
            if not rubric.has_penalty(binding.action):
                continue
            # the label's first word: key bar entries are one word (THUMB: `inclusive`)
            word = penalty_word(rubric, binding.action).split(" ")[0]
            binding = replace(binding, description=word)
        elif binding.id and binding.id.startswith("score-"):
            level = int(binding.id.removeprefix("score-"))
            if not digits or not low <= level <= high:
                continue
            # the key bar shows the range once; the help lists each key by its id
            binding = (replace(binding, description=f"score {first}/{second}",
                               key_display=f"{low}-{high}", show=True) if level == low
                       else replace(binding, description=f"score {level}", show=False))
        elif binding.id == "type-score":
            if digits:
                continue
            binding = replace(binding, description=f"type a score {first}/{second}", show=True)
        elif binding.id == "toggle-dimension":
            binding = replace(binding, description=f"{first}/{second}")
        shown.append(binding)
    return shown


def image_name(image: ImageItem) -> str:
    """What the screens call an image: its file name, else its key (printable)."""
    return printable(Path(image.path).name if image.path else image.key, newlines=False)


def _score_bindings() -> list[Binding]:
    """The digit keys 0-9 (ids `score-0` … `score-9`; a rubric's screen shows those on its
    scale) and `s`, which types a score on a scale the digits cannot cover."""
    return [
        *(Binding(str(n), f"score({n})", "score", key_display=str(n), show=False,
                  id=f"score-{n}") for n in range(10)),
        Binding("s", "type_score", "type a score", show=False, id="type-score"),
    ]


class AnnotateScreen(KeyBarScreen):
    CSS_PATH = "annotate.tcss"
    STATUS_WORDS = ("complete", "to rate")  # the title's word for a finished image, or not
    BINDINGS = [
        *_score_bindings(),
        Binding("left,right,tab", "toggle_dimension", "P/R", key_display="←→",
                id="toggle-dimension"),
        Binding("down,j", "move(1)", "caption", key_display="↑↓", id="next-caption"),
        Binding("up,k", "move(-1)", "previous caption", show=False, id="previous-caption"),
        Binding("shift+down,J", "scroll_text(1)", "scroll text", key_display="⇧↑↓",
                id="scroll-text-down"),
        Binding("shift+up,K", "scroll_text(-1)", "scroll text up", show=False,
                id="scroll-text-up"),
        # the penalty keys' descriptions are the rubric's labels (rubric_bindings)
        Binding("f", "fluency", "fluency", id="fluency"),
        Binding("c", "conciseness", "concise", id="conciseness"),
        Binding("i", "inclusive", "inclusive", id="inclusive"),
        Binding("n", "note", "note", id="note"),
        Binding("u", "undo", "undo", id="undo"),
        Binding("right_square_bracket,pagedown", "image(1)", "image", key_display="[ ]",
                id="next-image"),
        Binding("left_square_bracket,pageup", "image(-1)", "previous image", show=False,
                id="previous-image"),
        Binding("g", "next_unrated", "next unrated", id="next-unrated"),
        Binding("o", "open_image", "open", id="open-image"),
        Binding("x", "flag_broken", "broken image", id="flag-broken"),
        Binding("question_mark", "help", "help", key_display="?", id="help"),
        Binding("q", "quit_app", "quit", id="quit"),
    ]

    def __init__(self, session: AnnotationSession, image_mode: str) -> None:
        super().__init__()
        self.session = session
        self.image_mode = image_mode
        self.image_index, self.focus_index = session.resume_position()
        self.dimension = "precision"
        self.groups: list[CaptionGroup] = []
        self.cards: list[CaptionCard] = []
        # After P and R of a caption the focus moves on, but the penalty keys still act on
        # the caption just scored until the user moves (scores, arrows, another image).
        self.scored_index: int | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="annotate"):
            yield Static(id="title")
            with Horizontal(id="progress-row"):
                yield ProgressBar(id="progress", show_eta=False, show_percentage=False)
                yield Static(id="counts")
            with Horizontal(id="body"):
                with Vertical(id="left"):
                    yield ImageView(self.image_mode, id="image")
                    yield RubricPanel(self.session.rubric, id="rubric")
                yield VerticalScroll(id="captions", can_focus=False)
            yield Static(id="message")
        yield KeyBar(self.shown_bindings)

    def on_mount(self) -> None:
        if not self.session.images:
            self.query_one("#title", Static).update(EMPTY_QUEUE[self.session.stage])
            return
        self.load_image(self.image_index, self.focus_index)

    # -- display ----------------------------------------------------------------------------

    def load_image(self, index: int, focus: int = 0) -> None:
        """Open the image (claiming it at stages 1 and 2). An image another annotator has
        taken meanwhile leaves the list, and the next free one opens instead."""
        refused, shown = None, self.session.images[self.image_index].id if self.groups else None
        while self.session.images:
            index = min(index, len(self.session.images) - 1)
            try:
                self.groups = self.session.open_image(index)
                break
            except ProtocolError as exc:
                refused, focus = exc, 0
            except DatabaseBusy:
                if shown is not None:  # still showing it; refused images left the list
                    self.image_index = self.session.index_of(shown)
                self.say("database busy, the image did not open — press the key again")
                return
        else:
            self.show_nothing_left()
            self.say(f"{refused}; nothing else is open to you" if refused else "")
            return
        self.image_index = index
        self.focus_index = min(max(focus, 0), max(len(self.groups) - 1, 0))
        self.scored_index = None
        self.dimension = (next_missing(self.group) if self.group else None) or "precision"
        self.say(f"{refused}; moving to the next" if refused else "")
        image = self.session.images[index]
        self.query_one(ImageView).show(image.path, image.key)
        container = self.query_one("#captions", VerticalScroll)
        container.remove_children()
        self.cards = [
            CaptionCard(number, len(self.groups), group, self.session.rubric)
            for number, group in enumerate(self.groups, start=1)
        ]
        container.mount_all(self.cards)
        self.call_after_refresh(self.update_focus)
        self.update_title()
        self.remember()

    def show_nothing_left(self) -> None:
        self.groups, self.cards = [], []
        self.query_one("#captions", VerticalScroll).remove_children()
        self.query_one("#title", Static).update(EMPTY_QUEUE[self.session.stage])

    def remember(self) -> None:
        """Store where the annotator is (and the time spent) when the database lets us."""
        if not self.session.images:
            return
        try:
            self.session.remember_position(self.image_index, self.focus_index)
        except DatabaseBusy:
            self.say("database busy: where you are is not saved yet")

    def update_title(self) -> None:
        progress = self.session.progress()
        image = self.session.images[self.image_index]
        done = self.STATUS_WORDS[0] if self.session.is_complete(image) else self.STATUS_WORDS[1]
        title = Text()
        title.append(f"Image {self.image_index + 1}/{len(self.session.images)} ", style="bold")
        title.append(f"{image_name(image)} ({done})  ")
        title.append(f"{printable(self.session.annotator, newlines=False)}, "
                     f"stage {int(self.session.stage)}", style="dim")
        self.query_one("#title", Static).update(title)
        self.query_one("#counts", Static).update(
            f"images {progress.images_done}/{progress.images_total} "
            f"captions {progress.captions_done}/{progress.captions_total}"
        )
        bar = self.query_one(ProgressBar)
        bar.update(total=max(progress.captions_total, 1), progress=progress.captions_done)

    def update_focus(self) -> None:
        for index, card in enumerate(self.cards):
            card.set_focus(self.dimension if index == self.focus_index else None,
                           penalty_target=index == self.scored_index)
        self.call_after_refresh(self.fit_cards)

    def fit_cards(self) -> None:
        """Cap each caption's text so its card fits the pane (the score line under a long
        caption stays on screen), then bring the focused card into view."""
        pane = self.query_one("#captions", VerticalScroll).scrollable_content_region.height
        for card in self.cards:
            card.text.limit_height(pane - card.scores.outer_size.height
                                   - card.styles.margin.height)
        if self.cards:
            card = self.cards[self.focus_index]
            self.call_after_refresh(card.scroll_visible, animate=False, immediate=True)

    def on_resize(self) -> None:
        if self.cards:
            self.call_after_refresh(self.fit_cards)

    def say(self, message: str) -> None:
        """Show a message as literal text, control characters escaped (it may quote stored
        names and paths)."""
        self.query_one("#message", Static).update(Text(printable(message)))

    @property
    def group(self) -> CaptionGroup | None:
        return self.groups[self.focus_index] if self.groups else None

    @property
    def target_index(self) -> int:
        """The caption the penalty and note keys act on."""
        return self.focus_index if self.scored_index is None else self.scored_index

    @property
    def shown_bindings(self) -> list[Binding]:
        """The key bar's and the help screen's keys: the user's keys, as the session's
        rubric names them."""
        return rubric_bindings(super().shown_bindings, self.session.rubric)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A penalty the rubric does not have has no key, nor has typing a score where the
        digit keys cover the rubric's scales. (A digit off the focused scale acts: it says
        which scores the dimension takes.)"""
        rubric = self.session.rubric
        if action in PENALTY_KEYS and not rubric.has_penalty(action):
            return False
        if action == "type_score" and digit_scores(rubric):
            return False
        return super().check_action(action, parameters)

    def key_of(self, action: str) -> str:
        """The key shown for a binding of this screen (the user's, after a keymap)."""
        binding = next(b for b in self.shown_bindings if b.action == action)
        return key_label(binding)

    def commit(self, group: CaptionGroup, values: dict[str, object]) -> CaptionGroup | None:
        """Save through the session; when the protocol refuses or the database stays busy,
        say so (nothing was written) and return None."""
        try:
            return self.session.set_values(group, values, image_index=self.image_index,
                                           focus=self.focus_index)
        except DatabaseBusy:
            self.say(busy())
        except (ValueError, PermissionError) as exc:
            self.say(f"not saved: {exc}")
        return None

    def change(self, values: dict[str, object], index: int | None = None) -> bool:
        """Commit a change to caption `index` (default: the focused one) and redraw.
        Returns whether it was saved."""
        index = self.focus_index if index is None else index
        if not self.groups:
            return False
        new = self.commit(self.groups[index], values)
        if new is None:
            return False
        self.groups[index] = new
        self.cards[index].set_group(new)
        self.call_after_refresh(self.fit_cards)
        self.update_title()
        shared = len(new.caption_ids)
        self.say("saved" + (f" for {shared} identical captions" if shared > 1 else "")
                 + (f" to {index + 1}/{len(self.groups)}" if index != self.focus_index else ""))
        return True

    def advance_after_scoring(self) -> None:
        """Focus the next caption after the focused one got both scores; the penalty keys
        stay on the caption just scored until the user moves, and the message says so."""
        scored = self.focus_index
        if scored >= len(self.groups) - 1:
            return
        values = self.groups[scored].values
        self.focus_index, self.scored_index = scored + 1, scored
        count = len(self.groups)
        penalty_keys = " ".join(self.key_of(action) for action in PENALTY_ACTIONS
                                if action == "note" or self.session.rubric.has_penalty(action))
        scores = " ".join(f"{d.short} {values[d.key]}" for d in self.session.rubric.dimensions)
        self.say(f"saved {scores} for {scored + 1}/{count}"
                 f" → now {scored + 2}/{count}; {penalty_keys} still act on {scored + 1}")

    # -- actions ----------------------------------------------------------------------------

    def action_score(self, value: int) -> None:
        """A digit key: score the highlighted dimension when the digit is on its scale (else
        say which scores it takes; nothing is saved). Where the digits do not cover the
        rubric's scales, open the typed entry with the digit typed."""
        if self.group is None:
            return
        dimension = self.session.rubric.dimension(self.dimension)
        if not digit_scores(self.session.rubric):
            self.ask_score(str(value))
        elif value not in dimension.scale:
            self.say(f"{scale_text(dimension)}: not saved")
        else:
            self.set_score(value)

    def action_type_score(self) -> None:
        if self.group is not None:
            self.ask_score("")

    def ask_score(self, typed: str) -> None:
        """The typed entry of a score on the focused dimension's scale."""
        dimension = self.session.rubric.dimension(self.dimension)

        def entered(value: float | None) -> None:
            if value is not None:
                self.set_score(int(value))

        self.app.push_screen(EntryScreen(
            f"{printable(dimension.label, newlines=False)} "
            f"({printable(dimension.short, newlines=False)})",
            f"Type a score from {dimension.min} to {dimension.max}; Enter saves, Esc cancels",
            lambda text: check_score(dimension, text), typed), entered)

    def set_score(self, value: int) -> None:
        """Score the highlighted dimension, then go to what is still missing: the other
        dimension of this caption, else the next caption."""
        if self.group is None:
            return
        self.scored_index = None
        if not self.change({self.dimension: value}):
            self.update_focus()
            return
        missing = next_missing(self.group)
        if missing is not None:
            self.dimension = missing
        else:
            self.advance_after_scoring()
            self.dimension = next_missing(self.group) or "precision"
        self.update_focus()

    def action_toggle_dimension(self) -> None:
        self.dimension = "recall" if self.dimension == "precision" else "precision"
        self.scored_index = None
        self.update_focus()

    def action_move(self, step: int) -> None:
        if not self.groups:
            return
        # stop at the first and last caption: wrapping round sent scores to the wrong one
        self.focus_index = min(max(self.focus_index + step, 0), len(self.groups) - 1)
        self.scored_index = None
        self.dimension = "precision"
        self.update_focus()
        self.remember()

    def focused_text(self) -> CaptionText | None:
        """The text box that the scroll keys scroll."""
        return self.cards[self.focus_index].text if self.cards else None

    def action_scroll_text(self, step: int) -> None:
        """Scroll the focused caption's text when it is longer than its box."""
        text = self.focused_text()
        if text is None:
            return
        if not text.is_cut:
            self.say("the whole caption is shown")
        elif not text.scroll_text(step):
            self.say("at the end of the caption" if step > 0 else "at the start of the caption")

    def penalty_group(self) -> tuple[int, CaptionGroup] | None:
        """The caption the penalty and note keys act on, with its index."""
        if not self.groups:
            return None
        return self.target_index, self.groups[self.target_index]

    def action_fluency(self) -> None:
        target = self.penalty_group()
        if target is None:
            return
        index, group = target
        current = group.values["fluency_type"] or (
            f"{group.values['fluency']:g}" if group.values["fluency"] else "none")

        def chosen(result: tuple[str, float] | None) -> None:
            if result is None:
                return
            code, value = result
            if code == CLEAR:
                self.change({"fluency": 0.0, "fluency_type": None}, index)
                return
            values = self.groups[index].values
            types = [t for t in str(values["fluency_type"] or "").split(",") if t]
            amount, type_text = fluency_value([*types, code], [float(values["fluency"]), value])
            category = self.session.rubric.penalty("fluency")
            if not category.allows(amount):
                self.say(f"not saved: {penalty_word(self.session.rubric, 'fluency')} "
                         f"penalties add up to at most {category.max_total:g}")
                return
            self.change({"fluency": amount, "fluency_type": type_text}, index)

        self.app.push_screen(FluencyScreen(self.session.rubric, group.text, str(current)), chosen)

    def action_conciseness(self) -> None:
        """Toggle THUMB's one conciseness type (or cycle a rubric's several)."""
        self.cycle_penalty("conciseness")

    def action_inclusive(self) -> None:
        """Cycle none -> each catalogue type (e.g. 0.5 appearance, 2 severe) -> none."""
        self.cycle_penalty("inclusive")

    def cycle_penalty(self, key: str) -> None:
        """Set the caption's `key` penalty to the next of none and each catalogue type: a
        fixed type's value, or for a ranged type the amount the annotator types."""
        target = self.penalty_group()
        if target is None:
            return
        index, group = target
        category = self.session.rubric.penalty(key)
        cycle: list[ErrorType | None] = [None, *category.types]
        code, amount = group.values[f"{key}_type"], group.values[key]
        position = next((i for i, t in enumerate(cycle) if t is not None and t.code == code),
                        None)
        if position is None:  # a value without its type (e.g. imported): find it by value
            position = next((i for i, t in enumerate(cycle)
                             if (0.0 if t is None else t.min) == amount), 0)
        chosen = cycle[(position + 1) % len(cycle)]
        if chosen is None:
            self.change({key: 0.0, f"{key}_type": None}, index)
        elif chosen.fixed:
            self.change({key: chosen.min, f"{key}_type": chosen.code}, index)
        else:
            self.ask_penalty(key, chosen, index)

    def ask_penalty(self, key: str, error_type: ErrorType, index: int) -> None:
        """The typed amount of a ranged penalty type, checked by the rubric."""
        category = self.session.rubric.penalty(key)

        def entered(value: float | None) -> None:
            if value is not None:
                self.change({key: value, f"{key}_type": error_type.code}, index)

        self.app.push_screen(EntryScreen(
            f"{printable(category.label, newlines=False)}: "
            f"{printable(error_type.label, newlines=False)}",
            f"Type a penalty from {error_type.min:g} to {error_type.max:g}; Enter saves, "
            "Esc cancels",
            lambda text: check_penalty(category, error_type, text)), entered)

    def action_note(self) -> None:
        target = self.penalty_group()
        if target is None:
            return
        index, group = target

        def saved(note: str | None) -> None:
            if note is not None:
                self.change({"note": note}, index)

        self.app.push_screen(NoteScreen(group.text, str(group.values["note"])), saved)

    def action_undo(self) -> None:
        try:
            result = self.session.undo()
        except ProtocolError as exc:
            self.say(f"cannot undo: {exc}")
            return
        except DatabaseBusy:
            self.say(busy("undo"))
            return
        if result is None:
            self.say("nothing to undo")
            return
        fields, caption_id = result
        index = self.session.image_index_of_caption(caption_id)
        moved = index != self.image_index
        self.load_image(index, self.focus_index)
        for position, group in enumerate(self.groups):
            if caption_id in group.caption_ids:
                self.focus_index = position
        if "recall" in fields or "precision" in fields:
            self.dimension = "recall" if "recall" in fields else "precision"
        self.update_focus()
        known = field_labels(self.session.rubric)
        labels = ", ".join(dict.fromkeys(known.get(f, f) for f in fields))
        where = f" on image {index + 1}" if moved else ""
        self.say(f"undid {labels}{where}")

    def action_image(self, step: int) -> None:
        if self.session.images:
            self.remember()
            self.load_image((self.image_index + step) % len(self.session.images))

    def action_next_unrated(self) -> None:
        if not self.session.images:
            return
        index = self.session.next_unrated(self.image_index)
        if index is None:
            self.say("every image is complete")
        else:
            self.remember()
            self.load_image(index)

    def action_open_image(self) -> None:
        if not self.session.images:
            return
        image = self.session.images[self.image_index]
        self.say(open_in_viewer(image.path, image.key))

    def action_flag_broken(self) -> None:
        """Flag the image as broken (the reason Pillow gives, else the annotator's word)
        and move on to the next image that is neither complete nor flagged."""
        if not self.session.images:
            return
        image = self.session.images[self.image_index]
        reason = broken_reason(image.path)
        try:
            self.session.flag_broken(self.image_index, reason)
        except DatabaseBusy:
            self.say(busy("flag"))
            return
        following = self.session.next_unrated(self.image_index)
        if following is not None:
            self.load_image(following)
        self.say(f"flagged {image.key} as broken ({reason})"
                 + ("; moved on" if following is not None else "; no other image is left to rate"))

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(help_markdown(self.session.rubric, self.shown_bindings)))

    def action_quit_app(self) -> None:
        self.remember()
        with suppress(DatabaseBusy):  # else the claim stays until they next leave the image
            self.session.close()
        self.app.exit()


def reviewed_values(group: CaptionGroup) -> dict[str, object]:
    """The stage-1 scores and penalties to confirm (the note stays the reviewer's own)."""
    assert group.reference is not None
    return {key: value for key, value in group.reference.items() if key != "note"}


class ReviewScreen(AnnotateScreen):
    """THUMB stage 2: the stage-1 values are shown under each caption; confirm them (`a`,
    or `A` for the whole image) or change them. Changes are stage-2 ratings."""

    CSS_PATH = ["annotate.tcss", "review.tcss"]
    BINDINGS = [
        *AnnotateScreen.BINDINGS[:-2],
        Binding("a", "accept", "accept stage 1", id="accept"),
        Binding("A", "accept_all", "accept all", key_display="A", id="accept-all"),
        *AnnotateScreen.BINDINGS[-2:],
    ]

    STATUS_WORDS = ("reviewed", "to review")

    def change(self, values: dict[str, object], index: int | None = None) -> bool:
        """A first edit of a caption starts from the stage-1 values (penalties included),
        so changing P does not silently drop the stage-1 penalties."""
        group = self.groups[self.focus_index if index is None else index] if self.groups \
            else None
        if group is not None and group.reference is not None and not is_started(
                group.values):
            values = {**reviewed_values(group), **values}
        return super().change(values, index)

    def set_score(self, value: int) -> None:
        """Reviewing: P, then R of the same caption, then the next caption (stage-1 values
        already fill both, so "what is missing" cannot drive the order here)."""
        if self.group is None:
            return
        self.scored_index = None
        if self.change({self.dimension: value}):
            if self.dimension == "precision":
                self.dimension = "recall"
            else:
                self.advance_after_scoring()
                self.dimension = "precision"
        self.update_focus()

    def action_accept(self) -> None:
        group = self.group
        if group is None or group.reference is None:
            return
        self.scored_index = None
        if self.change(reviewed_values(group)):
            self.advance_after_scoring()
        self.update_focus()

    def action_accept_all(self) -> None:
        self.scored_index = None
        for index, group in enumerate(self.groups):
            if group.reference is not None and not is_started(group.values):
                self.focus_index = index
                self.change(reviewed_values(group))
        self.update_focus()
