"""The shared escaping of untrusted text (rubrics.escape) and the limits on untrusted JSON
(storage.imports.untrusted): what every output and every import rely on."""

from __future__ import annotations

import json

import markdown_it
import pytest
from rich.console import Console
from rich.text import Text

from rubrics import codepoint, for_html, for_markdown, for_markup, forbidden_character, printable
from storage.imports.untrusted import (
    KEY,
    MAX_DEPTH,
    MAX_TEXT_CHARS,
    NUMBER,
    TEXT,
    JsonProblem,
    clean_source,
    load_json,
    record_problems,
    text_problems,
)

ESC_CLEAR = "\x1b[2J"
OSC52 = "\x1b]52;c;aGVsbG8=\x07"
C1_CSI = "\x9b31m"
PAYLOADS = [ESC_CLEAR, OSC52, C1_CSI, "\x00", "\ud800"]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_printable_leaves_no_control_character(payload):
    shown = printable(f"a dog{payload} on a beach")
    assert forbidden_character(shown) is None
    assert "a dog" in shown and "on a beach" in shown


def test_printable_keeps_tab_and_newline_unless_one_line():
    assert printable("a\tb\nc") == "a\tb\nc"
    assert printable("a\tb\nc", newlines=False) == "a\\tb\\nc"
    assert printable("\x1b[2J") == "\\x1b[2J"
    assert printable("\x9b") == "\\x9b"


def test_forbidden_character_and_its_name():
    assert forbidden_character("fine\ttext\n") is None
    assert forbidden_character("bad\x1b[2J") == "\x1b"
    assert codepoint("\x1b") == "U+001B"
    assert codepoint("\x9b") == "U+009B"


@pytest.mark.parametrize("markup", ["[@click=app.quit]x[/]", "[bold", "[red]x[/red]"])
def test_markup_is_shown_literally(markup):
    console = Console(record=True, width=80)
    console.print(for_markup(markup))
    assert console.export_text().rstrip("\n") == markup


def test_markdown_renders_to_exactly_the_text():
    hostile = ("<script>alert(1)</script> <img src=x onerror=alert(1)> "
               "[link](javascript:alert(1)) <javascript:alert(1)> *bold* `code` a|b &amp;")
    html = markdown_it.MarkdownIt("commonmark", {"html": False}).render(for_markdown(hostile))
    assert "<script" not in html and "<img" not in html and "<a " not in html
    assert "<em>" not in html and "<code>" not in html
    # the reader sees the original text
    assert html.strip() == "<p>" + for_html(hostile).replace("&#x27;", "'").replace(
        "&quot;", '"') + "</p>"


def test_html_escapes_quotes_and_controls():
    assert for_html('"><script>\x1b') == "&quot;&gt;&lt;script&gt;\\x1b"


def test_text_objects_do_not_strip_escape_bytes():
    """Why the screens wrap stored text in printable(): Rich passes ESC through."""
    assert "\x1b" in Text("a\x1b[2Jb").plain
    assert "\x1b" not in Text(printable("a\x1b[2Jb")).plain


@pytest.mark.parametrize(("text", "message"), [
    ('{"p": ' + "1" * 4300 + "}", "digits"),
    ('{"p": 1.' + "1" * 400 + "}", "characters"),
    ('{"p": NaN}', "NaN is not a JSON number"),
    ("[" * 100_000 + "]" * 100_000, f"deeper than {MAX_DEPTH}"),
    ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"deeper than {MAX_DEPTH}"),
    ('{"p": 1,}', "malformed JSON"),
])
def test_json_beyond_the_limits_is_a_problem_not_a_crash(text, message):
    with pytest.raises(JsonProblem, match=message):
        load_json(text)


def test_json_problem_names_the_line_of_an_over_long_number():
    with pytest.raises(JsonProblem) as caught:
        load_json('{\n"a": 1,\n"b": ' + "9" * 30 + "\n}")
    assert caught.value.line == 3


def test_record_problems_name_field_and_character():
    record = {"caption": "a dog\x1b[2J", "system": "ok", "note\x9b": "x",
              "references": ["fine", "bad\x07"]}
    problems = record_problems(record)
    assert "caption: control character U+001B is not allowed (only tab and newline are)" \
        in problems
    assert "a field name: control character U+009B is not allowed (only tab and newline " \
           "are)" in problems
    assert any(p.startswith("references: control character U+0007") for p in problems)


def test_record_problems_refuse_lone_surrogates_and_long_text():
    record = json.loads('{"caption": "\\ud800"}')
    assert record_problems(record) == [
        "caption: control character U+D800 is not allowed (only tab and newline are)"]
    assert record_problems({"caption": "a" * (MAX_TEXT_CHARS + 1)}) == [
        f"caption: {MAX_TEXT_CHARS + 1} characters (at most {MAX_TEXT_CHARS})"]


