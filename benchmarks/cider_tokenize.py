"""CIDEr-D from raw text where a third of the texts need PTB's rules (brackets, initials,
unicode: `tests/ptb_cases.py`), against pycocoevalcap's own pipeline on the same texts
(PTBTokenizer with each caption tokenized alone, then `Cider`), same run, best of 3: the
time, and how many captions' scores differ. Then the costs behind `tokenize`'s choice
between one JVM and the Python lexer (`metrics.text.tokenize.faster_backend`), measured again
here, and the crossover they give next to the one the code assumes."""

from __future__ import annotations

import argparse
import random
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.metrics import (  # noqa: E402
    coco_cider_full_path,
    differences,
    differing,
    generated_items,
)
from benchmarks.table import Table, best_of, package_version  # noqa: E402
from metrics.base import CaptionItem  # noqa: E402
from metrics.text.cider import CiderD  # noqa: E402
from metrics.text.tokenize import (  # noqa: E402
    JVM_START_SECONDS,
    JVM_TEXT_SECONDS,
    LEXER_START_SECONDS,
    LEXER_TEXT_SECONDS,
    plain_tokens,
    tokenize_java,
    tokenize_python,
)
from tests.ptb_cases import generated_captions  # noqa: E402

LEXER_START = ("import sys, time; sys.path.insert(0, sys.argv[1]); start = time.perf_counter(); "
               "from metrics.text.ptb_lexer import lex; lex('x'); "
               "print(time.perf_counter() - start)")


def third_hard(images: int, seed: int = 1) -> list[CaptionItem]:
    """5 systems x 5 references per image, a third of all texts (captions and references)
    replaced by captions rich in PTB's special cases."""
    rng = random.Random(seed)
    items = generated_items(images=images, systems=5, references=5, seed=seed)
    hard = iter(generated_captions(12 * len(items), seed=seed))

    def mixed(text: str) -> str:
        return next(hard) if rng.random() < 1 / 3 else text

    return [CaptionItem(i.caption_id, i.image_key, i.image_path, i.system, mixed(i.text),
                        tuple(mixed(r) for r in i.references)) for i in items]


def cpu_seconds(action: Callable[[], object]) -> tuple[float, float]:
    """The CPU time of one run of `action`: (this process's, its child processes' (the
    JVM)). On 2 shared cores the sum bounds the wall time as much as the JVM's own run."""
    before, children = time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    action()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (time.process_time() - before,
            after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime)


def crossover_rows(table: Table, texts: list[str]) -> None:
    """The four costs of `faster_backend`, measured now, and the crossover they give."""
    jvm_start, _ = best_of(lambda: tokenize_java(texts[:1]))
    jvm_many, _ = best_of(lambda: tokenize_java(texts))
    tokenize_python(texts[:1])  # the rules compiled: what follows is lexing alone
    sample = texts[:300]
    lexing, _ = best_of(lambda: tokenize_python(sample))
    lexer_start = min(float(subprocess.run([sys.executable, "-c", LEXER_START, str(ROOT)],
                                           capture_output=True, text=True, check=True).stdout)
                      for _ in range(3))
    jvm_text = max(jvm_many - jvm_start, 0.0) / max(len(texts) - 1, 1)
    lexer_text = lexing / len(sample)
    measured = jvm_start / (lexer_text - jvm_text)
    assumed = JVM_START_SECONDS / (LEXER_TEXT_SECONDS - JVM_TEXT_SECONDS)
    table.add("PTB tokenization: JVM start / per text, Python lexer start / per text",
              f"{jvm_start:.2f} s / {jvm_text * 1e3:.3f} ms, {lexer_start:.2f} s / "
              f"{lexer_text * 1e3:.2f} ms",
              f"assumed by metrics/text/tokenize.py: {JVM_START_SECONDS} s / "
              f"{JVM_TEXT_SECONDS * 1e3:.3f} ms, {LEXER_START_SECONDS} s / "
              f"{LEXER_TEXT_SECONDS * 1e3:.2f} ms")
    same_side = (lexer_start > jvm_start) == (LEXER_START_SECONDS > JVM_START_SECONDS)
    table.add("crossover: texts below which the ready Python lexer beats starting the JVM",
              f"{measured:.0f} texts measured", f"{assumed:.0f} texts assumed", None,
              "within 2x of the assumed; a fresh process starts the JVM as measured",
              0.5 <= measured / assumed <= 2 and same_side)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=1000)
    args = parser.parse_args()
    items = third_hard(args.images)
    texts = list(dict.fromkeys(t for i in items for t in (i.text, *i.references)))
    hard = [t for t in texts if plain_tokens(t) is None]
    table = Table("cider_tokenize", f"{len(items):,} captions x 5 references, "
                  f"{len(hard):,} of {len(texts):,} distinct texts need PTB's rules")
    metric = CiderD(corpus="pooled", tokenizer="auto")
    ours_s, ours = best_of(lambda: metric.score(items))
    python_cpu, jvm_cpu = cpu_seconds(lambda: metric.score(items))
    theirs_s, theirs = best_of(lambda: coco_cider_full_path(items, isolate=True))
    table.speed(f"CIDEr-D from raw text, {len(items):,} captions x 5 references, a third of "
                "the texts with PTB's special cases, tokenizing included", ours_s, theirs_s,
                15, f"pycocoevalcap {package_version('pycocoevalcap')} PTBTokenizer (each "
                "caption alone) + Cider", f"{differences(ours, theirs)}; CPU "
                f"{python_cpu:.2f} s Python + {jvm_cpu:.2f} s JVM")
    table.add("  its scores equal pycocoevalcap's, each caption tokenized alone",
              f"{differing(ours, theirs)} captions differ", "-", None, "0 differ",
              differing(ours, theirs) == 0)
    crossover_rows(table, hard)
    table.save()


if __name__ == "__main__":
    main()
