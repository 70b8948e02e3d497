"""The caption-card rating screen: one image at a time, every caption of it rated by one
annotator, at stage 1 (`AnnotateScreen`) and at review (`ReviewScreen`, stage 2: the
stage-1 values are shown under each caption; confirm them, `a` or `A` for the whole image,
or change them). The two differ only in their `STAGE` policy (thumb_tui.screens.stages);
the rating keys are `RatingScreen`'s (thumb_tui.screens.rating), the focus a
`CaptionCursor` (thumb_tui.screens.cursor)."""

from __future__ import annotations

from contextlib import suppress

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import ProgressBar, Static

from rubrics import printable
from storage.db.engine import DatabaseBusy
from storage.imports.images import broken_reason
from storage.models import Stage
from storage.rating.protocol import ProtocolError, is_started
from storage.rating.rating_sessions import AnnotationSession, ImageItem
from thumb_tui.screens.busy import busy, held_by
from thumb_tui.screens.confirm_flag import ConfirmFlagScreen
from thumb_tui.screens.help import HelpScreen, paragraphs_markdown
from thumb_tui.screens.rating import (
    CAPTION_BINDINGS,
    HELP,
    OPEN_IMAGE,
    PENALTY_ACTIONS,
    QUIT,
    RatingScreen,
    digit_scores,
    field_labels,
    image_name,
    penalty_word,
    rubric_bindings,
    score_bindings,
)
from thumb_tui.screens.stages import FIRST_STAGE, REVIEW, RatingStage, reviewed_values
from thumb_tui.widgets.caption_card import CaptionCard
from thumb_tui.widgets.caption_text import CaptionText
from thumb_tui.widgets.image_view import ImageView
from thumb_tui.widgets.keybar import KeyBar
from thumb_tui.widgets.rubric_panel import RubricPanel

# (the helpers that moved to thumb_tui.screens.rating stay importable from here)
__all__ = [
    "EMPTY_QUEUE",
    "PENALTY_ACTIONS",
    "AnnotateScreen",
    "ReviewScreen",
    "digit_scores",
    "field_labels",
    "image_name",
    "penalty_word",
    "reviewed_values",
    "rubric_bindings",
    "stage_bindings",
]


EMPTY_QUEUE = {
    Stage.FIRST: "No image is open to you at stage 1: the project has none, or every one was "
                 "started by someone else (import with `thumb import FILE`).",
    Stage.SECOND: "Nothing to review: no image has a complete stage-1 rating by someone else "
                  "that nobody else reviews.",
    Stage.FINAL: "Nothing to resolve.",
}


IMAGE_BINDINGS = [
    Binding("right_square_bracket,pagedown", "image(1)", "image", key_display="[ ]",
            id="next-image"),
    Binding("left_square_bracket,pageup", "image(-1)", "previous image", show=False,
            id="previous-image"),
    Binding("g", "next_unrated", "next unrated", id="next-unrated"),
    OPEN_IMAGE,
    Binding("x", "flag_broken", "broken image", id="flag-broken"),
]


def stage_bindings(stage: RatingStage) -> list[Binding]:
    """The caption-card screen's keys at `stage`: the rating keys, the image keys, the
    stage's own keys, then help and quit."""
    return [*score_bindings(), *CAPTION_BINDINGS, *IMAGE_BINDINGS, *stage.keys, HELP, QUIT]


