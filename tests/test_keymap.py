"""User keymaps by binding id: the file in the XDG config dir remaps keys on every screen,
and the key bar and help show the user's keys; a bad file ends in one line."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tests.app_helpers import make_app, sample_engine, screen_text
from tests.conftest import SAMPLE_CSV
from thumb_tui.cli import app as cli
from thumb_tui.keymap import KeymapError, keymap_path, load_keymap, screen_bindings
from thumb_tui.screens.annotate import AnnotateScreen
from thumb_tui.screens.fluency import FluencyScreen
from thumb_tui.screens.help import HelpScreen

KEYMAP = '[keymap]\nfluency = "v"\nnext-caption = "down,ctrl+n"\nhelp = "f1"\n'


def write_keymap(text: str):
    path = keymap_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_every_binding_of_every_screen_has_an_id():
    for name, bindings in screen_bindings().items():
        assert all(b.id for b in bindings), name


@pytest.mark.slow
async def test_keymap_remaps_keys_and_the_key_bar_and_help_show_them(tmp_path):
    write_keymap(KEYMAP)
    app = make_app(sample_engine(tmp_path))
    assert app.keymap == {"fluency": "v", "next-caption": "down,ctrl+n", "help": "f1"}
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        shown = screen_text(app)
        assert " v  fluency" in shown and " f  fluency" not in shown
        assert " ↓ ^n  caption" in shown and " f1  help" in shown
        await pilot.press("ctrl+n")
        assert screen.focus_index == 1
        await pilot.press("f")  # no longer bound
        assert "the key f does nothing here" in str(screen.query_one("#message").content)
        await pilot.press("5", "4")  # 2/4 scored; v still acts on it
        assert "v c i n still act on 2" in str(screen.query_one("#message").content)
        await pilot.press("v")
        assert isinstance(app.screen, FluencyScreen)
        await pilot.press("escape", "f1")
        assert isinstance(app.screen, HelpScreen)
        source = app.screen.query_one("Markdown").source
        assert "- `v`: fluency (id `fluency`)" in source
        assert "- `f1`: help (id `help`)" in source
        await pilot.press("escape")
        assert isinstance(app.screen, AnnotateScreen)


def test_a_remapped_key_of_a_combined_entry_shows_every_key_it_now_has():
    """`↑↓ caption` stands for two bindings and `1-5` for five: once the keymap changes one
    of them the combined entry would name keys that no longer act (or hide the new one)."""
    from rubrics import THUMB_1_0
    from thumb_tui.screens.rating import rubric_bindings
    from thumb_tui.widgets.keybar import remapped

    bindings = rubric_bindings(screen_bindings()["annotate"], THUMB_1_0)

    def bar(keymap: dict[str, str]) -> list[tuple[str, str]]:
        return [(b.key_display or b.key, b.description)
                for b in remapped(bindings, keymap) if b.show]

    default = bar({})
    assert ("↑↓", "caption") in default and ("1-5", "score P/R") in default
    assert not any(description == "previous caption" for _, description in default)
    moved = bar({"previous-caption": "ctrl+p", "score-3": "e"})
    assert ("↓ j", "caption") in moved and ("^p", "previous caption") in moved
    assert ("1 2 e 4 5", "score P/R") in moved
    assert not any(keys in ("↑↓", "1-5") for keys, _ in moved)
    assert bar({"fluency": "v"}).count(("↑↓", "caption")) == 1  # others stay combined


@pytest.mark.parametrize(("text", "problem"), [
    ('[keymap]\nflunecy = "v"\n', "unknown binding id 'flunecy'"),
    ('[keymap]\nfluency = 3\n', "fluency must be keys as text"),
    ('[keymap]\nfluency = "c"\n', "the key 'c' would do both fluency and conciseness"),
    ('[keys]\nfluency = "v"\n', "expected only a [keymap] table"),
    ('[keymap\n', "not a readable TOML file"),
])
def test_a_bad_keymap_is_refused_with_the_file_and_the_problem(text, problem):
    path = write_keymap(text)
    with pytest.raises(KeymapError) as caught:
        load_keymap()
    assert str(caught.value).startswith(f"{path}: ") and problem in str(caught.value)


def test_the_cli_ends_a_bad_keymap_in_one_line(tmp_path):
    db = str(tmp_path / "k.db")
    assert CliRunner().invoke(cli, ["--db", db, "import", str(SAMPLE_CSV)]).exit_code == 0
    assert CliRunner().invoke(cli, ["--db", db, "annotator", "a"]).exit_code == 0
    path = write_keymap('[keymap]\nflunecy = "v"\n')
    result = CliRunner().invoke(cli, ["--db", db, "annotate", "--annotator", "a",
                                      "--image-mode", "none"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: {path}: unknown binding id 'flunecy' (the help screen, ?, lists the ids)"]


def test_every_work_screen_has_help_and_open_image():
    for name in ("annotate", "review", "resolve", "fluency round", "BISON", "match"):
        actions = {b.action for b in screen_bindings()[name]}
        assert "help" in actions and any(a.startswith("open_image") for a in actions), name


def test_keys_are_named_as_textual_bindings_name_them_without_its_private_api():
    """The keymap named a character's key with Textual's private `_character_to_key`, and
    the reasons list used the private `textual.widgets._toggle_button`: an upgrade may
    drop either. Our own `character_key` must name every punctuation key as a Textual
    binding of that character does (`,` and the space cannot be bound alone)."""
    import re
    import string
    from pathlib import Path

    from textual.binding import Binding, BindingsMap

    from thumb_tui.keymap import character_key

    for character in set(string.punctuation) - {","}:
        bound = BindingsMap([Binding(character, "noop")]).key_to_bindings
        assert list(bound) == [character_key(character)], character
    assert (character_key(","), character_key(" "), character_key("a")) == (
        "comma", "space", "a")
    private = re.compile(r"textual(\.\w+)*\._\w|from textual[.\w]* import [^\n]*\b_\w")
    sources = Path(__file__).parents[1] / "thumb_tui"
    assert [path.name for path in sources.rglob("*.py")
            if private.search(path.read_text(encoding="utf-8"))] == []
