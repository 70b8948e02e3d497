"""PTB tokenisation as the COCO caption evaluation does it: Stanford's PTBTokenizer (the jar
pycocoevalcap ships) when Java is present, else an equivalent Python tokenizer.
Both lower-case and drop exactly pycocoevalcap's punctuation tokens; each distinct text is
tokenized once per call."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from metrics.base import MetricOption

# Tokens the COCO evaluation removes after tokenising: pycocoevalcap's list as it is. The
# tokenizer runs with -lowerCase, so bracket names come out as "-lrb-" and are kept.
PUNCTUATION = frozenset({"''", "'", "``", "`", "-LRB-", "-RRB-", "-LCB-", "-RCB-", ".", "?",
                         "!", ",", ":", "-", "--", "...", ";"})
# Characters PTBTokenizer takes for the end of a line: inside a text they would shift every
# later line (pycocoevalcap replaces only "\n"), so they become spaces.
_ISOLATOR = "x"  # the line written between two texts; its output lines are skipped
_LINE_BREAKS = re.compile("[\n\r\x0b\x0c\u2028\u2029]")
JAR_NAME = "stanford-corenlp-3.4.1.jar"
# The option of every metric that PTB-tokenises (CIDEr-D, coco-bleu-n, coco-rouge-l, meteor).
TOKENIZER = MetricOption("tokenizer", "tokenizer", "auto",
                         "PTB tokenizer of CIDEr-D, coco-* and meteor: auto (ptb-java when "
                         "Java is present), ptb-java or ptb-python.")


@cache
def ptb_jar() -> Path | None:
    """The Stanford CoreNLP jar inside an installed pycocoevalcap, if any."""
    try:
        import pycocoevalcap.tokenizer as tokenizer_package
    except ImportError:
        return None
    for folder in tokenizer_package.__path__:
        jar = Path(folder) / JAR_NAME
        if jar.is_file():
            return jar
    return None


def java_available() -> bool:
    return shutil.which("java") is not None and ptb_jar() is not None


def _clean(line: str) -> str:
    """pycocoevalcap's clean-up of one tokenizer output line."""
    return " ".join(t for t in line.rstrip().split(" ") if t not in PUNCTUATION)


def tokenize_java(texts: Sequence[str]) -> list[str]:
    """Stanford PTBTokenizer as pycocoevalcap calls it, all texts in one process.

    PTBTokenizer looks past the end of a line (an abbreviation before a capitalised word
    loses its period), so in pycocoevalcap a caption's tokens can depend on the caption
    written after it. A line holding a lower-case word after each text gives every text
    the tokens it has alone (at the end of a file)."""
    jar = ptb_jar()
    if jar is None or shutil.which("java") is None:
        raise RuntimeError("the PTB tokenizer needs Java and pycocoevalcap's CoreNLP jar")
    if not texts:
        return []
    lines = f"\n{_ISOLATOR}\n".join(_LINE_BREAKS.sub(" ", text) for text in texts)
    result = subprocess.run(
        # C1 compilation only: half the CPU time for a run this short, the same tokens
        ["java", "-XX:TieredStopAtLevel=1", "-cp", str(jar),
         "edu.stanford.nlp.process.PTBTokenizer", "-preserveLines", "-lowerCase"],
        input=lines.encode("utf-8"), capture_output=True, check=True,
    )
    output = result.stdout.decode("utf-8").split("\n")[0::2]
    if len(output) < len(texts):
        raise RuntimeError("the PTB tokenizer returned fewer lines than it was given")
    return [_clean(line) for line in output[: len(texts)]]


# PTB names brackets; COCO's punctuation list drops round and curly ones, not square ones.
_BRACKETS = {"(": "-lrb-", ")": "-rrb-", "{": "-lcb-", "}": "-rcb-", "[": "-lsb-",
             "]": "-rsb-"}

# Python equivalent of the PTB rules that matter for captions.
_RULES = [
    (re.compile(r'^"'), " `` "),
    (re.compile(r'(``)'), r" \1 "),
    (re.compile(r'([ (\[{<])"'), r"\1 `` "),
    (re.compile(r"([:,])([^\d])"), r" \1 \2"),
    (re.compile(r"([:,])$"), r" \1 "),
    (re.compile(r"\.\.\."), " ... "),
    (re.compile(r"[;@#$%&?!]"), r" \g<0> "),
    (re.compile(r"--"), " -- "),
    (re.compile(r"[\(\)\{\}\[\]]"), lambda m: f" {_BRACKETS[m.group()]} "),
    (re.compile(r"[<>]"), r" \g<0> "),
    (re.compile(r'"'), " '' "),
    (re.compile(r"([^'])' "), r"\1 ' "),
    (re.compile(r"'([sSmMdD]) "), r" '\1 "),
    (re.compile(r"'(ll|re|ve|LL|RE|VE) "), r" '\1 "),
    (re.compile(r"(n't|N'T) "), r" \1 "),
]


# Words PTBTokenizer keeps with their period (a subset of its list that captions use).
ABBREVIATIONS = {
    "mr.", "mrs.", "ms.", "dr.", "st.", "ave.", "blvd.", "rd.", "jr.", "sr.", "inc.", "co.",
    "corp.", "ltd.", "vs.", "etc.", "u.s.", "u.k.", "a.m.", "p.m.", "no.", "mt.", "ft.",
}


_ACRONYM = re.compile(r"^(?:[a-z]\.){2,}$")


def _split_period(token: str) -> str:
    """A trailing period is its own token (dropped later) unless the word is a known
    abbreviation or an acronym such as t.v., which keep one period."""
    if not token.endswith(".") or not token.strip("."):
        return token
    word = token.rstrip(".")
    if word + "." in ABBREVIATIONS or _ACRONYM.match(word + "."):
        return word + "." + (" ." if token != word + "." else "")
    return word + " ."


def tokenize_python(texts: Sequence[str]) -> list[str]:
    """A regex PTB tokenizer (Treebank rules), lower-cased, punctuation dropped."""
    result = []
    for text in texts:
        words = text.replace("\n", " ").lower().split()
        line = " " + " ".join(_split_period(word) for word in words) + " "
        for pattern, replacement in _RULES:
            line = pattern.sub(replacement, line)
        result.append(_clean(" ".join(line.split())))
    return result


def resolve_tokenizer(backend: str) -> str:
    """The tokenizer `backend` stands for here: `auto` is ptb-java when Java is present."""
    if backend == "auto":
        return "ptb-java" if java_available() else "ptb-python"
    if backend not in ("ptb-java", "ptb-python"):
        raise ValueError(f"unknown tokenizer {backend!r}: expected auto, ptb-java or ptb-python")
    return backend


def tokenize(texts: Sequence[str], backend: str = "auto") -> list[str]:
    """PTB-tokenise, lower-case and drop punctuation, with the resolved backend; each
    distinct text is tokenized once (references shared by many captions, repeated captions)."""
    distinct = list(dict.fromkeys(texts))
    run = tokenize_java if resolve_tokenizer(backend) == "ptb-java" else tokenize_python
    tokens = dict(zip(distinct, run(distinct), strict=True))
    return [tokens[text] for text in texts]
