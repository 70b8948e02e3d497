"""Rubric and keymap files are untrusted input (#24 items 1, 2, 6, 7): one gate per kind of
file checks it whole against a schema and reports every problem as a `FILE: problem` line
(exit 2 on the command line, never a traceback); bidirectional formatting characters are
refused like control characters; and whatever rubric text reaches a screen anyway (a
rubric stored before the gate existed) is shown escaped, never acted on."""

from __future__ import annotations

import copy
import datetime
import json
import math
import os
import re
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.text import Text
from sqlalchemy import update
from textual.widgets import Markdown, OptionList, Static
from typer.testing import CliRunner

from rubrics import (
    THUMB_1_0,
    RubricError,
    for_html,
    for_markdown,
    forbidden_character,
    load_rubric,
    parse_rubric,
    printable,
)
from rubrics.schema import MAX_TOML_DEPTH, nesting_problem, parse_toml
from storage import InputError, import_captions, open_database
from storage.imports.untrusted import clean_source, text_problems
from storage.models import RubricRecord
from tests.app_helpers import make_app, sample_engine, screen_text
from tests.conftest import SAMPLE_CSV
from thumb_tui.app import ThumbApp
from thumb_tui.cli import app as cli
from thumb_tui.keymap import KeymapError, keymap_path, load_keymap
from thumb_tui.screens.fluency import FluencyScreen
from thumb_tui.screens.help import HelpScreen, help_markdown
from thumb_tui.screens.resolve import ReasonScreen
from thumb_tui.widgets.rubric_panel import rubric_summary

THUMB_TOML = resources.files("rubrics").joinpath("thumb-1.0.toml").read_text(encoding="utf-8")
OSC52 = "\x1b]52;c;UFdORUQ=\x07"  # writes "PWNED" into the terminal's clipboard
BIDI = ["\u061c", "\u200e", "\u200f", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e",
        "\u2066", "\u2067", "\u2068", "\u2069"]
runner = CliRunner()


def toml_text(text: str) -> str:
    """`text` as a TOML basic string (TOML writes ESC as \\u001b: a raw one is illegal)."""
    return json.dumps(text)


def variant(old: str, new: str, count: int = 1) -> str:
    assert old in THUMB_TOML, old
    return THUMB_TOML.replace(old, new, count)


def refused(tmp_path: Path, text: str | bytes) -> list[str]:
    """The problems the rubric gate reports for this file, each checked to name it."""
    path = tmp_path / "hostile.toml"
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    with pytest.raises(RubricError) as caught:
        load_rubric(path)
    lines = str(caught.value).splitlines()
    assert lines and all(line.startswith(f"{path}: ") for line in lines), lines
    return [line.removeprefix(f"{path}: ") for line in lines]


# ---------------------------------------------------------------------------------------
# Item 7: the rubric file's schema

LEVELS = re.search(r"\[dimensions\.levels\]\n(?:\d = [^\n]*\n){5}", THUMB_TOML).group()  # type: ignore[union-attr]