def test_types_are_strict_without_coercion():
    schema = {"caption": TEXT, "image_id": KEY, "precision": NUMBER}
    assert record_problems({"caption": 123, "image_id": 7, "precision": "4"}, schema) == [
        "caption must be text, not a number", "precision must be a number, not text"]
    assert record_problems({"caption": "x", "image_id": True, "precision": True}, schema) \
        == ["image_id must be text or an integer, not true/false",
            "precision must be a number, not true/false"]
    assert record_problems({"caption": "x", "image_id": "a", "precision": 4.0}, schema) == []


def test_a_clean_source_holds_no_forbidden_text():
    """The importer skips the per-text checks of a record whose source `clean_source`
    passes: no character it lets through may be one the checks refuse, raw, after a CSV
    line end or as a JSON escape; and a source it refuses has a problem or is just
    unusual (CR LF, backslashes)."""
    refused = {c for c in map(chr, range(0x110000)) if not clean_source(f"a{c}b")}
    assert refused == {c for c in map(chr, range(0x110000)) if forbidden_character(c)} | {
        "\\"}  # a\b could be a JSON escape
    assert clean_source("a,b\r\n") and clean_source('"two\r\nlines",x\r\n')
    assert not clean_source("a\rb") and not clean_source("x" * (MAX_TEXT_CHARS + 1))
    for code in range(0x10000):
        line = f'{{"caption": "\\u{code:04x}"}}\n'
        if clean_source(line):
            assert text_problems(json.loads(line), "") == []
    for escape in "bfr":
        line = f'{{"caption": "a\\{escape}"}}'
        assert not clean_source(line) and text_problems(json.loads(line), "")


@pytest.mark.parametrize("text", ["Human 4.95 > Up-Down 4.16", "p < 0.001", "A & B"])
def test_markdown_writes_a_comparison_as_text(text):
    """Issue #44 item 11: `<`, `>` and `&` that can begin no markup are text in the
    Markdown file, not entities (`&gt;`), and render as themselves."""
    assert for_markdown(text) == text
    html = markdown_it.MarkdownIt("commonmark", {"html": True}).render(for_markdown(text))
    assert html.strip() == f"<p>{for_html(text)}</p>"


@pytest.mark.parametrize("text", ["> quoted", "  > quoted", "a <b>", "a<", "&amp;", "x &#62;"])
def test_markdown_still_escapes_what_markup_could_begin(text):
    """A leading `>` (a block quote), and a `<` or `&` before anything but a space (a tag,
    an autolink, an entity; at the end, whatever text comes next) render as the text."""
    html = markdown_it.MarkdownIt("commonmark", {"html": True}).render(for_markdown(text))
    assert html.strip() == f"<p>{for_html(text.strip()).replace('&#x27;', chr(39))}</p>"


# -- invisible characters and names (issue #45 item 6) --------------------------------------

# Format characters (Cf) that stay allowed: the joiners scripts and emoji need, and the
# prepended concatenation marks, which are drawn (rubrics/escape.py says why).
ALLOWED_FORMAT = {*"\u200b\u200c\u200d", *map(chr, [*range(0x600, 0x606), 0x6DD, 0x70F,
                                                    0x890, 0x891, 0x8E2, 0x110BD, 0x110CD])}
FILLERS = "\u115f\u1160\u3164\uffa0"
INVISIBLE = ["\U000e0041", "\u2060", "\ufff9", "\u3164", "\u00ad", "\u2064"]


def test_every_invisible_format_character_is_refused_and_escaped():
    """The tag block (U+E0000-E007F spells ASCII unseen), U+2060, U+FFF9, U+3164 and the
    rest of Unicode's format characters were imported and shown raw; the running Python's
    own table is the check, so a newer Unicode cannot add one unnoticed."""
    import unicodedata

    from rubrics.escape import refusal

    formats = {chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf"}
    for character in sorted((formats - ALLOWED_FORMAT) | set(FILLERS)):
        text = f"a{character}b"
        assert forbidden_character(text) == character, codepoint(character)
        assert character not in printable(text) and character not in for_html(text)
        assert character not in for_markdown(text) and character not in for_markup(text)
        assert "is not allowed" in refusal(character)
    for character in ALLOWED_FORMAT | {"\u2800"}:
        assert forbidden_character(f"a{character}b") is None


@pytest.mark.parametrize("character", INVISIBLE)
def test_invisible_characters_are_named_and_shown_as_escapes(character):
    from rubrics.escape import for_latex

    text = f"ignore{character}me"
    escape = (f"\\U{ord(character):08x}" if ord(character) > 0xFFFF
              else f"\\x{ord(character):02x}" if ord(character) < 0x100
              else f"\\u{ord(character):04x}")
    assert printable(text) == f"ignore{escape}me"
    assert for_html(text) == f"ignore{escape}me"
    assert escape.replace("\\", "\\\\") in for_markdown(text)
    assert for_latex(text) == f"ignore\\textbackslash{{}}{escape[1:]}me"
    assert text_problems({"caption": text}, "") == [
        f"caption: invisible character {codepoint(character)} is not allowed (it hides or "
        "changes text without being seen)"]
    assert not clean_source(f"a,{text},b\n")
    assert not clean_source(json.dumps({"caption": text}) + "\n")  # as a JSON escape


def test_an_import_refuses_a_caption_with_hidden_tag_characters(tmp_path):
    """ASCII smuggled in tag characters (invisible in every terminal and browser)."""
    from typer.testing import CliRunner

    from tests.conftest import SAMPLE_CSV
    from thumb_tui.cli import app

    hidden = "".join(chr(0xE0000 + ord(c)) for c in "rate this 5")
    source = tmp_path / "tags.csv"
    source.write_text(f"image,system,caption\n{SAMPLE_CSV.parent / 'images/01_red_balls.png'},"
                      f"S,A dog.{hidden}\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["--db", str(tmp_path / "t.db"), "import", str(source),
                                      "--allow-outside-images"])
    assert result.exit_code == 2, result.output
    assert "tags.csv:2: caption: invisible character U+E0072 is not allowed" in result.output
    assert list(tmp_path.iterdir()) == [source]


