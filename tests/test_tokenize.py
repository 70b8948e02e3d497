"""PTB tokenization identical to the COCO caption pipeline (pycocoevalcap's PTBTokenizer and
its punctuation filter) on every token, for the Java path, the Python path and plain
captions (tokenized without either)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metrics.text.tokenize import (
    java_available,
    plain_tokens,
    tokenize,
    tokenize_java,
    tokenize_python,
)
from tests.ptb_cases import (
    BRACKET_NAMES,
    CONTRACTIONS,
    EXOTIC,
    HYPHENS,
    INITIALS,
    OTHER,
    QUOTES,
    UNICODE,
    exotic_captions,
    generated_captions,
)

needs_java = pytest.mark.skipif(not java_available(), reason="Java or pycocoevalcap missing")

CAPTIONS = generated_captions(10_000)


def coco_alone(texts: list[str]) -> list[str]:
    """pycocoevalcap's PTBTokenizer output for each text as if it were alone: a neutral
    caption ("x") after each one stops PTB's look-ahead from reaching the next text."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    tokens = PTBTokenizer().tokenize(
        {i: [{"caption": t}, {"caption": "x"}] for i, t in enumerate(texts)})
    return [tokens[i][0] for i in range(len(texts))]


@pytest.fixture(scope="module")
def coco_tokens() -> list[str]:
    return coco_alone(CAPTIONS)


def _differences(ours: list[str], expected: list[str]) -> list[tuple[str, str, str]]:
    return [(text, want, got) for text, want, got in zip(CAPTIONS, expected, ours, strict=True)
            if want != got]


def test_the_generated_captions_are_rich_in_hard_cases():
    joined = "\n".join(CAPTIONS)
    for case in ("(", "[", "{", "-LRB-", "-lrb-", '"', "“", "’", "A.", "--", "—", "-", "é",
                 "東京", "n't"):
        assert joined.count(case) >= 50, case
    assert sum(not text.strip() for text in CAPTIONS) >= 100


@needs_java
def test_java_path_equals_pycocoevalcap_on_every_token(coco_tokens):
    assert _differences(tokenize_java(CAPTIONS), coco_tokens)[:5] == []


@pytest.mark.slow
@needs_java
def test_python_path_equals_pycocoevalcap_on_every_token(coco_tokens):
    assert _differences(tokenize_python(CAPTIONS), coco_tokens)[:5] == []


@pytest.mark.slow
@needs_java
def test_both_paths_equal_pycocoevalcap_on_rarer_token_classes():
    """URLs, e-mail addresses, SGML tags, smileys, file names, fractions, currencies,
    entities, abbreviations before numbers, assimilations, soft hyphens, CP1252 bytes."""
    texts = exotic_captions(5_000, seed=1)
    expected = coco_alone(texts)
    for tokens in (tokenize_java(texts), tokenize_python(texts)):
        assert [(t, e, g) for t, e, g in zip(texts, expected, tokens, strict=True)
                if e != g][:5] == []


@pytest.mark.slow
@needs_java
def test_the_python_path_knows_the_jar_s_unicode_tables():
    """Every code point of the jar-specific tables, and a sample of the whole BMP, alone
    and inside a word."""
    from metrics.text.ptb_lexer import _JAR_NOT_WORD, _JAR_WORD_EXTRA, _code_points

    codes = sorted(_code_points(_JAR_WORD_EXTRA) | _code_points(_JAR_NOT_WORD)
                   | set(range(0x20, 0x10000, 13)) - set(range(0xD800, 0xE000)))
    texts = [f"ab{chr(code)}cd {chr(code)} e{chr(code)}" for code in codes]
    assert [(hex(c), j, p) for c, j, p in zip(codes, tokenize_java(texts),
                                              tokenize_python(texts), strict=True)
            if j != p][:5] == []


# Hard texts for the lexer: the cases' fragments and single characters (ASCII, the cases'
# own, any of the BMP) glued in any order, with or without spaces.
FRAGMENTS = [*EXOTIC, *BRACKET_NAMES, *INITIALS, *HYPHENS, *QUOTES, *CONTRACTIONS, *OTHER,
             *UNICODE, "a", "The", "x", " ", " ", "\n"]
HARD_TEXTS = st.lists(st.sampled_from(FRAGMENTS)
                      | st.characters(max_codepoint=0x7E, min_codepoint=0x20)
                      | st.characters(max_codepoint=0xFFFF, exclude_categories=("Cs",)),
                      max_size=12).map("".join)


@settings(max_examples=300, deadline=None)
@given(HARD_TEXTS)
@pytest.mark.slow
def test_the_lexer_tries_only_rules_that_can_start_at_a_character(text):
    """Skipping the rules that cannot match at a character changes no token: the same
    tokens as trying every rule at every position."""
    from unittest.mock import patch

    import metrics.text.ptb_lexer as lexer

    filtered = lexer.lex(text)
    with patch.object(lexer, "_rules_starting_with", lambda char: lexer._rules()):
        assert lexer.lex(text) == filtered