BAD_RUBRICS = [
    # tracebacks before the gate
    (variant("min = 1\nmax = 5", "min = -inf\nmax = 5"),
     "dimensions[1].min: must be a whole number, not -inf"),
    (variant(LEVELS, 'levels = "x"\n'), "dimensions[1].levels: must be a table, not text"),
    (variant("min = 1\nmax = 5", "min = 1\nmax = 400000000"),
     "dimensions[1].max: must be from -100 to 100, not 400000000"),
    (variant("min = 1\nmax = 5", "min = 1\nmax = 12"),
     "dimensions[1]: a scale of 12 levels (at most 11)"),
    (THUMB_TOML + "\nx = " + "[" * 5000 + "]" * 5000 + "\n",
     f"arrays or inline tables nested deeper than {MAX_TOML_DEPTH} levels"),
    (THUMB_TOML + "\nx = " + "{a = " * 600 + "1" + "}" * 600 + "\n",
     f"arrays or inline tables nested deeper than {MAX_TOML_DEPTH} levels"),
    ("a" + ".a" * 200_000 + " = 1\n" + THUMB_TOML,  # tomllib: memory quadratic in the parts
     f"a dotted key of more than {MAX_TOML_DEPTH} parts"),
    (THUMB_TOML.replace("Kasai", "K\u00e4sai").encode("latin-1"),
     "line 1: invalid UTF-8 (byte 0xe4 at column 15); a TOML file is UTF-8"),
    ("x = " + "9" * 5000 + "\n", "not a readable TOML file: Exceeds the limit"),
    # wrongly accepted before the gate
    (variant("precision_weight = 0.5", "precision_weight = nan"),
     "total.precision_weight: must be a finite number, not nan"),
    (variant("precision_weight = 0.5", "precision_weight = inf"),
     "total.precision_weight: must be a finite number, not inf"),
    (variant("recall_weight = 0.5", "recall_weight = -2"),
     "total.recall_weight: must be from 0 to 100, not -2"),
    (variant('value = 0.1\nexample = "A yelow', 'value = -5\nexample = "A yelow'),
     "penalties[1].types[1].value: must be from 0 to 5, not -5"),
    (variant("max_total = 0.5", "max_total = -1"),
     "penalties[2].max_total: must be from 0 to 100, not -1"),
    (variant("value = 2.0", "value = 3.0"),
     "penalties[3].types[2].value: must be from 0 to 2, not 3"),
    (variant('id = "thumb"', "id = 5"), "id: must be text, not a number"),
    (variant('id = "thumb"', 'id = "th umb"'), "id: must be 1 to 64 letters, digits"),
    (variant('version = "1.0"', "version = {a=1}"),
     'version: must be text ("1.0") or a whole number, not a table'),
    (variant('version = "1.0"', "version = 1979-05-27"),
     'version: must be text ("1.0") or a whole number, not a date or time'),
    (variant('short = "R"', 'short = "P"'),
     "dimensions and penalties: two with the short label 'P'"),
    (variant('abbreviation = "Con"', 'abbreviation = "Fl"'),
     "penalty conciseness: the abbreviation 'Fl' names another column of the report already"),
    (variant('code = "second-right"', 'code = "first-right"'),
     "resolution_reasons: two with the code 'first-right'"),
    (variant('code = "word-split"', 'code = "spelling"'),
     "penalties[1].types: two with the code 'spelling'"),
    (variant('code = "word-split"', 'code = "word,split"'),
     "penalties[1].types[2].code: must be 1 to 64 letters"),
    (variant('key = "recall"', 'key = "precision"'),
     "dimensions: two with the key 'precision'"),
    (variant('key = "recall"', 'key = "coverage"'),
     "dimensions[2].key: dimension 'coverage' has no column in the rating table"),
    (variant('short = "P"', 'short = "[b]"'), "dimensions[1].short: must be 1 to 3 letters"),
    (variant('title = "THUMB 1.0"', 'title = "THUMB\\n1.0"'),
     "title: must be one line (no newline or tab)"),
    (variant('label = "Precision"', 'label = "Precision"\ncolour = "red"'),
     "dimensions[1]: unknown key 'colour'"),
    (variant("precision = 3\nrecall = 4", "precision = 9\nrecall = 4"),
     "examples[1].precision: must be from 1 to 5, not 9"),
    (variant("penalties = { fluency = 0.1 }", "penalties = { typos = 0.1 }"),
     "examples[2].penalties: the rubric has no penalty 'typos'"),
    (variant("penalties = { fluency = 0.1 }", "penalties = { fluency = 9.0 }"),
     "examples[2].penalties.fluency: 9 is not an amount the fluency penalty allows"),
    (variant("min = 0.1\nmax = 0.5", "min = 0.5\nmax = 0.1"),
     "penalties[1].types[11]: min 0.5 is above max 0.1"),
    (variant("min = 0.1\nmax = 0.5", "value = 0.1\nmin = 0.1\nmax = 0.5"),
     "penalties[1].types[11]: give either a fixed value or a min and max, not both"),
    (variant("5 = \"Nothing in the caption is wrong.\"\n", ""),
     "dimensions[1].levels: levels must describe every score from 1 to 5; missing [5]"),
    # text through the import's character check (items 1 and 6)
    (variant('label = "Precision"', f"label = {toml_text('Prec' + OSC52 + 'ision')}"),
     "dimensions[1].label: control character U+001B is not allowed (only tab and newline "
     "are)"),
    (variant('label = "Precision"', f"label = {toml_text('Prec' + chr(0x9B) + 'ision')}"),
     "dimensions[1].label: control character U+009B"),
    (variant('label = "Precision"', 'label = "Prec\\u202eision"'),
     "dimensions[1].label: bidirectional formatting character U+202E is not allowed"),
    (variant("why = \"Accurate and complete; one obvious misspelling.\"",
             f"why = {toml_text('x' * 20_001)}"),
     "examples[3].why: 20,001 characters (at most 20,000)"),
]


