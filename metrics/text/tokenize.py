"""PTB tokenisation as the COCO caption evaluation does it: Stanford's PTBTokenizer (the jar
pycocoevalcap ships) or the same lexer in Python (metrics.text.ptb_lexer), the same tokens either
way; plain captions need neither. `auto` picks per call whichever takes less time for the
texts that need PTB's rules (one JVM for many; the Python lexer for few, once its rules are
compiled in the process, or without Java). All lower-case and drop exactly pycocoevalcap's
punctuation tokens; each distinct text is tokenized once per call. `Tokenization` lets the
caller work on the tokens it has while the JVM (another process, another core) works."""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
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
                         "Java is present; CIDEr-D lexes few texts in Python where that is "
                         "faster, the same tokens), ptb-java or ptb-python.")
# What each way of applying PTB's rules costs on a 2-core machine, between a quiet and a
# loaded one (benchmarks/cider_tokenize.py measures them again and prints the crossover):
# one JVM starts in 0.08-0.15 s (its class-data archive written) and then takes about
# 0.02-0.04 ms a text; the Python lexer takes about 0.3 ms a text, after compiling its
# rules once per process (0.22-0.3 s). So a fresh process always starts the JVM, and one
# whose lexer is ready lexes fewer than about 370 texts itself.
JVM_START_SECONDS = 0.1
JVM_TEXT_SECONDS = 0.00003
LEXER_START_SECONDS = 0.25
LEXER_TEXT_SECONDS = 0.0003


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
    return " ".join([token for token in line.rstrip().split(" ") if token not in PUNCTUATION])


def _cache_folder() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "thumb-tui"


def _class_data_flags(jar: Path) -> tuple[list[str], tuple[Path, Path] | None]:
    """JVM flags that map the tokenizer's classes from a class-data-sharing archive (a
    tenth of the run's time): the first run writes it to the user's cache folder (returned:
    the file it writes and where that goes once complete), later runs load it. The JVM
    checks that an archive fits its version and class path and ignores one that does not;
    JVMs older than JDK 13 ignore the flags; the tokens are the same with or without it."""
    stat = jar.stat()
    java = os.path.realpath(shutil.which("java") or "java")
    key = hashlib.sha256(f"{jar.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{java}".encode())
    archive = _cache_folder() / f"ptb-tokenizer-{key.hexdigest()[:16]}.jsa"
    if archive.is_file():
        return [f"-XX:SharedArchiveFile={archive}"], None
    try:
        archive.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return [], None
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.partial")
    return [f"-XX:ArchiveClassesAtExit={partial}"], (partial, archive)