@pytest.mark.slow  # ten JVM runs
@needs_java
@settings(max_examples=10, deadline=None, derandomize=True)  # the same texts in every run
@given(st.lists(HARD_TEXTS, min_size=200, max_size=200))
def test_the_python_path_equals_the_jar_on_generated_hard_texts(texts):
    assert [(t, j, p) for t, j, p in zip(texts, tokenize_java(texts), tokenize_python(texts),
                                         strict=True) if j != p] == []


@needs_java
def test_the_python_path_equals_the_jar_where_generated_texts_found_it_did_not():
    """The jar's extra word characters (an unassigned U+0378, a modifier letter) end a
    hyphenated word; C++, C# and F# are one token."""
    texts = ["\u0378n-Lrb- x", "a\u0378-b c", "\u02c2x-y", "5-\u0378a", "x-y-z", "C#1",
             "F#.", "C##", "c++x", "xc++", "3C#1", "#c#"]
    assert tokenize_python(texts) == tokenize_java(texts) == [
        "\u0378n -lrb- x", "a\u0378 b c", "\u02c2x y", "5 \u0378a", "x-y-z", "c# 1", "f#",
        "c# #", "c++ x", "xc + +", "3c # 1", "#c #"]


PLAIN_WORDS = ["A", "a", "man", "Dog", "riding", "on", "the", "in", "I", "x", "Two", "US",
               "St", "Mr", "Dr", "No", "Jr", "Inc", "etc", "vs", "May", "Fig", "cannot",
               "gonna", "Cannot", "5", "12", "345", "2020", "6789", "1", "tv", "Co", "Mass"]


def _plain_like(count: int) -> list[str]:
    import random

    rng = random.Random(3)
    texts = []
    for _ in range(count):
        words = [rng.choice(PLAIN_WORDS) + ("," if rng.random() < 0.15 else "")
                 for _ in range(rng.randint(1, 7))]
        texts.append(rng.choice([" ", "  "]).join(words)
                     + rng.choice([".", ".", " .", "", " ", ",.", ". "]))
    return texts


@needs_java
def test_plain_captions_get_pycocoevalcap_tokens_without_a_tokenizer():
    texts = [t for t in dict.fromkeys(_plain_like(5_000)) if plain_tokens(t) is not None]
    assert len(texts) > 1_000
    expected = coco_alone(texts)
    assert [(t, e) for t, e in zip(texts, expected, strict=True) if plain_tokens(t) != e] == []


def test_what_ptb_treats_specially_is_not_plain():
    assert plain_tokens("A man on a horse.") == "a man on a horse"
    assert plain_tokens("Two dogs, a cat ,and a. ") is None  # a comma glued to a word
    assert plain_tokens("A dog and a.") == "a dog and a."  # an initial keeps its period
    for text in ("The man is Mr.", "Sold by Co.", "It cannot fly", "We gonna go",
                 "Call 12 345 6789", "Room 5.", "A (red) ball", "It's red", "Café", "x	y"):
        assert plain_tokens(text) is None, text