@pytest.mark.parametrize(("text", "problem"),
                         [pytest.param(text, problem, id=problem[:60])
                          for text, problem in BAD_RUBRICS])
def test_a_bad_rubric_file_is_refused_with_its_name_and_the_problem(tmp_path, text, problem):
    problems = refused(tmp_path, text)
    assert any(line.startswith(problem) for line in problems), problems


def test_every_problem_of_a_rubric_is_reported_in_one_pass(tmp_path):
    text = (variant('id = "thumb"', "id = 5")
            .replace("precision_weight = 0.5", "precision_weight = nan")
            .replace("max_total = 0.5", "max_total = -1")
            .replace('short = "R"', 'short = "P"')
            .replace('label = "Precision"', 'label = "Prec\\u202eision"'))
    assert refused(tmp_path, text) == [
        "id: must be text, not a number",
        "dimensions[1].label: bidirectional formatting character U+202E is not allowed (it "
        "reorders the text shown around it)",
        "total.precision_weight: must be a finite number, not nan",
        "penalties[2].max_total: must be from 0 to 100, not -1",
        "dimensions and penalties: two with the short label 'P'",
    ]


def test_the_shipped_and_example_rubrics_pass_the_gate():
    assert load_rubric("thumb-1.0") == THUMB_1_0
    load_rubric(Path(__file__).parent / "rubrics" / "pr4-1.toml")
    # a rubric's data checked without a file: the name it is given
    with pytest.raises(RubricError, match=r"^mine: id: must be text, not a number$"):
        parse_rubric(dict(THUMB_1_0.definition) | {"id": 5}, "mine")


def test_nesting_is_bounded_before_the_parser_recurses():
    assert nesting_problem(THUMB_TOML) is None
    assert nesting_problem('x = "' + "[" * 100 + '"\n# ' + "{" * 100) is None  # text only
    assert nesting_problem("x = " + "[" * 17 + "]" * 17) is not None
    assert nesting_problem("a = 1.5\nb = 1979-05-27T07:32:00.999\n") is None
    assert nesting_problem(".".join(["'a'"] * 17) + " = 1") is not None
    with pytest.raises(RubricError, match="larger than 1,048,576 bytes"):
        parse_toml(b"#" * (1 << 20) + b"\n", "big.toml", max_bytes=1 << 20,
                   error=RubricError)


def test_thumb_import_refuses_a_hostile_rubric_in_lines_naming_the_file(tmp_path):
    """Item 1's reproduction: the OSC 52 label is refused before anything is written."""
    rubric = tmp_path / "hostile.toml"
    rubric.write_text(variant('label = "Precision"',
                              f"label = {toml_text('Prec' + OSC52 + 'ision')}")
                      .replace('short = "R"', 'short = "P"'), encoding="utf-8")
    db = tmp_path / "new.db"
    result = runner.invoke(cli, ["--db", str(db), "import", str(SAMPLE_CSV), "--rubric",
                                 str(rubric)])
    assert result.exit_code == 2, result.output
    assert result.output.splitlines() == [
        f"error: {rubric}: dimensions[1].label: control character U+001B is not allowed "
        "(only tab and newline are)",
        f"{rubric}: dimensions and penalties: two with the short label 'P'"]
    assert not db.exists()


# ---------------------------------------------------------------------------------------
# Item 2: the keymap file

def write_keymap(text: str) -> Path:
    path = keymap_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


