"""Resolve stage-1/stage-2 disagreements, worst first: stage-1 and stage-2 values side by
side with the image and the rubric; the resolver sets the final values and the reasons."""

from __future__ import annotations

from rich.segment import Segment
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.strip import Strip
from textual.widgets import Checkbox, Label, SelectionList, Static
from textual.widgets.option_list import OptionDoesNotExist

from rubrics import printable
from storage.db.engine import DatabaseBusy
from storage.models import RATING_VALUE_FIELDS
from storage.rating.project_queues import Disagreement, disagree
from storage.rating.protocol import is_complete, is_started
from storage.rating.rating_desk import Undone
from storage.rating.rating_sessions import ResolutionSession
from thumb_tui.screens.busy import busy
from thumb_tui.screens.cursor import FIRST
from thumb_tui.screens.rating import (
    CAPTION_BINDINGS,
    HELP,
    OPEN_IMAGE,
    QUIT,
    RatingScreen,
    image_name,
    score_bindings,
)
from thumb_tui.screens.stages import RESOLVE
from thumb_tui.widgets.caption_card import note_text, rating_context, score_line, short
from thumb_tui.widgets.caption_text import CaptionText
from thumb_tui.widgets.image_view import ImageView
from thumb_tui.widgets.keybar import MOVE_KEYS, KeyBar
from thumb_tui.widgets.rubric_panel import RubricPanel

# A note longer than this (in cells) is cut beside the values, so that they and the reasons
# stay on screen; the whole note is shown under the caption, in its scrolling box.
LONGEST_NOTE = 60

# The rating keys that act here (by binding id): the digits score the final values; there
# is one caption at a time, so no caption keys, and no typed score.
PASSED_ON = ("fluency", "conciseness", "inclusive", "note", "undo", "toggle-dimension",
             "scroll-text-down", "scroll-text-up")


def all_done(count: int) -> str:
    """What the screen says once every disagreement of the session is resolved."""
    settled = "the disagreement" if count == 1 else f"the {count} disagreements"
    return f"all done: {settled} of this session {'is' if count == 1 else 'are'} resolved; q quits"


class ReasonList(SelectionList[str]):
    """Unticked reasons show an empty box rather than a dimmed X, so ticked and unticked
    differ without colour too."""

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        segments = list(strip)
        # SelectionList draws its boxes with the toggle buttons' inner character, which
        # the public Checkbox inherits
        if len(segments) < 2 or segments[1].text != Checkbox.BUTTON_INNER:
            return strip
        try:
            option = self.get_option_at_index(self.scroll_offset.y + y)
        except OptionDoesNotExist:
            return strip
        if option.value in self.selected:
            return strip
        segments[1] = Segment(" " * len(segments[1].text), segments[1].style)
        return Strip(segments, strip.cell_length)


class ReasonScreen(ModalScreen[list[str] | None]):
    """Pick one or more reason codes (space toggles, Enter saves, Esc cancels)."""

    CSS_PATH = "resolve.tcss"
    BINDINGS = [
        Binding("enter", "save", "save", id="reasons-save", priority=True),
        Binding("escape", "cancel", "cancel", id="reasons-cancel"),
    ]

    def __init__(self, reasons: list[tuple[str, str]], chosen: list[str]) -> None:
        super().__init__()
        self.reasons, self.chosen = reasons, chosen

    def compose(self) -> ComposeResult:
        with Vertical(id="reasons-dialog"):
            yield Label("Why are the final values right? Space ticks (X), Enter saves")
            # the rubric's labels as literal text: a plain string would be read as markup
            yield ReasonList(*[(Text(printable(label, newlines=False)), code,
                                code in self.chosen)
                               for code, label in self.reasons], id="reasons")
        yield KeyBar([MOVE_KEYS, Binding("space", "", "toggle"), *self.BINDINGS])

    def action_save(self) -> None:
        self.dismiss(list(self.query_one(SelectionList).selected))

    def action_cancel(self) -> None:
        self.dismiss(None)