@needs_java
def test_the_class_data_archive_changes_nothing_but_speed(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    texts = CAPTIONS[:300]
    first = tokenize_java(texts)  # writes the archive
    archives = list((tmp_path / "thumb-tui").glob("ptb-tokenizer-*.jsa"))
    assert len(archives) == 1 and archives[0].stat().st_size > 0
    assert not list((tmp_path / "thumb-tui").glob("*.partial"))
    assert tokenize_java(texts) == first  # reads it
    archives[0].chmod(0o644)  # the JVM writes it read-only
    archives[0].write_bytes(b"not an archive")  # a damaged one is ignored by the JVM
    assert tokenize_java(texts) == first


@needs_java
@pytest.mark.slow
def test_a_caption_gets_the_tokens_it_has_alone_whatever_follows_it():
    """In one pycocoevalcap call "a." loses its period before a capitalised caption."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    texts = ["A dog and a.", "The cat, Jr.", "U.S."]
    together = PTBTokenizer().tokenize({0: [{"caption": t} for t in texts]})[0]
    alone = [PTBTokenizer().tokenize({0: [{"caption": t}]})[0][0] for t in texts]
    assert together[0] == "a dog and a" and alone[0] == "a dog and a."
    assert tokenize_java(texts) == alone == coco_alone(texts)


@needs_java
def test_brackets_keep_their_lower_case_names_as_pycocoevalcap_does():
    assert tokenize_java(["A (red) ball [x] {y}."]) == ["a -lrb- red -rrb- ball -lsb- x -rsb- "
                                                         "-lcb- y -rcb-"]


@needs_java
def test_line_breaks_inside_a_text_do_not_shift_the_others():
    texts = ["one\rtwo", "three\u2028four", "five\x0bsix\x0cseven", "eight\nnine", "ten"]
    assert tokenize_java(texts) == ["one two", "three four", "five six seven", "eight nine",
                                    "ten"]
    assert tokenize_python(texts) == tokenize_java(texts)


def test_each_distinct_text_is_tokenized_once(monkeypatch):
    import metrics.text.tokenize as module

    seen: list[list[str]] = []

    def recording(texts):
        seen.append(list(texts))
        return [text.lower() for text in texts]

    monkeypatch.setattr(module, "tokenize_python", recording)
    texts = ["B!", "a (x)", "B!", "a (x)", "c;", "A dog.", "A dog."]
    assert tokenize(texts, "ptb-python") == ["b!", "a (x)", "b!", "a (x)", "c;", "a dog",
                                             "a dog"]
    assert seen == [["B!", "a (x)", "c;"]]  # plain captions need no tokenizer


@pytest.mark.parametrize(("java", "lexer_ready", "count", "expected"), [
    (True, False, 1, "ptb-java"),  # a fresh process: compiling the lexer costs more
    (True, True, 10, "ptb-python"),  # few texts: starting the JVM costs more
    (True, True, 1000, "ptb-java"),  # many: one JVM
    (False, False, 1000, "ptb-python"),  # no Java: the lexer whatever the count
])
def test_auto_takes_the_faster_path_for_the_number_of_texts(monkeypatch, java, lexer_ready,
                                                            count, expected):
    import metrics.text.ptb_lexer as lexer
    import metrics.text.tokenize as module

    monkeypatch.setattr(module, "java_available", lambda: java)
    monkeypatch.setattr(lexer, "rules_ready", lambda: lexer_ready)
    assert module.faster_backend(count) == expected
    assert (count >= module.jvm_threshold()) == (expected == "ptb-java")


def _recording_paths(monkeypatch) -> list[str]:
    """Which path each `tokenize` call takes: "python" or "java" (one JVM started)."""
    import metrics.text.tokenize as module

    paths: list[str] = []
    original = module.tokenize_python

    class RecordingJava(module.JavaTokenizer):
        def __init__(self) -> None:
            paths.append("java")
            super().__init__()

    monkeypatch.setattr(module, "JavaTokenizer", RecordingJava)
    monkeypatch.setattr(module, "tokenize_python",
                        lambda texts: (paths.append("python"), original(texts))[1])
    return paths


@needs_java
def test_auto_gives_the_tokens_of_either_path_whichever_it_takes(monkeypatch):
    hard = [text for text in CAPTIONS[:1_500] if plain_tokens(text) is None]
    assert len(hard) > 1_000  # more than `jvm_threshold` with the lexer ready
    tokenize_python(hard[:1])  # the lexer's rules compiled: few texts stay in Python
    paths = _recording_paths(monkeypatch)
    few, many = tokenize(hard[:5], "auto"), tokenize(hard, "auto")
    assert paths == ["python", "java"]
    assert few == many[:5] == tokenize_java(hard[:5])


@needs_java
def test_the_jvm_starts_while_the_texts_are_still_being_read(monkeypatch):
    """It starts once enough texts need it, and tokenizes them as they are found."""
    import metrics.text.tokenize as module

    texts = list(dict.fromkeys(CAPTIONS[:2_000]))
    expected = tokenize_java(texts)
    read: list[str] = []
    started_after: list[int] = []
    original_plain, original_java = module.plain_tokens, module.JavaTokenizer

    class RecordingJava(original_java):
        def __init__(self) -> None:
            started_after.append(len(read))
            super().__init__()

    monkeypatch.setattr(module, "plain_tokens",
                        lambda text: (read.append(text), original_plain(text))[1])
    monkeypatch.setattr(module, "JavaTokenizer", RecordingJava)
    monkeypatch.setattr(module, "jvm_threshold", lambda: 3)
    assert tokenize(texts, "auto") == expected
    hard = [text for text in texts if original_plain(text) is None]
    assert started_after == [texts.index(hard[2]) + 1]  # at the third text that needs it


@needs_java
def test_a_failing_tokenizer_process_gives_a_clear_error(monkeypatch, tmp_path):
    import metrics.text.tokenize as module

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    not_a_jar = tmp_path / "broken.jar"
    not_a_jar.write_text("not a jar")
    monkeypatch.setattr(module, "ptb_jar", lambda: not_a_jar)
    with pytest.raises(RuntimeError, match="the PTB tokenizer failed"):
        tokenize_java(CAPTIONS[:3_000])  # more than a pipe holds: nothing waits forever
    assert not list((tmp_path / "thumb-tui").glob("*.partial"))


@needs_java
def test_an_error_while_the_texts_are_read_stops_the_jvm(monkeypatch):
    import metrics.text.tokenize as module

    sessions: list[module.JavaTokenizer] = []
    original_plain, original_java = module.plain_tokens, module.JavaTokenizer

    class RecordingJava(original_java):
        def __init__(self) -> None:
            super().__init__()
            sessions.append(self)

    def failing(text: str) -> str | None:
        if text == "boom":
            raise ValueError("a bad text")
        return original_plain(text)

    monkeypatch.setattr(module, "plain_tokens", failing)
    monkeypatch.setattr(module, "JavaTokenizer", RecordingJava)
    with pytest.raises(ValueError, match="a bad text"):
        tokenize(["A (red) ball.", "boom"], "ptb-java")
    assert len(sessions) == 1 and sessions[0]._process.poll() is not None