BAD_KEYMAPS = [
    (f"[keymap]\nfluency = {toml_text(OSC52)}\n",
     "fluency: control character U+001B is not allowed (only tab and newline are)"),
    ('[keymap]\nfluency = "\\u202ev"\n',
     "fluency: bidirectional formatting character U+202E is not allowed"),
    ('[keymap]\nfluency = " "\n', "fluency: an empty key in ' '"),
    ('[keymap]\nfluency = "v,"\n', "fluency: an empty key in 'v,'"),
    ('[keymap]\nfluency = "v w"\n', "fluency: 'v w' is not a key"),
    ('[keymap]\nfluency = "flunecy"\n', "fluency: 'flunecy' is not a key"),
    ('[keymap]\nfluency = "ctrl+ctrl+v"\n', "fluency: 'ctrl+ctrl+v' is not a key"),
    ('[keymap]\nfluency = "\u0301"\n', "fluency: '\u0301' is not a key"),
    ("[keymap]\nfluency = " + "[" * 3000 + "]" * 3000 + "\n",
     f"arrays or inline tables nested deeper than {MAX_TOML_DEPTH} levels"),
    ("a" + ".a" * 30_000 + " = 1\n", f"a dotted key of more than {MAX_TOML_DEPTH} parts"),
    ('[keymap]\nfluency = "' + "v," * 9 + 'v"\n', "fluency: 10 keys (at most 8)"),
    ("#" * 70_000, "larger than 65,536 bytes"),
]


@pytest.mark.parametrize(("text", "problem"),
                         [pytest.param(text, problem, id=problem[:60])
                          for text, problem in BAD_KEYMAPS])
def test_a_bad_keymap_value_is_refused(text, problem):
    path = write_keymap(text)
    with pytest.raises(KeymapError) as caught:
        load_keymap()
    lines = str(caught.value).splitlines()
    assert all(line.startswith(f"{path}: ") for line in lines), lines
    assert any(line.removeprefix(f"{path}: ").startswith(problem) for line in lines), lines


def test_keys_are_named_as_textual_names_them():
    write_keymap('[keymap]\nfluency = "?"\nnote = "ctrl+é, shift+f5"\nhelp = "é"\n'
                 'undo = "grave_accent"\n')
    assert load_keymap() == {"fluency": "question_mark", "note": "ctrl+é,shift+f5",
                             "help": "é", "undo": "grave_accent"}


def test_every_problem_of_a_keymap_is_reported_at_once(tmp_path):
    path = write_keymap('[keymap]\nfluency = "\\u0007"\nbogus = "x"\nundo = 3\nnote = "c"\n')
    with pytest.raises(KeymapError) as caught:
        load_keymap()
    assert str(caught.value).splitlines() == [
        f"{path}: fluency: control character U+0007 is not allowed (only tab and newline "
        "are)",
        f"{path}: unknown binding id 'bogus' (the help screen, ?, lists the ids)",
        f"{path}: undo must be keys as text, e.g. \"v\" or \"down,ctrl+n\"",
        f"{path}: on the annotate screen the key 'c' would do both conciseness and note",
        f"{path}: on the review screen the key 'c' would do both conciseness and note",
        f"{path}: on the resolve screen the key 'c' would do both conciseness and note"]


