"""Full help: the rubric's definitions, rules, penalty catalogue and worked examples (or a
task's instructions), and the keys of the screen it was opened from."""

from __future__ import annotations

import re
import string
from dataclasses import replace

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen

from rubrics import Rubric, for_markdown, printable
from thumb_tui.widgets.keybar import KeyBar, display_keys

# The rubric's texts come from a file someone else wrote (or from the database): each goes
# into the Markdown escaped for where it stands, so that it shows as exactly its text and
# never as a control sequence, raw HTML, a link or a Markdown construct of its own.
_LINE_BREAKS = re.compile(r"[ \t]*[\n\t][ \t]*")
_ORDERED = re.compile(r"(\d{1,9})([.)])")


def inline(text: str, *, table_cell: bool = False) -> str:
    """A rubric text inside a line: its lines joined (Markdown would join them anyway),
    then `for_markdown` (control characters as escapes, no HTML, no emphasis or links)."""
    return for_markdown(_LINE_BREAKS.sub(" ", text).strip(" "), table_cell=table_cell)


def heading(text: str) -> str:
    """A rubric text in a heading: inline, and no `#` that closes the heading."""
    return inline(text).replace("#", "\\#")


def block(text: str) -> str:
    """A rubric text that begins a paragraph or list item: inline, and its first character
    cannot open a heading, quote, list, table or link definition (`# x`, `> x`, `1. x`)."""
    escaped = inline(text)
    if escaped[:1] in set(string.punctuation) - {"\\", "&"}:  # & starts an entity we made
        return "\\" + escaped
    return _ORDERED.sub(r"\1\\\2", escaped, count=1) if _ORDERED.match(escaped) else escaped


def code(text: str) -> str:
    """A code span showing `text` literally (a key such as ` needs a longer fence)."""
    shown = printable(text, newlines=False)
    fence = "`" * (max(map(len, re.findall("`+", shown)), default=0) + 1)
    pad = " " if shown.startswith(("`", " ")) or shown.endswith(("`", " ")) else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def help_markdown(rubric: Rubric, keys: list[Binding]) -> str:
    lines = [f"# {heading(rubric.title)}", ""]
    if rubric.source.strip():
        lines += [f"*{inline(rubric.source)}*", ""]
    lines += [f"**Total** = {inline(rubric.formula())}", ""]
    for dimension in rubric.dimensions:
        lines += [f"## {heading(dimension.label)} ({heading(dimension.short)}, "
                  f"{dimension.min}–{dimension.max})",
                  "", f"**{inline(dimension.question)}**", "", block(dimension.definition), ""]
        lines += [f"- **{level}**: {inline(text)}"
                  for level, text in sorted(dimension.levels.items(), reverse=True)]
        lines.append("")
    lines += ["## Rules", ""]
    lines += [f"- {block(rule.text)}" for rule in rubric.rules]
    lines += ["", "## Penalties", ""]
    for category in rubric.penalties:
        lines += [f"### {heading(category.label)}", "", "| type | penalty | example |",
                  "|---|---|---|"]
        for t in category.types:
            value = f"{t.min:g}" if t.fixed else f"{t.min:g}–{t.max:g}"
            lines.append(f"| {inline(t.label, table_cell=True)} | {value} | "
                         f"{inline(t.example, table_cell=True)} |")
        lines.append("")
    lines += ["## Worked examples", ""]
    for example in rubric.examples:
        penalty = sum(example.penalties.values())
        total = rubric.total(**example.scores, **example.penalties)
        scores = ", ".join(f"{inline(d.short)} {example.scores[d.key]}"
                           for d in rubric.dimensions)
        lines += [f"- **{inline(example.caption)}**  ", f"  {scores}, penalty {penalty:g} → "
                  f"**total {total:.1f}**. {inline(example.why)}"]
    return "\n".join(lines) + keys_markdown(keys)


def keys_markdown(keys: list[Binding]) -> str:
    """The screen's keys as a Markdown section (keys and descriptions may be the user's
    keymap and the rubric's labels: escaped too)."""
    lines = ["", "", "## Keys", "",
             "Remap a key by its id in `~/.config/thumb-tui/keymap.toml` (under "
             "`$XDG_CONFIG_HOME`), e.g. `[keymap]` then `fluency = \"v\"`.", ""]
    lines += [f"- {code(display_keys(b.key))}: {inline(b.description)}"
              + (f" (id {code(b.id)})" if b.id else "")
              for b in keys if b.show or b.id]
    return "\n".join(lines)


def paragraphs_markdown(text: str) -> str:
    """A stored text (e.g. the gold feedback, one line per answer) as Markdown that shows
    exactly it: each of its lines a paragraph of its own."""
    return "\n\n".join(block(line) for line in text.splitlines() if line.strip())


class HelpScreen(ModalScreen[None]):
    """A text to read whole (the full help, or the gold feedback), scrolled by key and
    closed by the annotator, so nothing replaces it before it is read."""

    CSS_PATH = "help.tcss"
    BINDINGS = [
        Binding("escape,question_mark,q", "close", "close help", key_display="esc",
                id="help-close"),
    ]

    def __init__(self, markdown: str, *, subject: str = "help") -> None:
        """`subject`: what the close key's description calls the text."""
        super().__init__()
        self.markdown = markdown
        self.subject = subject

    def compose(self) -> ComposeResult:
        # loaded when help is first opened: Markdown's parser is not needed before
        from textual.widgets import Markdown

        with VerticalScroll(id="help-body"):
            yield Markdown(self.markdown)
        yield KeyBar([Binding("up,down", "", "scroll", key_display="↑↓"),
                      Binding("pageup,pagedown", "", "page", key_display="PgUp PgDn"),
                      Binding("home,end", "", "top/end", key_display="Home End"),
                      *[replace(b, description=f"close {self.subject}")
                        for b in self.BINDINGS]])

    def on_mount(self) -> None:
        self.query_one("#help-body").focus()

    def action_close(self) -> None:
        self.dismiss(None)
