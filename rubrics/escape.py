"""Imported text is untrusted. This is the one place that says which characters an import
refuses and how stored text is escaped for each output: a terminal (control bytes), Rich
markup, Markdown, HTML and LaTeX. Every layer uses it, so a byte that slipped into the
database by another way (an old import, a hand-edited file) still reaches no terminal,
browser or TeX raw.
"""

from __future__ import annotations

import html
import re

# C0 controls except tab and newline, DEL, C1 controls, and lone surrogates (which no
# UTF-8 file or database can hold): the ranges of a regular-expression class.
CONTROL_CHARACTERS = "\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff"
# Invisible characters that change how the text around them is shown: the bidirectional
# marks, embeddings, overrides and isolates (ALM U+061C, LRM/RLM U+200E-200F, LRE..RLO
# U+202A-202E, LRI..PDI U+2066-2069), with which "evil.exe\u202egpj.txt" reads as
# "evil.exetxt.jpg", and U+FEFF, a byte order mark (deprecated as a zero-width no-break
# space since Unicode 3.2) that only a concatenation accident puts inside a text. Zero-width
# space, non-joiner and joiner (U+200B-200D) are allowed: Thai, Khmer and Burmese text
# marks word breaks with the first, Persian and Indic scripts spell words with the other
# two, and emoji sequences need the joiner; they reorder nothing. Identifiers (a rubric's
# codes, ids and short labels) allow none of them (rubrics/schema.py).
BIDI_CHARACTERS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff"
# Characters that show nothing yet hide, join or smuggle text: every other format character
# (Unicode category Cf: the soft hyphen U+00AD, the Mongolian vowel separator U+180E, the
# word joiner and invisible operators U+2060-2064, the deprecated U+206A-206F, interlinear
# annotation U+FFF9-FFFB, the Egyptian, shorthand and musical format controls, and the tag
# block U+E0001, U+E0020-E007F, which spells ASCII invisibly), and the Hangul fillers (U+115F,
# U+1160, U+3164, U+FFA0: letters that render as blanks, used as invisible names). Left
# allowed: the prepended concatenation marks (U+0600-0605, U+06DD, U+070F, U+0890-0891,
# U+08E2, U+110BD, U+110CD), which are drawn, and U+2800 (a braille cell, a real character).
# Refusing the tag block refuses the subdivision flags (England, Scotland, Wales) in text.
# Listed as of Unicode 15.1; tests/test_untrusted_text.py checks the running Python's own.
INVISIBLE_CHARACTERS = ("\u00ad\u115f\u1160\u180e\u2060-\u2064\u206a-\u206f\u3164"
                        "\uffa0\ufff9-\ufffb\U00013430-\U0001343f\U0001bca0-\U0001bca3"
                        "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f")
FORMAT_CHARACTERS = BIDI_CHARACTERS + INVISIBLE_CHARACTERS
# What an import refuses and every output shows as an escape (`\x1b`, `\u202e`).
FORBIDDEN_CHARACTERS = CONTROL_CHARACTERS + FORMAT_CHARACTERS
MAX_TEXT_CHARS = 20_000  # an imported text: a caption, reference, note, name or path
_FORBIDDEN = re.compile(f"[{FORBIDDEN_CHARACTERS}]")
_FORBIDDEN_OR_NEWLINE = re.compile(f"[\t\n{FORBIDDEN_CHARACTERS}]")
# Emphasis, code and strike-through characters, `$` (GitHub reads `$x$` as math), and the
# `]` that would close a link or an image (`](` or `][`); a lone `[` or `]` is plain text
# in CommonMark and stays readable.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_~$]|\](?=[(\[]))")
_MARKDOWN_TABLE_SPECIAL = re.compile(r"([\\`*_~$|]|\](?=[(\[]))")
# HTML's `<` and `&` where they could begin a tag, an autolink or an entity: anywhere but
# before a space (at the end too: the text after it is not known). `p < 0.001` and
# `A & B` are text as they are.
_MARKDOWN_HTML = re.compile(r"[<&](?!\s)")
_HTML_ENTITIES = {"<": "&lt;", "&": "&amp;"}
# A `>` closes nothing once `<` is escaped; at the start of a line it begins a block quote.
_BLOCK_QUOTE = re.compile(r"^( *)>")


def forbidden_character(text: str) -> str | None:
    """The first character an import refuses in `text` (a control character other than
    tab and newline, a lone surrogate, a bidirectional formatting character, a byte order
    mark or another invisible character), or None."""
    match = _FORBIDDEN.search(text)
    return match.group() if match else None


def codepoint(character: str) -> str:
    """`U+001B`: how error messages name a character without printing it."""
    return f"U+{ord(character):04X}"


_BIDI = re.compile(f"[{BIDI_CHARACTERS}]")
_INVISIBLE = re.compile(f"[{INVISIBLE_CHARACTERS}]")