class JavaTokenizer:
    """One Stanford PTBTokenizer process, as pycocoevalcap calls it, that tokenizes texts as
    they are added: it starts while the caller is still finding the texts that need it and
    reads them as they come (the JVM works on another core), and its tokens can be taken
    as it writes them (`arrived`). Texts go down a non-blocking pipe (what does not fit
    waits for the next batch) and tokens into a file: no thread competes with the caller
    for the interpreter, and neither side can wait on the other for ever.

    PTBTokenizer looks past the end of a line (an abbreviation before a capitalised word
    loses its period), so in pycocoevalcap a caption's tokens can depend on the caption
    written after it. A line holding a lower-case word after each text gives every text
    the tokens it has alone (at the end of a file)."""

    BATCH = 256  # texts written to the process at once

    def __init__(self) -> None:
        jar = ptb_jar()
        if jar is None or shutil.which("java") is None:
            raise RuntimeError("the PTB tokenizer needs Java and pycocoevalcap's CoreNLP jar")
        sharing, self._archiving = _class_data_flags(jar)
        # files, not pipes, for what it writes: a pipe read only at the end could fill
        self._output = tempfile.TemporaryFile()  # noqa: SIM115 (closed by `close`)
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115 (closed by `close`)
        self._process = subprocess.Popen(
            # C1 compilation only: half the CPU time for a run this short, the same tokens.
            # Untokenizable characters are deleted as by default, but not reported: the
            # report loads java.util.logging (0.03 s of a 0.1 s start), the tokens are equal.
            # Measured no faster: -XX:+UseSerialGC, -XX:-UsePerfData, -XX:CICompilerCount=1,
            # earlier compilation (-XX:CompileThresholdScaling); -Xint is ten times slower
            ["java", "-XX:+IgnoreUnrecognizedVMOptions", "-XX:TieredStopAtLevel=1", *sharing,
             "-cp", str(jar), "edu.stanford.nlp.process.PTBTokenizer", "-preserveLines",
             "-lowerCase", "-options", "untokenizable=noneDelete"],
            stdin=subprocess.PIPE, stdout=self._output, stderr=self._errors)
        assert self._process.stdin is not None
        self._stdin = self._process.stdin
        self._input = self._stdin.fileno()
        os.set_blocking(self._input, False)
        self._pending: list[str] = []
        self._unsent = bytearray()
        self._count = 0  # texts sent
        self._finished = False  # no more texts: the input ends once they are written
        self._read = 0  # bytes of output read by `arrived`
        self._lines: list[str] = []  # output lines read, not yet given
        self._given = 0  # texts whose tokens `arrived` gave

    def add(self, text: str) -> None:
        self._pending.append(text)
        if len(self._pending) >= self.BATCH:
            self._send()

    def _send(self) -> None:
        """Write the pending texts, or as much of them as the pipe takes now; end the
        input once all is written after `finish`."""
        self._unsent += "".join(f"{_LINE_BREAKS.sub(' ', text)}\n{_ISOLATOR}\n"
                                for text in self._pending).encode("utf-8")
        self._count += len(self._pending)
        self._pending = []
        with contextlib.suppress(BlockingIOError, BrokenPipeError):  # the pipe is full; the
            while self._unsent:  # process has ended (`tokens` says why)
                del self._unsent[:os.write(self._input, self._unsent)]
        if self._finished and not self._unsent:
            with contextlib.suppress(OSError):
                self._stdin.close()

    def finish(self) -> None:
        """No more texts: the rest is written as the pipe takes it (`arrived`, `tokens`)."""
        self._finished = True
        self._send()

    def arrived(self, batch: int) -> list[str] | None:
        """The tokens of the next texts the process has finished, once `batch` of them are
        (fewer at its end), feeding it the input meanwhile; None when it has no more to give
        (`tokens` then has the rest, or says why it failed). No texts are added after it."""
        self._finished = True  # else the process would wait for more input, and this for it
        while True:
            self._send()
            ended = self._process.poll() is not None
            size = os.fstat(self._output.fileno()).st_size
            if size > self._read:  # whole lines only: the process writes as it goes
                chunk = os.pread(self._output.fileno(), size - self._read, self._read)
                whole = chunk.rfind(b"\n") + 1
                self._read += whole
                self._lines += chunk[:whole].decode("utf-8").split("\n")[:-1]
            ready = min(len(self._lines) // 2, self._count - self._given)
            if ready >= batch or (ended and ready):
                lines = self._lines[: 2 * ready : 2]
                del self._lines[: 2 * ready]
                self._given += ready
                return [_clean(line) for line in lines]
            if ended:
                return None
            time.sleep(0.002)

    def tokens(self) -> list[str]:
        """The tokens of every text added, in order (lower-cased, punctuation dropped),
        but those `arrived` gave (none once it has given them all); ends the process, checks
        that it succeeded and keeps the class-data archive its first run wrote."""
        if not self._stdin.closed:
            os.set_blocking(self._input, True)
            self._send()
            with contextlib.suppress(OSError):
                self._stdin.close()
        if self._process.wait() != 0:
            self._errors.seek(0)
            message = self._errors.read().decode("utf-8", "replace").strip()[-500:]
            raise RuntimeError(f"the PTB tokenizer failed: {message}")
        if self._archiving is not None and self._archiving[0].is_file():
            self._archiving[0].replace(self._archiving[1])  # whole or not at all
        self._output.seek(self._read)  # what `arrived` has not read: whole lines on
        rest = self._output.read()
        output = (self._lines + rest.decode("utf-8").split("\n"))[0::2]
        remaining = self._count - self._given
        if len(output) < remaining:
            raise RuntimeError("the PTB tokenizer returned fewer lines than it was given")
        self._read, self._lines, self._given = self._read + len(rest), [], self._count
        return [_clean(line) for line in output[:remaining]]

    def close(self) -> None:
        """Stop the process if it still runs (an error on the caller's side) and clean up."""
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()
        with contextlib.suppress(OSError):
            self._stdin.close()
        self._output.close()
        self._errors.close()
        if self._archiving is not None:
            self._archiving[0].unlink(missing_ok=True)

    def __enter__(self) -> JavaTokenizer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def tokenize_java(texts: Sequence[str]) -> list[str]:
    """Stanford PTBTokenizer as pycocoevalcap calls it, all texts in one process, each with
    the tokens it has alone (`JavaTokenizer`)."""
    if not texts:
        return []
    with JavaTokenizer() as java:
        for text in texts:
            java.add(text)
        return java.tokens()


def tokenize_python(texts: Sequence[str]) -> list[str]:
    """PTBTokenizer's tokens without Java (metrics.text.ptb_lexer), each text as if alone, as
    `tokenize_java` has them: lower-cased, punctuation dropped."""
    from metrics.text.ptb_lexer import lex

    result = []
    for text in texts:
        tokens = lex(_LINE_BREAKS.sub(" ", text) + f"\n{_ISOLATOR}")
        line = tokens[: tokens.index("\n")] if "\n" in tokens else tokens
        result.append(_clean(" ".join(line).lower()))
    return result


# Most captions are plain: ASCII words, commas after words, a final period. PTBTokenizer gives
# such a caption its words lower-cased (the commas and the period are punctuation, dropped), so
# they are tokenized here without either tokenizer; any other text goes to the backend. The
# exceptions PTB makes on plain words send a text to the backend too: words it splits
# ("cannot" -> "can not"), a final period after an abbreviation it may keep ("Mr.", "Co.",
# "etc."; every abbreviation list of PTBLexer's history, so the check errs on the safe side)
# or after a number, and digit groups in a row (they can form one telephone-number token).
_PLAIN = re.compile(r"(?: *(?:[A-Za-z]+|[0-9]+)(?:,(?=[ .]|$)|(?=[ .]|$)))* *\.? *")
_SPLIT_WORDS = frozenset({"cannot", "dunno", "gonna", "gotta", "lemme", "gimme", "wanna"})
_DIGIT_GROUPS = re.compile(r"[0-9],? +[0-9]")
_PUNCTUATION_TO_SPACE = str.maketrans(",.", "  ")
_PERIOD_KEEPER_WORDS = """
    jan feb mar apr jun jul aug sep sept oct nov dec mon tue tues wed thu thurs fri sat sun
    ala ariz az ark calif colo conn ct dak del fla ga ill ind kan kans ky la mass md mich minn
    miss mo mont neb nev okla ore pa penn tenn tex va vt wash wis wisc wyo inc co cos corp pty
    ptys ptes pte ltd plc rt bancorp bhd assn univ intl sys dept tel est ext sq ft nos no prop
    ph jr sr bros esq etc al seq bldg mr mrs ms mx miss dr drs prof profs sen sens rep reps
    atty attys lt col gen messrs gov govs adm rev maj sgt cpl pvt capt st ste ave pres lieut
    hon brig cmdr comdr pfc spc supt supts det mt adj adv asst assoc ens insp mlle mme msgr
    sfc invt elec natl mfg mtg blvd rd vs alex wm jos cie cf treas ca fig figs sec secs sect
    sects art arts para paras pp op approx pt rs so"""
_PERIOD_KEEPERS = frozenset(_PERIOD_KEEPER_WORDS.split())


def plain_tokens(text: str) -> str | None:
    """The tokens of a plain caption, or None when PTB's rules need the backend."""
    if not _PLAIN.fullmatch(text):
        return None
    words = text.lower().translate(_PUNCTUATION_TO_SPACE).split()  # all letters or digits
    if not _SPLIT_WORDS.isdisjoint(words) or _DIGIT_GROUPS.search(text):
        return None
    end = text.rstrip(" ")
    if end[-2:-1].isalnum() and end.endswith("."):  # a final period after a word
        if words[-1].isdigit() or words[-1] in _PERIOD_KEEPERS:
            return None
        if len(words[-1]) == 1:  # a single letter keeps its period, as an initial
            words[-1] += "."
    return " ".join(words)


def resolve_tokenizer(backend: str) -> str:
    """The tokenizer `backend` stands for here, as signatures name it: `auto` is ptb-java
    when Java is present (its tokens are the jar's whichever path computes them)."""
    if backend == "auto":
        return "ptb-java" if java_available() else "ptb-python"
    if backend not in ("ptb-java", "ptb-python"):
        raise ValueError(f"unknown tokenizer {backend!r}: expected auto, ptb-java or ptb-python")
    return backend


def jvm_threshold() -> float:
    """How many texts needing PTB's rules make one JVM sooner than the Python lexer here
    (the costs measured above; inf without Java): starting the JVM costs more than lexing
    fewer texts, once the lexer's rules are compiled in this process."""
    if not java_available():
        return math.inf
    lexer = sys.modules.get("metrics.text.ptb_lexer")
    ready = lexer is not None and lexer.rules_ready()
    head_start = JVM_START_SECONDS - (0.0 if ready else LEXER_START_SECONDS)
    return max(1, math.ceil(head_start / (LEXER_TEXT_SECONDS - JVM_TEXT_SECONDS)))


def faster_backend(count: int) -> str:
    """The path that tokenizes `count` texts sooner here (`jvm_threshold`)."""
    return "ptb-java" if count >= jvm_threshold() else "ptb-python"


class Tokenization:
    """The tokens of `texts` (`tokenize`), begun at once and collected by `result`: plain
    captions are tokenized while the texts are read, the JVM starts as soon as the texts
    found to need it are enough and tokenizes them while the rest are read, and goes on
    while the caller works on the tokens it has (`known`, then `arrived` as the JVM gives
    them: CIDEr-D counts their n-grams). A context manager: leaving it, on an error too,
    stops the JVM."""

    ARRIVAL_BATCH = 1000  # texts the JVM has finished that `arrived` waits for: the fewer,
    # the less is left to count when it ends, the more batches (about 1 ms each)

    def __init__(self, texts: Iterable[str], backend: str = "auto") -> None:
        if backend == "auto":
            start_jvm_at = jvm_threshold()
        else:
            start_jvm_at = 1 if resolve_tokenizer(backend) == "ptb-java" else math.inf
        self._tokens: dict[str, str] = {}  # of the texts read so far but `_rest`
        self._rest: list[str] = []  # the texts that need PTB's rules
        self._arrived = 0  # of them, those whose tokens `arrived` gave
        self._java: JavaTokenizer | None = None
        try:
            for text in dict.fromkeys(texts):
                plain = plain_tokens(text)
                if plain is not None:
                    self._tokens[text] = plain
                    continue
                self._rest.append(text)
                if self._java is not None:
                    self._java.add(text)
                elif len(self._rest) >= start_jvm_at:
                    self._java = JavaTokenizer()
                    for earlier in self._rest:
                        self._java.add(earlier)
            if self._java is not None:
                self._java.finish()
        except BaseException:
            self.close()
            raise

    @property
    def known(self) -> dict[str, str]:
        """The tokens found so far: of the texts that need no tokenizer, then those that
        `arrived` and `result` add."""
        return self._tokens

    def arrived(self) -> dict[str, str] | None:
        """The tokens of the next texts the JVM has finished (waits for a batch of them),
        or None when it has no more to give: then, or without a JVM, `result` has the rest.
        They stay in `known` and `result`."""
        tokens = None if self._java is None else self._java.arrived(self.ARRIVAL_BATCH)
        if tokens is None:
            return None
        texts = self._rest[self._arrived : self._arrived + len(tokens)]
        self._arrived += len(tokens)
        batch = dict(zip(texts, tokens, strict=True))
        self._tokens.update(batch)
        return batch

    def result(self) -> dict[str, str]:
        """The tokens of each distinct text (waits for the JVM, then ends it: also after
        `arrived` gave every text's, so that its exit is checked and its archive kept)."""
        rest = self._rest[self._arrived :]
        if self._java is not None or rest:
            tokens = tokenize_python(rest) if self._java is None else self._java.tokens()
            self._tokens.update(zip(rest, tokens, strict=True))
            self._arrived = len(self._rest)
        return self._tokens

    def close(self) -> None:
        if self._java is not None:
            self._java.close()

    def __enter__(self) -> Tokenization:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def tokenize(texts: Sequence[str], backend: str = "auto") -> list[str]:
    """PTB-tokenise, lower-case and drop punctuation: plain captions directly, the others
    with `backend` (`auto`: `faster_backend` for their number; ptb-java: one Java process
    for all of them); each distinct text is tokenized once (references shared by many
    captions, repeated captions)."""
    with Tokenization(texts, backend) as tokenization:
        tokens = tokenization.result()
    return [tokens[text] for text in texts]