def test_the_cli_ends_a_hostile_keymap_in_one_line(tmp_path):
    db = str(tmp_path / "k.db")
    assert runner.invoke(cli, ["--db", db, "import", str(SAMPLE_CSV)]).exit_code == 0
    assert runner.invoke(cli, ["--db", db, "annotator", "a"]).exit_code == 0
    path = write_keymap(f"[keymap]\nfluency = {toml_text(OSC52)}\n")
    result = runner.invoke(cli, ["--db", db, "annotate", "--annotator", "a",
                                 "--image-mode", "none"])
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        f"error: {path}: fluency: control character U+001B is not allowed (only tab and "
        "newline are)"]
    write_keymap("[keymap]\nfluency = " + "[" * 3000 + "]" * 3000 + "\n")
    result = runner.invoke(cli, ["--db", db, "annotate", "--annotator", "a",
                                 "--image-mode", "none"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.startswith(f"error: {path}: arrays or inline tables nested")


async def test_the_key_bar_shows_keys_it_was_given_literally(tmp_path):
    """Behind the gate: a keymap handed to the app directly still reaches the key bar as
    an escape, not as a clipboard write."""
    app = ThumbApp(make_app(sample_engine(tmp_path)).first_screen.session, "none",
                   keymap={"undo": "ctrl+u", "note": "f" + "\x1b"})
    async with app.run_test(size=(80, 24)):
        shown = screen_text(app)
        bars = "".join(str(bar.render()) for bar in app.screen.query("KeyBar"))
    assert "\x1b" not in shown and "\x1b" not in bars
    assert "^u  undo" in shown and "\\x1b" in bars


# ---------------------------------------------------------------------------------------
# Item 6: bidirectional formatting characters and the byte order mark

@pytest.mark.parametrize("character", [*BIDI, "\ufeff"])
def test_bidi_controls_are_refused_on_import_and_escaped_on_output(character):
    text = f"evil.exe{character}gpj.txt"
    assert forbidden_character(text) == character
    escape = f"\\u{ord(character):04x}"
    assert printable(text) == f"evil.exe{escape}gpj.txt"
    assert for_html(text) == f"evil.exe{escape}gpj.txt"
    assert escape.replace("\\", "\\\\") in for_markdown(text)
    assert text_problems({"caption": text}, "")[0].startswith(
        f"caption: {'invisible' if character == chr(0xFEFF) else 'bidirectional'}")
    # the import's shortcut never skips a record that holds one (raw or as a JSON escape)
    assert not clean_source(f"a,{text},b\n")
    assert not clean_source(json.dumps({"caption": text}, ensure_ascii=False) + "\n")
    assert not clean_source(json.dumps({"caption": text}) + "\n")


@pytest.mark.parametrize("character", ["\u200b", "\u200c", "\u200d"])
def test_zero_width_joiners_stay_allowed(character):
    """ZWJ builds emoji sequences, ZWNJ spells Persian and Indic words, ZWSP marks Thai word
    breaks: none reorders text."""
    assert forbidden_character(f"a{character}b") is None
    assert printable(f"a{character}b") == f"a{character}b"


def test_an_import_refuses_a_caption_with_a_right_to_left_override(tmp_path):
    source = tmp_path / "rlo.csv"
    source.write_text(f"image,system,caption\n{SAMPLE_CSV.parent / 'img01.png'},S,"
                      "A dog\u202e.god a\n", encoding="utf-8")
    engine = open_database(tmp_path / "rlo.db")
    with pytest.raises(InputError, match=r"rlo\.csv:2: caption: bidirectional formatting "
                                         r"character U\+202E is not allowed"):
        import_captions(engine, source, actor="t", allow_outside_images=True)


# ---------------------------------------------------------------------------------------
# Item 1: rubric text that reached the database anyway is shown escaped on every screen

HOSTILE = OSC52 + "\x1b[31m\x9b31m\u202e[@click=app.quit]q[/] [bold <b>*x*"


def hostile_definition() -> dict:
    data = copy.deepcopy(json.loads(json.dumps(dict(THUMB_1_0.definition))))
    data["title"] = "Rubric " + HOSTILE
    data["source"] = "src " + HOSTILE
    first = data["dimensions"][0]
    first.update(label="Prec " + HOSTILE, short="P" + "\x9b",
                 question="Q " + HOSTILE, definition="# D " + HOSTILE)
    first["levels"]["5"] = "L " + HOSTILE
    data["rules"][0]["text"] = "> R " + HOSTILE
    fluency = data["penalties"][0]
    fluency["label"] = "Flu " + HOSTILE
    fluency["types"][0].update(label="T " + HOSTILE, example="E | " + HOSTILE)
    data["examples"][0].update(caption="C " + HOSTILE, why="W " + HOSTILE)
    data["resolution_reasons"][0]["label"] = "Why " + HOSTILE
    return data


def store_hostile_rubric(engine) -> None:
    """Put the hostile rubric in the database as thumb-1.0, as an old import (before the
    gate) or a hand edit would have."""
    table = RubricRecord.__table__
    with engine.begin() as connection:
        connection.execute(update(table).where(table.c.signature == "thumb-1.0")
                           .values(definition=json.dumps(hostile_definition(),
                                                         sort_keys=True)))


def assert_shown_literally(text: str) -> None:
    assert not re.search("[\x1b\x07\x9b\u202e]", text), repr(text[:300])


@pytest.mark.slow
async def test_a_hostile_stored_rubric_reaches_no_screen_raw(tmp_path):
    """Item 1's reproduction: `?` used to write the label's OSC 52 into the terminal."""
    engine = sample_engine(tmp_path)
    store_hostile_rubric(engine)
    app = make_app(engine)
    assert app.first_screen.session.rubric.title == "Rubric " + HOSTILE
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        statics = "\n".join(str(widget.render()) for widget in app.screen.query(Static))
        assert_shown_literally(screen_text(app) + statics)
        assert "P\\x9b" in statics  # the short label, on the key bar and the cards
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        source = app.screen.query_one(Markdown).source
        assert_shown_literally(source)
        shown = screen_text(app)
        assert_shown_literally(shown)
        assert "Rubric \\x1b]52;c;UFdORUQ=\\x07\\x1b[31m\\x9b31m\\u202e[@click=app.quit]q[/]" \
            in shown
        await pilot.press("escape", "5", "4", "up", "f")
        assert isinstance(app.screen, FluencyScreen)
        prompts = [app.screen.query_one(OptionList).get_option_at_index(0).prompt]
        assert isinstance(prompts[0], Text)
        assert_shown_literally(prompts[0].plain + screen_text(app))
        assert "T \\x1b]52;c;UFdORUQ=\\x07" in prompts[0].plain
        assert "[@click=app.quit]q[/]" in prompts[0].plain
        await pilot.press("escape")
        assert app.is_running  # no [@click=app.quit] was interpreted


def test_the_help_markdown_renders_a_hostile_rubric_as_its_text():
    """Every rubric text is escaped for where it stands in the Markdown: no raw HTML, no
    link, no emphasis, no heading or quote of its own, no control character."""
    import markdown_it

    rubric = parse_rubric(hostile_definition(), check=False)
    source = help_markdown(rubric, [])
    assert_shown_literally(source)
    html = markdown_it.MarkdownIt("commonmark", {"html": False}).enable("table").render(source)
    assert "<b>" not in html and "<em>x" not in html and "<blockquote>" not in html
    assert html.count("<h1>") == 1  # the definition's "# D" is no heading
    assert "&lt;b&gt;" in html and "# D " in html and "&gt; R " in html
    # a legitimate rubric's help is unchanged by the escaping
    assert "*Kasai et al. 2022, Transparent Human Evaluation for Image Captioning (NAACL)*" \
        in help_markdown(THUMB_1_0, [])


async def test_the_reasons_dialog_shows_a_hostile_label_literally():
    rubric = parse_rubric(hostile_definition(), check=False)
    codes = [(r.code, r.label) for r in rubric.resolution_reasons]
    app = ThumbApp(screen=ReasonScreen(codes, []), keymap={})
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        shown = screen_text(app)
        assert_shown_literally(shown)
        assert "Why \\x1b]52" in shown
        assert app.is_running


def test_the_rubric_panel_and_the_reports_labels_escape_a_hostile_rubric():
    from reports.thumb.text import dimension_labels

    rubric = parse_rubric(hostile_definition(), check=False)
    assert_shown_literally(rubric_summary(rubric).plain)
    assert_shown_literally("".join(dimension_labels(rubric).values()))


# ---------------------------------------------------------------------------------------
# The property: no mutation of a valid rubric or keymap file gets past the gate as
# anything but the gate's error (or a rubric that every screen and the database can use)

EXAMPLES = int(os.environ.get("THUMB_FUZZ_TOML_EXAMPLES", "150"))
HOSTILE_TEXT = ["\x1b[2J", OSC52, "\x9b", "\x00", "\r", "\u202e", "\ufeff", "\ud800", "",
                " ", "[bold", "<script>", "x" * 25_000, "a\nb", "5", "precision", "fluency",
                "first-right", "v", "ctrl+n", ","]
HOSTILE_NUMBERS = ["9" * 4300, "1e999", "-1e999", "nan", "inf", "-inf", "-0", "4.5",
                   "400000000", "-5", "0x7fffffff", "1979-05-27", "true", "[]", "{}",
                   "[" * 40 + "]" * 40, "{a=" * 40 + "1" + "}" * 40]
toml_scalars = (st.booleans() | st.integers() | st.floats() | st.sampled_from(HOSTILE_TEXT)
                | st.text(max_size=12) | st.dates())
toml_values = st.recursive(
    toml_scalars,
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.sampled_from(["key", "5", "code", "value", "x", ""]) | st.text(
        max_size=6), children, max_size=3),
    max_leaves=6)


def toml_value(value: object) -> str:
    """A TOML inline value (one line), for a document that the mutations rewrite."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return ("nan" if math.isnan(value) else "inf" if value == math.inf
                else "-inf" if value == -math.inf else repr(value))
    if isinstance(value, str):
        return json.dumps(value)  # JSON's escapes are TOML's (a lone surrogate is refused)
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(map(toml_value, value)) + "]"
    return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}"
                           for k, v in value.items()) + "}"  # type: ignore[attr-defined]


def toml_document(data: dict) -> str:
    return "".join(f"{json.dumps(key)} = {toml_value(value)}\n" for key, value in data.items())


def paths(value: object, path: tuple = ()) -> list[tuple]:
    found = [path] if path else []
    if isinstance(value, dict):
        for key, child in value.items():
            found += paths(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += paths(child, (*path, index))
    return found


@st.composite
def mutated(draw: st.DrawFn, data: dict) -> bytes:
    """A valid file mutated: a value replaced or removed (the document rewritten), or its
    text spliced, cut or given random bytes."""
    kind = draw(st.sampled_from(["value", "value", "delete", "splice", "number", "cut",
                                 "bytes"]))
    if kind in ("value", "delete"):
        document = copy.deepcopy(data)
        path = draw(st.sampled_from(paths(document)))
        parent = document
        for step in path[:-1]:
            parent = parent[step]
        if kind == "delete":
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(toml_values)
        return toml_document(document).encode("utf-8", "surrogatepass")
    raw = toml_document(data).encode("utf-8")
    position = draw(st.integers(0, len(raw)))
    if kind == "cut":
        return raw[:position]
    if kind == "bytes":
        return raw[:position] + draw(st.binary(min_size=1, max_size=8)) + raw[
            position + draw(st.integers(0, 4)):]
    insert = draw(st.sampled_from(HOSTILE_NUMBERS if kind == "number" else HOSTILE_TEXT))
    return raw[:position] + insert.encode("utf-8", "surrogatepass") + raw[
        position + draw(st.integers(0, 6)):]


FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
RUBRIC_DATA = json.loads(json.dumps(dict(THUMB_1_0.definition)))


def test_the_rewritten_valid_files_pass():
    """The property below means something only if the unmutated documents are accepted."""
    assert parse_rubric(parse_toml(toml_document(RUBRIC_DATA).encode(), "r.toml",
                                   max_bytes=1 << 20)) == THUMB_1_0
    assert toml_document({"keymap": {"fluency": "v"}}) == '"keymap" = {"fluency" = "v"}\n'


@pytest.mark.slow
@FUZZ
@given(content=mutated(RUBRIC_DATA))
def test_a_mutated_rubric_is_usable_or_refused_by_the_gate(tmp_path_factory, content):
    path = tmp_path_factory.mktemp("rubric") / "mutated.toml"
    path.write_bytes(content)
    try:
        rubric = load_rubric(path)
    except RubricError as exc:
        lines = str(exc).splitlines()
        assert lines and all(line.startswith(f"{path}: ") for line in lines), lines
        assert_shown_literally(str(exc))
        return
    # accepted: everything that uses a rubric can
    json.dumps(dict(rubric.definition))
    rubric.allowed_ranges()
    help_markdown(rubric, [])
    rubric_summary(rubric)
    for example in rubric.examples:
        rubric.total(**example.scores, **example.penalties)


@FUZZ
@given(content=mutated({"keymap": {"fluency": "v", "next-caption": "down,ctrl+n",
                                   "help": "f1"}}))
def test_a_mutated_keymap_is_usable_or_refused_by_the_gate(content):
    path = keymap_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    try:
        keymap = load_keymap()
    except KeymapError as exc:
        lines = str(exc).splitlines()
        assert lines and all(line.startswith(f"{path}: ") for line in lines), lines
        assert_shown_literally(str(exc))
        return
    for keys in keymap.values():
        assert keys and forbidden_character(keys) is None and " " not in keys