class ResolveScreen(RatingScreen):
    """The rating keys (RatingScreen) on one disagreement at a time: the final values of
    its caption group, with the stage-1 and stage-2 values beside them."""

    CSS_PATH = ["annotate.tcss", "resolve.tcss"]
    STAGE = RESOLVE
    BINDINGS = [
        *[b for b in score_bindings() if b.id and b.id.startswith("score-")],
        *[b for b in CAPTION_BINDINGS if b.id in PASSED_ON],
        OPEN_IMAGE,
        HELP,
        Binding("a", "take(1)", "take stage 1", id="take-first"),
        Binding("b", "take(2)", "take stage 2", id="take-second"),
        Binding("r", "reasons", "reasons", id="reasons"),
        Binding("right_square_bracket,pagedown", "step(1)", "next", key_display="[ ]",
                id="next-disagreement"),
        Binding("left_square_bracket,pageup", "step(-1)", "previous", show=False,
                id="previous-disagreement"),
        QUIT,
    ]

    def __init__(self, session: ResolutionSession, queue: list[Disagreement],
                 image_mode: str, *, resolved_before: int = 0) -> None:
        """`queue`: the disagreements still open to this resolver; `resolved_before`: how
        many they settled in earlier sessions (for the overall progress)."""
        super().__init__(session, image_mode)
        self.queue = queue
        self.position = 0
        self.reasons: dict[int, list[str]] = {}
        self.resolved_before = resolved_before

    def compose(self) -> ComposeResult:
        with Vertical(id="annotate"):
            yield Static(id="title")
            with Horizontal(id="body"):
                with Vertical(id="left"):
                    yield ImageView(self.image_mode, id="image")
                    yield RubricPanel(self.session.rubric, id="rubric")
                with Vertical(id="resolve-pane"):
                    yield CaptionText(id="resolve-caption")
                    yield Static(id="compare")
            yield Static(id="message")
        yield KeyBar(self.shown_bindings)

    def focused_text(self) -> CaptionText | None:
        return self.query_one("#resolve-caption", CaptionText) if self.queue else None

    def on_mount(self) -> None:
        if not self.queue:
            self.query_one("#title", Static).update("No unresolved disagreements.")
            return
        self.show_item()

    @property
    def item(self) -> Disagreement:
        return self.queue[self.position]

    def show_item(self) -> None:
        item = self.item
        self.groups = [self.session.group_for_caption(item.caption_id)]
        self.sync_reasons()  # an undo may have changed the values since
        # each disagreement starts on P, whatever its final values lack
        self.cursor.opened(self.session.image_index_of_caption(item.caption_id), self.groups,
                           dimension=FIRST)
        self.say("")
        try:
            self.session.look_at(self.image_index)
        except DatabaseBusy:
            self.say("database busy: this visit is not recorded yet")
        image = self.session.images[self.image_index]
        self.query_one(ImageView).show(image.path, image.key)
        self.redraw()

    @property
    def resolved_count(self) -> int:
        return self.resolved_before + len(self.reasons)

    def redraw(self) -> None:
        group, item = self.groups[0], self.item
        done = group.complete and bool(self.reasons.get(item.caption_id))
        image = self.session.images[self.image_index]
        self.query_one("#title", Static).update(Text.assemble(
            (f"Disagreement {self.position + 1}/{len(self.queue)} ", "bold"),
            ("(worst first) ", "dim"), (image_name(image), "bold"),
            (" " + self.STAGE.status_words[0 if done else 1], ""),
            (f" · {self.resolved_count}/{self.resolved_before + len(self.queue)} resolved",
             "dim")))
        # the values and reasons stay in view under the scrolling box of the caption,
        # which also holds the whole of each note cut short beside them
        caption = Text(printable(group.text), style="bold")
        notes = [(label, values["note"]) for label, values in (
            ("stage 1", item.first), ("stage 2", item.second), ("your", group.values))
            if note_text(values.get("note") or "").cell_len > LONGEST_NOTE]
        for label, note in notes:
            caption.append(f"\n\n{label} note: ", style="not bold")
            caption.append_text(note_text(note))
        self.query_one("#resolve-caption", CaptionText).update(caption)
        rubric = self.session.rubric
        text = Text()
        for label, values in (("stage 1", item.first), ("stage 2", item.second)):
            text.append_text(rating_context(label, values, rubric, longest_note=LONGEST_NOTE))
            text.append("\n")
        text.append("final:  ")  # each value below is padded by one space
        for dimension in rubric.dimensions:
            value = group.values[dimension.key]
            style = "bold reverse" if self.dimension == dimension.key else "bold"
            text.append(f" {short(dimension.short)} {'-' if value is None else value} ",
                        style=style)
        text.append(" " + score_line(group.values, rubric).split("  ", 2)[2])
        total = group.total(self.session.rubric)
        text.append(f"  = {total:.1f}" if total is not None else "  = -", style="bold")
        chosen = self.reasons.get(item.caption_id, [])
        text.append(f"\nreasons: {short(', '.join(chosen)) or '- (press r)'}")
        if group.values["note"]:
            text.append("\nnote: ", style="italic")
            text.append_text(note_text(group.values["note"], LONGEST_NOTE))
        self.query_one("#compare", Static).update(text)

    # -- RatingScreen's hooks ------------------------------------------------------------------

    def update_focus(self) -> None:
        if self.queue:
            self.redraw()

    def change(self, values: dict[str, object], index: int | None = None) -> bool:
        """Commit a change to the final values of the current disagreement."""
        had_reasons = bool(self.reasons.get(self.item.caption_id))
        new = self.commit(self.groups[0], values)
        if new is None:
            return False
        self.groups[0] = new
        self.sync_reasons()
        done = bool(self.reasons.get(self.item.caption_id))
        if done and "note" in values and not self.save_resolution(
                self.reasons[self.item.caption_id]):  # the note goes too
            return False
        if had_reasons and not done:
            self.say("saved; new values, so the reasons were withdrawn: r gives them again")
        else:
            self.say("saved" if done else "saved; now r: the reasons, to resolve it")
        self.redraw()
        return True

    def sync_reasons(self) -> None:
        """The current disagreement's reasons as stored: a change to its final values
        withdraws them (the session's rule), so the screen reads them back."""
        caption_id = self.item.caption_id
        if recorded := self.session.recorded_reasons(caption_id):
            self.reasons[caption_id] = recorded
        else:
            self.reasons.pop(caption_id, None)

    def load_image(self, index: int, focus: int = 0) -> None:
        """Undo may point at another caption: show the disagreement it belongs to."""
        self.show_item()

    def undid(self, result: Undone) -> str:
        """An undo of final values withdraws their reasons in its transaction (the
        session's rule), as a new value does: say so, as `change` does."""
        if set(result.fields).isdisjoint(RATING_VALUE_FIELDS):
            return ""  # a note alone leaves the reasons standing
        withdrawn = [caption_id for caption_id in result.caption_ids
                     if self.reasons.pop(caption_id, None)]
        return "; the reasons were withdrawn with them: r gives them again" if withdrawn else ""

    def suggested_reason(self) -> str | None:
        """The reason the final values speak for: a side they equal, or new values."""
        values = self.groups[0].values
        if not is_complete(values):
            return None
        for code, side in (("first-right", self.item.first), ("second-right", self.item.second)):
            if not disagree(values, side):
                return code
        return "both-wrong"

    def action_take(self, stage: int) -> None:
        source = self.item.first if stage == 1 else self.item.second
        self.change({key: source[key] for key in RATING_VALUE_FIELDS})

    def action_reasons(self) -> None:
        item = self.item
        codes = [(r.code, r.label) for r in self.session.rubric.resolution_reasons]

        def chosen(result: list[str] | None) -> None:
            if result == []:
                self.say("no reason ticked, so nothing saved: it stays unresolved")
            if not result or not self.save_resolution(result):
                return
            self.reasons[item.caption_id] = result
            self.say("reasons saved" if len(self.reasons) < len(self.queue) else
                     all_done(len(self.queue)))
            self.redraw()

        ticked = self.reasons.get(item.caption_id) or [
            code for code in [self.suggested_reason()] if code in dict(codes)]
        self.app.push_screen(ReasonScreen(codes, ticked), chosen)

    def save_resolution(self, reasons: list[str]) -> bool:
        """The reasons (and the note) for every caption of the group being settled; False,
        with the reason said, when they could not be saved."""
        try:
            self.session.record_reasons(self.groups[0], reasons)
        except DatabaseBusy as exc:
            self.say(busy("resolution", exc.holders))
        except (ValueError, PermissionError) as exc:
            self.say(f"not saved: {exc}")
        else:
            return True
        return False

    def action_step(self, step: int) -> None:
        """The next or previous disagreement; at either end of the queue it stops and
        says so (wrapping round hid that the queue was over)."""
        if not self.queue:
            return
        target = self.position + step
        if not 0 <= target < len(self.queue):
            self.say(self.end_of_queue() if step > 0 else "this is the first disagreement")
            return
        left = self.position + 1
        values = self.groups[0].values
        half_done = is_started(values) and not self.reasons.get(self.item.caption_id)
        self.position = target
        self.show_item()
        if half_done:
            self.say(f"disagreement {left} has values but no reasons (r): still unresolved")

    def end_of_queue(self) -> str:
        open_here = [n + 1 for n, item in enumerate(self.queue)
                     if item.caption_id not in self.reasons]
        if not open_here:
            return all_done(len(self.queue))
        return (f"last disagreement; still to resolve: {', '.join(map(str, open_here[:8]))}"
                + (" …" if len(open_here) > 8 else "") + " ([ goes back)")

    def action_quit_app(self) -> None:
        self.app.exit()