def refusal(character: str) -> str:
    """Why a forbidden character is refused, naming it by code point: `control character
    U+001B is not allowed (only tab and newline are)`."""
    if character == "\ufeff":
        return f"invisible character {codepoint(character)} (byte order mark) is not allowed"
    if _BIDI.fullmatch(character):
        return (f"bidirectional formatting character {codepoint(character)} is not allowed "
                "(it reorders the text shown around it)")
    if _INVISIBLE.fullmatch(character):
        return (f"invisible character {codepoint(character)} is not allowed (it hides or "
                "changes text without being seen)")
    return f"control character {codepoint(character)} is not allowed (only tab and newline are)"


def text_refusal(text: str, limit: int = MAX_TEXT_CHARS) -> str | None:
    """Why an imported text is refused, or None: longer than `limit` characters (the
    import's 20,000 unless said otherwise: `20,001 characters (at most 20,000)`), or holding
    a forbidden character (`control character U+001B is not allowed …`). The one check
    every reader of a user's file applies to each text it takes from it (ids, names)."""
    if len(text) > limit:
        return f"{len(text):,} characters (at most {limit:,})"
    character = forbidden_character(text)
    return None if character is None else refusal(character)


def name_refusal(name: str, *, in_file_names: bool = False) -> str | None:
    """Why a name someone gives is refused, or None: the one rule for every name the tool
    stores and shows (annotators, judgment sets, positive sets, models). A name labels rows
    in tables, on screens and in exports, so it must be seen as typed: not blank, without
    a space at either end, on one line (no tab or newline), without a character an import
    refuses, at most MAX_TEXT_CHARS. A set's name (positive and judgment sets) may become
    part of file names (`in_file_names`: a positive set's eccv-json files are
    `NAME_image_to_caption.json`), so it has no `/` or `\\` either: it names files in the
    folder asked for, never a path out of it (`../../x`). A model's name keeps its `/`
    (`openai/clip-vit-base-patch32`)."""
    if not name.strip():
        return "a name cannot be blank"
    if len(name) > MAX_TEXT_CHARS:
        return f"{len(name):,} characters (at most {MAX_TEXT_CHARS:,})"
    character = _FORBIDDEN_OR_NEWLINE.search(name)
    if character is not None:
        return (f"{codepoint(character.group())} is not allowed (a name is one line, without "
                "tabs, control, bidirectional or invisible characters)")
    if name != name.strip():
        return "a name cannot begin or end with a space"
    separator = next((c for c in "/\\" if c in name), None) if in_file_names else None
    if separator is not None:
        return (f"{separator} is not allowed (the name is part of file names, "
                f"NAME_image_to_caption.json, and names no folder)")
    return None


def _visible(match: re.Match[str]) -> str:
    character = match.group()
    if character == "\n":
        return "\\n"
    if character == "\t":
        return "\\t"
    if ord(character) < 0x100:
        return f"\\x{ord(character):02x}"
    return f"\\u{ord(character):04x}" if ord(character) < 0x10000 else f"\\U{ord(character):08x}"


def printable(text: str, *, newlines: bool = True) -> str:
    """`text` safe for a terminal: every control character, bidirectional formatting
    character, byte order mark and invisible character shown as an escape (`\\x1b`,
    `\\u202e`, `\\U000e0041`), so it is seen but never acted on. With `newlines=False`
    (one-line output such as an error message or a table cell) newlines and tabs are shown
    as `\\n`, `\\t` too."""
    pattern = _FORBIDDEN if newlines else _FORBIDDEN_OR_NEWLINE
    return pattern.sub(_visible, text)


def for_markup(text: str, *, newlines: bool = True) -> str:
    """`text` to put inside Rich/Textual markup: printable, with `[` escaped so that it is
    shown literally and never read as a tag (`[@click=app.quit]`, an unbalanced `[bold`)."""
    from rich.markup import escape

    return escape(printable(text, newlines=newlines))


def for_markdown(text: str, *, table_cell: bool = False) -> str:
    """`text` as one line of Markdown that renders as exactly this text: printable (so it
    cannot start a line of its own); `<` and `&` as entities where they could begin raw
    HTML, an autolink or an entity, and a leading `>` backslash-escaped (no block quote),
    so that a comparison reads as one in the Markdown file (`A > B`, `p < 0.001`, not
    `&gt;`); emphasis, code, strike-through, math (`$`) and link-closing characters
    backslash-escaped; in a table cell also `|`."""
    special = _MARKDOWN_TABLE_SPECIAL if table_cell else _MARKDOWN_SPECIAL
    escaped = special.sub(r"\\\1", printable(text, newlines=False))
    escaped = _MARKDOWN_HTML.sub(lambda match: _HTML_ENTITIES[match.group()], escaped)
    return _BLOCK_QUOTE.sub(r"\1\\>", escaped)


def for_html(text: str) -> str:
    """`text` as HTML text or an attribute value: printable, `<>&"'` as entities."""
    return html.escape(printable(text), quote=True)


# A spreadsheet reads a cell that begins with one of these as a formula (`=HYPERLINK(…)`,
# `=cmd|' /C calc'!A0`, `@SUM(…)`, `+1+1`, `-1+1`) or, after a tab or carriage return,
# strips them and may do so: OWASP's CSV-injection rule. Leading quotes are counted too,
# so that the escape can be undone exactly (see `for_spreadsheet`).
_FORMULA_START = re.compile("'*[=+\\-@\t\r]")


