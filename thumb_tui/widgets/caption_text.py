"""A caption's text in a box of at most a given height that scrolls by key, so that a long
caption (LLM captions run to 650 characters and more) never pushes the scores under it off
the screen."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from rubrics import printable


class CaptionText(VerticalScroll, can_focus=False):
    """Not focusable: the screen's keys move between captions; `scroll_text` scrolls. A
    plain string is shown literally, its control characters as escapes (stored text is
    untrusted); a Text is shown as given."""

    DEFAULT_CSS = """
    CaptionText {
        height: auto;
        max-height: 12;
        scrollbar-size-vertical: 1;
    }
    CaptionText > Static {
        width: 1fr;
        height: auto;
    }
    """

    def __init__(self, text: Text | str = "", **kwargs: object) -> None:
        super().__init__(**kwargs)
        self._text = Static(text if isinstance(text, Text) else Text(printable(text)))

    def compose(self) -> ComposeResult:
        yield self._text

    def update(self, text: Text | str) -> None:
        self._text.update(text if isinstance(text, Text) else Text(printable(text)))

    def limit_height(self, lines: int) -> None:
        """Show at most `lines` lines (never fewer than 2); the rest scrolls."""
        self.styles.max_height = max(lines, 2)

    @property
    def is_cut(self) -> bool:
        return self.max_scroll_y > 0

    def scroll_text(self, step: int) -> bool:
        """Scroll by most of a page; False when there is nothing more that way."""
        before = self.scroll_y
        lines = max(self.size.height - 1, 1)
        self.scroll_to(y=self.scroll_y + step * lines, animate=False, immediate=True)
        return self.scroll_y != before

    def scrolled(self, step: int) -> str | None:
        """Scroll by most of a page (the screens' scroll keys); what to tell the user when
        that moved nothing, else None."""
        if not self.is_cut:
            return "the whole caption is shown"
        if not self.scroll_text(step):
            return "at the end of the caption" if step > 0 else "at the start of the caption"
        return None
