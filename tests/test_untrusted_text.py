"""The shared escaping of untrusted text (rubrics.escape) and the limits on untrusted JSON
(storage.untrusted): what every output and every import rely on."""

from __future__ import annotations

import json

import markdown_it
import pytest
from rich.console import Console
from rich.text import Text

from rubrics import codepoint, for_html, for_markdown, for_markup, forbidden_character, printable
from storage.untrusted import (
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