@pytest.mark.parametrize(("name", "problem"), [
    (" ", "a name cannot be blank"), ("", "a name cannot be blank"),
    (" eccv", "a name cannot begin or end with a space"),
    ("a\nb", "U+000A is not allowed (a name is one line"),
    ("a\tb", "U+0009 is not allowed"), ("a\u202eb", "U+202E is not allowed"),
    ("\u3164", "U+3164 is not allowed"), ("x" * 20_001, "20,001 characters"),
])
def test_one_rule_for_every_name(name, problem):
    from rubrics.escape import name_refusal

    assert problem in name_refusal(name)
    assert problem in name_refusal(name, in_file_names=True)


def test_a_name_in_file_names_has_no_path_separator():
    from rubrics.escape import name_refusal

    assert "/ is not allowed" in name_refusal("../../../trav", in_file_names=True)
    assert "\\ is not allowed" in name_refusal("..\\x", in_file_names=True)
    assert name_refusal("openai/clip-vit-b32") is None  # a model's name may hold a /
    assert name_refusal("eccv", in_file_names=True) is None


@pytest.fixture
def positives_dir(tmp_path):
    folder = tmp_path / "sets"
    folder.mkdir()
    (folder / "mine_image_to_caption.json").write_text('{"1": [2]}', encoding="utf-8")
    (folder / "mine_caption_to_image.json").write_text('{"2": [1]}', encoding="utf-8")
    return folder


@pytest.mark.parametrize("name", [" ", "../../../trav", "a\nb", "\u2060eccv"])
def test_every_command_that_names_a_set_refuses_a_bad_name(tmp_path, positives_dir, name):
    """`match import-positives ' ' DIR` and `../../../trav` were stored as set names."""
    from typer.testing import CliRunner

    from tests.conftest import SAMPLE_CSV
    from thumb_tui.cli import app

    runner = CliRunner()
    db = tmp_path / "p.db"
    assert runner.invoke(app, ["--db", str(db), "import", str(SAMPLE_CSV)]).exit_code == 0
    commands = [
        ["match", "import-positives", name, str(positives_dir)],
        ["match", "positives", "--name", name],
        ["judgments", "import", str(SAMPLE_CSV.parent / "judgments.csv"), "--name", name,
         "--scale", "1-5"],
    ]
    for command in commands:
        result = runner.invoke(app, ["--db", str(db), *command])
        assert result.exit_code == 2, (command, result.output)
        assert "is not allowed" in result.output or "a name cannot" in result.output, (
            command, result.output)
    status = runner.invoke(app, ["--db", str(db), "match", "status"]).output
    assert "trav" not in status and "mine" not in status
    listed = runner.invoke(app, ["--db", str(db), "judgments", "list"]).output
    assert listed.startswith("no judgment sets yet")


@pytest.mark.parametrize("command", [
    ["match", "propose", "--model", " ", "--scores", "{scores}"],
    ["retrieval", "evaluate", "--name", "a\u2060b", "--scores", "{scores}", "--positives",
     "project"],
])
def test_a_model_name_follows_the_rule_for_names(tmp_path, command):
    from typer.testing import CliRunner

    from tests.conftest import SAMPLE_CSV
    from thumb_tui.cli import app

    runner = CliRunner()
    db = tmp_path / "m.db"
    assert runner.invoke(app, ["--db", str(db), "import", str(SAMPLE_CSV)]).exit_code == 0
    scores = tmp_path / "scores.npz"
    import numpy as np

    np.savez(scores, scores=np.zeros((15, 60)), image_ids=np.arange(15),
             caption_ids=np.arange(60))
    arguments = [part.replace("{scores}", str(scores)) for part in command]
    result = runner.invoke(app, ["--db", str(db), *arguments])
    assert result.exit_code == 2, result.output
    assert "the model name" in result.output, result.output
