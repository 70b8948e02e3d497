"""Full help: the rubric's definitions, rules, penalty catalogue and worked examples (or a
task's instructions), and the keys of the screen it was opened from."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

from rubrics import Rubric
from thumb_tui.widgets.keybar import KeyBar, key_label


def help_markdown(rubric: Rubric, keys: list[Binding]) -> str:
    lines = [f"# {rubric.title}", "", f"*{rubric.source}*", ""]
    lines += [f"**Total** = {rubric.formula()}", ""]
    for dimension in rubric.dimensions:
        lines += [f"## {dimension.label} ({dimension.short}, {dimension.min}–{dimension.max})",
                  "", f"**{dimension.question}**", "", dimension.definition, ""]
        lines += [f"- **{level}**: {text}" for level, text in sorted(dimension.levels.items(),
                                                                   reverse=True)]
        lines.append("")
    lines += ["## Rules", ""]
    lines += [f"- {rule.text}" for rule in rubric.rules]
    lines += ["", "## Penalties", ""]
    for category in rubric.penalties:
        lines += [f"### {category.label}", "", "| type | penalty | example |", "|---|---|---|"]
        for t in category.types:
            value = f"{t.min:g}" if t.fixed else f"{t.min:g}–{t.max:g}"
            lines.append(f"| {t.label} | {value} | {t.example} |")
        lines.append("")
    lines += ["## Worked examples", ""]
    for example in rubric.examples:
        penalty = sum(example.penalties.values())
        total = rubric.total(**example.scores, **example.penalties)
        scores = ", ".join(f"{d.short} {example.scores[d.key]}" for d in rubric.dimensions)
        lines += [f"- **{example.caption}**  ", f"  {scores}, penalty {penalty:g} → "
                  f"**total {total:.1f}**. {example.why}"]
    return "\n".join(lines) + keys_markdown(keys)


def keys_markdown(keys: list[Binding]) -> str:
    """The screen's keys as a Markdown section."""
    lines = ["", "", "## Keys", "",
             "Remap a key by its id in `~/.config/thumb-tui/keymap.toml` (under "
             "`$XDG_CONFIG_HOME`), e.g. `[keymap]` then `fluency = \"v\"`.", ""]
    lines += [f"- `{key_label(b)}`: {b.description}" + (f" (id `{b.id}`)" if b.id else "")
              for b in keys if b.show or b.id]
    return "\n".join(lines)


class HelpScreen(ModalScreen[None]):
    CSS_PATH = "help.tcss"
    BINDINGS = [
        Binding("escape,question_mark,q", "close", "close help", key_display="esc",
                id="help-close"),
    ]

    def __init__(self, markdown: str) -> None:
        super().__init__()
        self.markdown = markdown

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body"):
            yield Markdown(self.markdown)
        yield KeyBar([Binding("up,down", "", "scroll", key_display="↑↓"),
                      Binding("pageup,pagedown", "", "page", key_display="PgUp PgDn"),
                      Binding("home,end", "", "top/end", key_display="Home End"),
                      *self.BINDINGS])

    def on_mount(self) -> None:
        self.query_one("#help-body").focus()

    def action_close(self) -> None:
        self.dismiss(None)