class AnnotateScreen(RatingScreen):
    """The caption cards of one image with the rating keys; `STAGE` says what differs by
    stage. It owns the cards and the image list; the focus is the cursor's."""

    CSS_PATH = "annotate.tcss"
    STAGE = FIRST_STAGE
    BINDINGS = stage_bindings(FIRST_STAGE)

    def __init__(self, session: AnnotationSession, image_mode: str) -> None:
        super().__init__(session, image_mode)
        self.cards: list[CaptionCard] = []
        # the (image, caption) last stored as where the annotator is: the focus is stored
        # again whenever it leaves it, so a killed process resumes where the focus was
        self.stored_position: tuple[int, int] | None = None

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
            except DatabaseBusy as exc:
                if shown is not None:  # still showing it; refused images left the list
                    self.cursor.image_index = self.session.index_of(shown)
                self.say(f"database busy{held_by(exc.holders)}, the image did not open — "
                         "press the key again")
                return
        else:
            self.show_nothing_left()
            self.say(f"{refused}; nothing else is open to you" if refused else "")
            return
        self.cursor.opened(index, self.groups, focus)
        # a gold image left answered wrongly says why, where the lead turned that on: in
        # a dialog read whole and closed by the annotator (the message line shows its
        # start until the next message)
        feedback = None if refused else self.session.feedback()
        self.say(f"{refused}; moving to the next" if refused else feedback or "")
        if feedback:
            self.app.push_screen(HelpScreen(paragraphs_markdown(feedback),
                                            subject="these notes"))
        image = self.session.images[index]
        self.query_one(ImageView).show(image.path, image.key)
        container = self.query_one("#captions", VerticalScroll)
        container.remove_children()
        self.cards = [
            CaptionCard(number, len(self.groups), group, self.session.rubric)
            for number, group in enumerate(self.groups, start=1)
        ]
        container.mount_all(self.cards)
        self.draw_focus()  # (the cards show it once mounted)
        # New cards get their children, and so their heights, only in the refresh that
        # mounts them: a fit after that refresh would read no heights yet, so the fit
        # waits for the refresh after it.
        self.call_after_refresh(self.fit_cards_later)
        self.update_title()
        self.remember()

    def show_nothing_left(self) -> None:
        self.groups, self.cards = [], []
        self.cursor.closed()
        self.query_one("#captions", VerticalScroll).remove_children()
        self.query_one("#title", Static).update(EMPTY_QUEUE[self.session.stage])

    def remember(self) -> None:
        """Store where the annotator is (and the time spent) when the database lets us."""
        if not self.session.images:
            return
        position = (self.image_index, self.focus_index)
        try:
            self.session.remember_position(*position)
        except DatabaseBusy:
            self.say("database busy: where you are is not saved yet")
        else:
            self.stored_position = position

    def update_title(self) -> None:
        progress = self.session.progress()
        image = self.session.images[self.image_index]
        done = self.STAGE.status_words[0 if self.session.is_complete(image) else 1]
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
        """Redraw the focus from the cursor: the one call after every change of it. A
        focus on another caption (moved by a key, or on after a score) is stored at once:
        a restart, even after a kill, resumes on the caption the focus is on."""
        self.draw_focus()
        self.fit_cards_later()
        if self.groups and self.stored_position != (self.image_index, self.focus_index):
            self.remember()

    def draw_focus(self) -> None:
        """Mark the focused card and dimension, and the caption the penalty keys still act
        on, as the cursor has them."""
        cursor = self.cursor
        for index, card in enumerate(self.cards):
            card.set_focus(cursor.dimension if index == cursor.focus_index else None,
                           penalty_target=index == cursor.scored_index)

    def fit_cards_later(self) -> None:
        """Fit the cards once the screen has refreshed. Deferred because fitting reads the
        cards' rendered heights (the score lines), which are known only after the layout
        that the change (new cards, new values, a new focus, a resize) caused. Fitting
        twice is harmless, so a change that also moves the focus may ask twice."""
        self.call_after_refresh(self.fit_cards)

    def fit_cards(self) -> None:
        """Cap each caption's text so its card fits the pane (the score line under a long
        caption stays on screen), then bring the focused card into view."""
        pane = self.query_one("#captions", VerticalScroll).scrollable_content_region.height
        for card in self.cards:
            card.text.limit_height(pane - card.scores.outer_size.height
                                   - card.styles.margin.height)
        if self.cards:
            card = self.cards[self.cursor.focus_index]
            # deferred again: the capped heights take effect in the next layout, and only
            # then is the card's place in the pane known to scroll to
            self.call_after_refresh(card.scroll_visible, animate=False, immediate=True)

    def on_resize(self) -> None:
        if self.cards:
            self.fit_cards_later()

    def change(self, values: dict[str, object], index: int | None = None) -> bool:
        """Commit a change to caption `index` (default: the focused one) and redraw.
        Returns whether it was saved."""
        index = self.focus_index if index is None else index
        if not self.groups:
            return False
        # at review a first edit starts from the stage-1 values (the stage's policy)
        new = self.commit(self.groups[index],
                          self.STAGE.first_values(self.groups[index], values))
        if new is None:
            return False
        self.groups[index] = new
        self.cards[index].set_group(new)
        self.fit_cards_later()
        self.update_title()
        shared = len(new.caption_ids)
        self.say("saved" + (f" for {shared} identical captions" if shared > 1 else "")
                 + (f" to {index + 1}/{len(self.groups)}" if index != self.focus_index else ""))
        return True

    def action_move(self, step: int) -> None:
        if not self.groups:
            return
        self.cursor.moved(step)
        self.update_focus()

    def focused_text(self) -> CaptionText | None:
        """The text box that the scroll keys scroll."""
        return self.cards[self.focus_index].text if self.cards else None

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

    def action_flag_broken(self) -> None:
        """Ask, then flag the image as broken (the reason Pillow gives, else the
        annotator's word) and move on to the next image that is neither complete nor
        flagged; `u` takes the flag back."""
        if not self.session.images:
            return
        image = self.session.images[self.image_index]
        reason = broken_reason(image.path)

        def answered(flag: bool | None) -> None:
            if flag:  # (the dialog is modal: the same image is still open)
                self.flag_broken(image, reason)
            else:
                self.say(f"{printable(image.key, newlines=False)} is not flagged")

        self.app.push_screen(ConfirmFlagScreen(image.key, reason), answered)

    def flag_broken(self, image: ImageItem, reason: str) -> None:
        try:
            self.session.flag_broken(self.image_index, reason)
        except DatabaseBusy as exc:
            self.say(busy("flag", exc.holders))
            return
        following = self.session.next_unrated(self.image_index)
        if following is not None:
            self.load_image(following)
        self.say(f"flagged {image.key} as broken ({reason})"
                 + ("; moved on" if following is not None else "; no other image is left to rate"))

    def action_quit_app(self) -> None:
        self.remember()
        with suppress(DatabaseBusy):  # else the claim stays until they next leave the image
            self.session.close()
        self.app.exit()

    # -- review: the accept keys (bound only by REVIEW's keys; at stage 1 no caption has
    # stage-1 values to accept) ---------------------------------------------------------------

    def action_accept(self) -> None:
        group = self.group
        if group is None or group.reference is None:
            return
        self.cursor.settled()
        if self.change(reviewed_values(group)):
            self.say_advanced(self.cursor.advanced())
        self.update_focus()

    def action_accept_all(self) -> None:
        """Accept the stage-1 values of every caption of the image not reviewed yet: one
        action, saved as one change, so one undo takes all of it back."""
        self.cursor.settled()
        pending = [index for index, group in enumerate(self.groups)
                   if group.reference is not None and not is_started(group.values)]
        if not pending:
            self.say("every caption of this image is reviewed already")
        elif (saved := self.commit_many([(self.groups[index],
                                          reviewed_values(self.groups[index]))
                                         for index in pending])) is not None:
            for index, group in zip(pending, saved, strict=True):
                self.groups[index] = group
                self.cards[index].set_group(group)
            self.cursor.focused(pending[-1])
            self.fit_cards_later()
            self.update_title()
            self.say(f"accepted stage 1 on {len(pending)} caption"
                     f"{'s' if len(pending) > 1 else ''}; u undoes "
                     f"{'them all' if len(pending) > 1 else 'it'}")
        self.update_focus()


class ReviewScreen(AnnotateScreen):
    """THUMB stage 2: AnnotateScreen with the review policy (the stage-1 values under each
    caption, a first edit starting from them, the order P, R, next, and the accept keys).
    Changes are stage-2 ratings."""

    CSS_PATH = ["annotate.tcss", "review.tcss"]
    STAGE = REVIEW
    BINDINGS = stage_bindings(REVIEW)