def for_spreadsheet(text: str) -> str:
    """`text` as a CSV cell that a spreadsheet shows as text and never evaluates: one `'`
    put before a text that begins with `=`, `+`, `-`, `@`, a tab or a carriage return
    (OWASP's rule), and before one that begins with quotes followed by one of those, so
    that `from_spreadsheet` gives back exactly the text (`'=x` → `''=x` → `'=x`). Numbers
    are never passed here: only text cells are escaped."""
    return "'" + text if _FORMULA_START.match(text) else text


def from_spreadsheet(text: str) -> str:
    """The text `for_spreadsheet` escaped: one leading `'` removed from a cell that begins
    with quotes followed by `=`, `+`, `-`, `@`, a tab or a carriage return; any other cell
    as it is. A CSV import applies it to every cell, so that an export imports back."""
    return text[1:] if text.startswith("'") and _FORMULA_START.match(text, 1) else text


# LaTeX: the ten characters that mean something in text mode, and `[`, `]`, `*`, which
# `\\` (a table row's end) reads as its optional argument or star when a row begins with
# them; each becomes a command or a braced group that prints the character itself.
_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$",
                  "&": r"\&", "#": r"\#", "^": r"\textasciicircum{}", "_": r"\_",
                  "%": r"\%", "~": r"\textasciitilde{}", "[": "{[}", "]": "{]}", "*": "{*}"}
# Greek letters and the mathematical signs a label may hold, typeset in math mode: the T1
# text fonts have no glyph for them.
_LATEX_MATH = {"α": r"\alpha", "β": r"\beta", "γ": r"\gamma", "δ": r"\delta",
               "ε": r"\epsilon", "ζ": r"\zeta", "η": r"\eta", "θ": r"\theta",
               "ι": r"\iota", "κ": r"\kappa", "λ": r"\lambda", "μ": r"\mu", "ν": r"\nu",
               "ξ": r"\xi", "π": r"\pi", "ρ": r"\rho", "σ": r"\sigma", "τ": r"\tau",
               "υ": r"\upsilon", "φ": r"\phi", "χ": r"\chi", "ψ": r"\psi",
               "ω": r"\omega", "Γ": r"\Gamma", "Δ": r"\Delta", "Θ": r"\Theta",
               "Λ": r"\Lambda", "Ξ": r"\Xi", "Π": r"\Pi", "Σ": r"\Sigma",
               "Υ": r"\Upsilon", "Φ": r"\Phi", "Ψ": r"\Psi", "Ω": r"\Omega",
               "≤": r"\leq", "≥": r"\geq", "≠": r"\neq", "≈": r"\approx",
               "→": r"\rightarrow", "←": r"\leftarrow", "∞": r"\infty", "−": "-"}
# What T1 fonts and the utf8 input encoding typeset (checked with TeX Live 2022): Latin-1,
# Latin Extended-A but for nine letters (U+0126-0127, U+0138, U+013F-0140, U+0149,
# U+0166-0167, U+017F), dashes, quotes, the ellipsis, daggers, per mille, bullet, euro
# and trade mark signs. Any other character is written
# as its escape (`\u4e2d`), so that no stored text can stop a document from compiling.
_LATEX_TEXT = ("\x20-\x7e\u00a0-\u0125\u0128-\u0137\u0139-\u013e\u0141-\u0148"
               "\u014a-\u0165\u0168-\u017e\u2013\u2014\u2018\u2019\u201c-\u201e\u2020"
               "\u2021\u2022\u2026\u2030\u2039\u203a\u20ac\u2122")
# A character that starts one of T1's ligatures (`--` en dash, `<<` guillemet, `!``
# inverted mark, `,,` low quotes) when another follows it: `{}` keeps the two apart.
_LATEX_CHARACTER = re.compile("[\\\\{}$&#^_%~\\[\\]*]|[-`'<>,!?](?=[-`'<>,])"
                              f"|[^{_LATEX_TEXT}]")


def _latex_character(match: re.Match[str]) -> str:
    character = match.group()
    if character in _LATEX_SPECIAL:
        return _LATEX_SPECIAL[character]
    if character in _LATEX_MATH:
        return f"\\ensuremath{{{_LATEX_MATH[character]}}}"
    if re.fullmatch(f"[{_LATEX_TEXT}]", character):
        return character + "{}"  # a ligature's first character
    return rf"\textbackslash{{}}u{ord(character):04x}"


def for_latex(text: str) -> str:
    """`text` as LaTeX text (T1 fonts, utf8 input) that prints exactly this text on one
    line: printable (control characters and newlines shown as `\\x1b`, `\\n`), the special
    characters as the commands that print them, no ligature, and a character the fonts
    lack as its escape. A system name with `\\input` or `$` compiles and shows as typed."""
    return _LATEX_CHARACTER.sub(_latex_character, printable(text, newlines=False))
