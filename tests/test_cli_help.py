"""Every command's `--help` shows its texts as written: square brackets are text, not
Rich markup (`JSON {image id: [caption ids…]}` lost its list), and `--bootstrap` names
what each command resamples."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import typer
from typer.testing import CliRunner

from thumb_tui.cli import app

runner = CliRunner()


def _commands(command: object, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple, object]]:
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


COMMANDS = dict(_commands(typer.main.get_command(app)))


def _shown(path: tuple[str, ...]) -> str:
    """The command's help as one line of words (panel borders and wrapping gone)."""
    output = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "300"}).output
    return " ".join(output.replace("│", " ").split())


def _texts(command: object) -> list[str]:
    return [text for text in (command.help, *(getattr(p, "help", None)
                                              for p in command.params)) if text]


BRACKETED = [(path, text) for path, command in COMMANDS.items()
             for text in _texts(command) if "[" in text]


def test_some_help_texts_hold_brackets():
    assert any("[caption ids…]" in text for _, text in BRACKETED)


@pytest.mark.parametrize(("path", "text"), BRACKETED,
                         ids=[f"{' '.join(p)}: {t[:30]}" for p, t in BRACKETED])
def test_a_bracket_in_a_help_text_is_shown_as_written(path, text):
    written = " ".join(text.replace("\\[", "[").split())  # as the source spells it
    assert written in _shown(path)


BOOTSTRAP_UNITS = {
    ("agreement",): "images", ("report",): "images", ("judgments", "report"): "images",
    ("retrieval", "agreement"): "images", ("retrieval", "evaluate"): "queries",
    ("bison", "report"): "items", ("match", "positives"): "verified pairs",
}


def test_every_bootstrap_option_names_what_its_command_resamples():
    with_bootstrap = {path for path, command in COMMANDS.items()
                      if any("--bootstrap" in getattr(p, "opts", ()) for p in command.params)}
    assert with_bootstrap == set(BOOTSTRAP_UNITS)
    for path, unit in BOOTSTRAP_UNITS.items():
        assert f"Bootstrap resamples of {unit} (0: no confidence intervals" in _shown(
            path), path


def test_a_command_help_paragraph_wraps_to_the_terminal_not_to_the_source():
    """Typer keeps the line breaks of every paragraph but a help text's first, so a
    docstring wrapped at 100 columns broke mid-sentence in any other terminal."""
    path = ("report",)
    assert "\n" in (COMMANDS[path].callback.__doc__ or "").split("\n\n", 1)[1]  # in source
    output = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"}).output
    assert ("The folder is made if its parent exists; a report file or figure that is there "
            "already is replaced only with --force.") in output
    for path, command in COMMANDS.items():  # lists and indented lines keep their breaks
        for paragraph in (command.help or "").split("\n\n"):
            lines = paragraph.splitlines()
            assert len(lines) == 1 or any(line[:1] in "-* " for line in lines), path
