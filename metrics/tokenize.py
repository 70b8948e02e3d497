"""PTB tokenisation as the COCO caption evaluation does it: Stanford's PTBTokenizer (the jar
pycocoevalcap ships) when Java is present, else an equivalent Python tokenizer.
Both lower-case and drop the same punctuation tokens."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from metrics.base import MetricOption

# Tokens the COCO evaluation removes after tokenising.
PUNCTUATION = {"''", "'", "``", "`", "-LRB-", "-RRB-", "-LCB-", "-RCB-", ".", "?", "!", ",",
               ":", "-", "--", "...", ";", "-lrb-", "-rrb-", "-lcb-", "-rcb-"}
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


def _clean(tokens: Sequence[str]) -> str:
    return " ".join(t for t in tokens if t and t not in PUNCTUATION)


def tokenize_java(texts: Sequence[str]) -> list[str]:
    """Stanford PTBTokenizer, one line per text, exactly as pycocoevalcap calls it."""
    jar = ptb_jar()
    if jar is None or shutil.which("java") is None:
        raise RuntimeError("the PTB tokenizer needs Java and pycocoevalcap's CoreNLP jar")
    lines = "\n".join(text.replace("\n", " ") for text in texts)
    result = subprocess.run(
        ["java", "-cp", str(jar), "edu.stanford.nlp.process.PTBTokenizer", "-preserveLines",
         "-lowerCase"],
        input=lines.encode("utf-8"), capture_output=True, check=True,
    )
    output = result.stdout.decode("utf-8").split("\n")
    if len(output) < len(texts):
        raise RuntimeError("the PTB tokenizer returned fewer lines than it was given")
    return [_clean(line.rstrip().split(" ")) for line in output[: len(texts)]]


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
        result.append(_clean(line.split()))
    return result


def resolve_tokenizer(backend: str) -> str:
    """The tokenizer `backend` stands for here: `auto` is ptb-java when Java is present."""
    if backend == "auto":
        return "ptb-java" if java_available() else "ptb-python"
    if backend not in ("ptb-java", "ptb-python"):
        raise ValueError(f"unknown tokenizer {backend!r}: expected auto, ptb-java or ptb-python")
    return backend


def tokenize(texts: Sequence[str], backend: str = "auto") -> list[str]:
    """PTB-tokenise, lower-case and drop punctuation, with the resolved backend."""
    if resolve_tokenizer(backend) == "ptb-java":
        return tokenize_java(texts)
    return tokenize_python(texts)
