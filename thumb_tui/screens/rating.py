"""The rating keys shared by the rating screens (stage 1, review, resolve): scores, the
penalties and the note, undo, help, over the focused caption group of a `CaptionCursor`.

`RatingScreen` holds the cursor and the session and owns every rule of what a rating key
does; a screen built on it supplies its layout and four hooks: `change` (save values to a
caption and redraw it), `update_focus` (redraw the focus from the cursor), `load_image`
(reopen an image, e.g. after an undo elsewhere) and `focused_text` (what the scroll keys
scroll). What differs between the stages (where the focus goes after a score, what a first
edit starts from, the status words, the stage's own keys) is the screen's `STAGE` policy
(`thumb_tui.screens.stages`), never an override."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import ClassVar, TypeVar

from rich.text import Text
from textual.binding import Binding
from textual.widgets import Static

from rubrics import PENALTY_KEYS, ErrorType, Rubric, printable
from storage.db.engine import DatabaseBusy
from storage.rating.protocol import ProtocolError
from storage.rating.rating_desk import Undone
from storage.rating.rating_sessions import (
    AnnotationSession,
    CaptionGroup,
    ImageItem,
    ResolutionSession,
    fluency_value,
)
from thumb_tui.screens.busy import busy
from thumb_tui.screens.cursor import CaptionCursor
from thumb_tui.screens.entry import EntryScreen, check_penalty, check_score, scale_text
from thumb_tui.screens.fluency import CLEAR, FluencyScreen
from thumb_tui.screens.help import HelpScreen, help_markdown
from thumb_tui.screens.note import NoteScreen
from thumb_tui.screens.stages import FIRST_STAGE, RatingStage
from thumb_tui.widgets.caption_text import CaptionText
from thumb_tui.widgets.image_view import open_in_viewer
from thumb_tui.widgets.keybar import KeyBarScreen, key_label

PENALTY_ACTIONS = (*PENALTY_KEYS, "note")
T = TypeVar("T")



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
            # the key bar shows the range once; the help lists each key by its id, each
            # with the same words
            binding = replace(binding, description=f"score {first}/{second}",
                              show=level == low)
            if level == low:
                binding = replace(binding, key_display=f"{low}-{high}")
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


def score_bindings() -> list[Binding]:
    """The digit keys 0-9 (ids `score-0` … `score-9`; a rubric's screen shows those on its
    scale) and `s`, which types a score on a scale the digits cannot cover."""
    return [
        *(Binding(str(n), f"score({n})", "score", key_display=str(n), show=False,
                  id=f"score-{n}") for n in range(10)),
        Binding("s", "type_score", "type a score", show=False, id="type-score"),
    ]




# The keys of the rating screens by part, in the order the key bar and the help list them.
# Binding ids are what a user's keymap names (thumb_tui.keymap): never change one.
CAPTION_BINDINGS = [
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
]
OPEN_IMAGE = Binding("o", "open_image", "open", id="open-image")
HELP = Binding("question_mark", "help", "help", key_display="?", id="help")
QUIT = Binding("q", "quit_app", "quit", id="quit")


class RatingScreen(KeyBarScreen):
    """The rating keys over the focused caption group (see the module's docstring). The
    session, the cursor and the groups are the whole state; the hooks redraw from them."""

    STAGE: ClassVar[RatingStage] = FIRST_STAGE

    def __init__(self, session: AnnotationSession | ResolutionSession,
                 image_mode: str) -> None:
        super().__init__()
        self.session = session
        self.image_mode = image_mode
        # the one focus state (image, caption, dimension, the caption just scored): the
        # screen changes it through its methods, then redraws from it (update_focus)
        self.cursor = CaptionCursor(*session.resume_position())
        self.groups: list[CaptionGroup] = []

    # The cursor's state, read as the screen's own attributes. Setting the focused caption
    # is the cursor's `focused` (the penalty keys follow the focus).
    @property
    def image_index(self) -> int:
        return self.cursor.image_index

    @property
    def focus_index(self) -> int:
        return self.cursor.focus_index

    @focus_index.setter
    def focus_index(self, index: int) -> None:
        self.cursor.focused(index)

    @property
    def dimension(self) -> str:
        return self.cursor.dimension

    @property
    def scored_index(self) -> int | None:
        return self.cursor.scored_index

    # -- the hooks a rating screen supplies -------------------------------------------------

    def change(self, values: dict[str, object], index: int | None = None) -> bool:
        """Save `values` to caption `index` (default: the focused one) and redraw it;
        whether it was saved."""
        raise NotImplementedError

    def update_focus(self) -> None:
        """Redraw the focus from the cursor: the one call after every change of it."""
        raise NotImplementedError

    def load_image(self, index: int, focus: int = 0) -> None:
        """Open image `index` (focus caption `focus`), e.g. where an undo went back to."""
        raise NotImplementedError

    def focused_text(self) -> CaptionText | None:
        """The text box that the scroll keys scroll."""
        raise NotImplementedError

    # -- the rating keys ----------------------------------------------------------------------

    def say(self, message: str) -> None:
        """Show a message as literal text, control characters escaped (it may quote stored
        names and paths)."""
        self.query_one("#message", Static).update(Text(printable(message)))

    @property
    def group(self) -> CaptionGroup | None:
        return self.groups[self.cursor.focus_index] if self.groups else None

    @property
    def target_index(self) -> int:
        """The caption the penalty and note keys act on."""
        return self.cursor.target_index

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
        """Save through the session; None (said why) where nothing was written."""
        return self.saving(lambda: self.session.set_values(
            group, values, image_index=self.image_index, focus=self.focus_index))

    def commit_many(self, changes: Sequence[tuple[CaptionGroup, dict[str, object]]]
                    ) -> list[CaptionGroup] | None:
        """Save changes to several groups of the open image as one action (one undo takes
        it all back); None (said why) where nothing was written."""
        return self.saving(lambda: self.session.set_many(
            changes, image_index=self.image_index, focus=self.focus_index))

    def saving(self, save: Callable[[], T]) -> T | None:
        """Run a save; when the protocol refuses or the database stays busy, say so
        (nothing was written) and return None."""
        try:
            return save()
        except DatabaseBusy as exc:
            self.say(busy(holders=exc.holders))
        except (ValueError, PermissionError) as exc:
            self.say(f"not saved: {exc}")
        return None

    def say_advanced(self, scored: int | None) -> None:
        """After the focus moved on from caption `scored` (None: it did not), say so and
        that the penalty keys stay on it until the user moves."""
        if scored is None:
            return
        values = self.groups[scored].values
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
        """Score the highlighted dimension, then move on as the stage orders it (stage 1:
        the other dimension while it is missing, else the next caption; review, and a
        correction of a complete caption: P, R, then the next caption)."""
        if self.group is None:
            return
        correcting = self.group.complete
        self.cursor.settled()
        if self.change({self.dimension: value}):
            self.say_advanced(self.STAGE.after_score(self.cursor, self.groups,
                                                     correcting=correcting))
        self.update_focus()

    def action_toggle_dimension(self) -> None:
        self.cursor.toggled()
        self.update_focus()

    def action_scroll_text(self, step: int) -> None:
        """Scroll the focused caption's text when it is longer than its box."""
        text = self.focused_text()
        if text is None:
            return
        if said := text.scrolled(step):
            self.say(said)

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
        shown = self.STAGE.current_values(group)
        current = shown["fluency_type"] or (
            f"{shown['fluency']:g}" if shown["fluency"] else "none")

        def chosen(result: tuple[str, float] | None) -> None:
            if result is None:
                return
            code, value = result
            if code == CLEAR:
                self.change({"fluency": 0.0, "fluency_type": None}, index)
                return
            values = self.STAGE.current_values(self.groups[index])
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
        values = self.STAGE.current_values(group)
        code, amount = values[f"{key}_type"], values[key]
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
        except DatabaseBusy as exc:
            self.say(busy("undo", exc.holders))
            return
        if result is None:
            self.say("nothing to undo in this session")
            return
        listed = [image.id for image in self.session.images]
        if result.flag:  # the image is open to rate again: go back to it
            key = next((image.key for image in self.session.images
                        if image.id == result.image_id), None)
            if key is not None:
                self.load_image(listed.index(result.image_id))
            self.say(f"undid the broken-image flag on "
                     f"{printable(key or 'the image', newlines=False)}")
            return
        caption_id = result.caption_id
        consequence = self.undid(result)
        index = self.session.image_index_of_caption(caption_id)
        self.load_image(index, self.focus_index)
        position = next((position for position, group in enumerate(self.groups)
                         if caption_id in group.caption_ids), None)
        self.cursor.undone(position, result.fields)
        self.update_focus()
        known = field_labels(self.session.rubric)
        labels = ", ".join(dict.fromkeys(known.get(f, f) for f in result.fields))
        key = printable(self.session.images[index].key, newlines=False)
        touched = sum(1 for group in self.groups
                      if not set(group.caption_ids).isdisjoint(result.caption_ids))
        where = (f"{touched} captions of " if touched > 1 else
                 f"caption {position + 1}/{len(self.groups)} of " if position is not None
                 else "")
        self.say(f"undid {labels} on {where}{key}{consequence}")

    def undid(self, result: Undone) -> str:
        """What else an undo of values took back by the screen's own rule, said after it
        (called before the screen redraws, so its state is still from before the undo);
        nothing here."""
        return ""

    def action_open_image(self) -> None:
        if not self.session.images:
            return
        image = self.session.images[self.image_index]
        self.say(open_in_viewer(image.path, image.key))

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(help_markdown(self.session.rubric, self.shown_bindings)))
