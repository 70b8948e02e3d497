"""CIDEr-D from raw text finds its caption-reference pairs and counts the n-grams of the
texts it has while the JVM tokenizes the others (`metrics.text.tokenize.Tokenization`): the
scores are those of the same tokens scored after tokenizing, and an error on the caller's
side while the JVM works stops the JVM."""

from __future__ import annotations

import numpy as np
import pytest

from metrics.base import CaptionItem
from metrics.text.cider import CiderD, NgramCounter, _ngram_counts, cider_d
from metrics.text.tokenize import (
    Tokenization,
    java_available,
    plain_tokens,
    tokenize,
    tokenize_java,
)
from tests.ptb_cases import generated_captions

needs_java = pytest.mark.skipif(not java_available(), reason="Java or pycocoevalcap missing")


def _items() -> list[CaptionItem]:
    """Two systems, hard and plain texts, texts that differ but give the same tokens ("A
    dog." and "a dog", in one reference list too), a repeated reference list and an item
    without references."""
    hard = generated_captions(60, seed=3)
    references = [("A dog.", "a dog", hard[0]), (hard[1], "Two cats sit.", hard[2]),
                  (hard[3], hard[4], "A red bench.")]
    items = []
    for number in range(40):
        system = f"sys{number % 2}"
        refs = references[number % 3] if number != 7 else ()
        text = hard[5 + number] if number % 3 else "A dog sits on a bench."
        items.append(CaptionItem(f"c{number}", f"img{number % 3}", None, system, text, refs))
    return items


def test_n_grams_counted_in_batches_are_those_counted_at_once():
    """The same counts, the k-grams met in later batches numbered after: equal up to the
    order of the columns, which a matrix times its transpose does not see."""
    texts = ["a dog on a bench", "a dog", "", "two dogs on a red bench a dog on a bench",
             "a a a a", "red bench"]
    counter = NgramCounter(len(texts), 4)
    for rows in ([3, 0], [5], [1, 2, 4]):
        counter.add(rows, [texts[row] for row in rows])
    for batched, whole in zip(counter.matrices(), _ngram_counts(texts, 4), strict=True):
        assert batched.shape == whole.shape and batched.nnz == whole.nnz
        np.testing.assert_array_equal((batched @ batched.T).toarray(),
                                      (whole @ whole.T).toarray())
    assert counter.matrices()[3][3].sum() == 8  # the 4-grams of an 11-token text


@needs_java
@pytest.mark.parametrize("corpus", ["pooled", "per-system"])
def test_scores_from_raw_text_equal_those_of_the_tokens(monkeypatch, corpus):
    monkeypatch.setattr(Tokenization, "ARRIVAL_BATCH", 10)  # the JVM's tokens in batches
    items = _items()
    metric = CiderD(corpus=corpus, tokenizer="ptb-java")
    hyps = tokenize([item.text for item in items], "ptb-java")
    # every reference in one call (one JVM), each text's tokens its own
    flat = iter(tokenize([ref for item in items for ref in item.references], "ptb-java"))
    refs = [[next(flat) for _ in item.references] for item in items]
    expected = cider_d(hyps, refs, corpus=metric.corpus_ids(items))
    scores = metric.compute(items)
    assert np.isnan(scores[7]) and np.isnan(expected[7])  # no references: undefined
    # the n-grams are numbered in another order (plain texts first): sums may differ in
    # their last bit
    np.testing.assert_allclose(scores, expected, rtol=0, atol=1e-12)


@needs_java
def test_an_error_while_the_jvm_works_stops_it(monkeypatch):
    import metrics.text.cider as cider
    import metrics.text.tokenize as module

    sessions: list[module.JavaTokenizer] = []

    class RecordingJava(module.JavaTokenizer):
        def __init__(self) -> None:
            super().__init__()
            sessions.append(self)

    def failing(*args: object) -> None:
        raise ValueError("a bad layout")

    monkeypatch.setattr(module, "JavaTokenizer", RecordingJava)
    monkeypatch.setattr(cider, "CiderItems", failing)
    with pytest.raises(ValueError, match="a bad layout"):
        CiderD(corpus="pooled", tokenizer="ptb-java").compute(_items())
    assert len(sessions) == 1 and sessions[0]._process.poll() is not None


@needs_java
def test_tokens_taken_as_the_jvm_gives_them_are_those_of_one_call(monkeypatch, tmp_path):
    """Batch by batch, the tokens of one call; and once every batch is given, the process
    is still ended as one call ends it: its class-data archive kept for the next run."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(Tokenization, "ARRIVAL_BATCH", 300)
    texts = [text for text in dict.fromkeys(generated_captions(3_000, seed=5))
             if plain_tokens(text) is None]  # more than a pipe holds
    with Tokenization(texts, "ptb-java") as tokenization:
        given: dict[str, str] = {}
        while (batch := tokenization.arrived()) is not None:
            assert batch and not given.keys() & batch.keys()
            given.update(batch)
        tokens = tokenization.result()
        assert tokenization.result() == tokens  # nothing is given twice
    assert list((tmp_path / "thumb-tui").glob("ptb-tokenizer-*.jsa"))
    expected = dict(zip(texts, tokenize_java(texts), strict=True))
    assert given == tokens == expected


@needs_java
def test_a_failing_jvm_gives_a_clear_error_while_its_tokens_are_awaited(monkeypatch,
                                                                         tmp_path):
    import metrics.text.tokenize as module

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    not_a_jar = tmp_path / "broken.jar"
    not_a_jar.write_text("not a jar")
    monkeypatch.setattr(module, "ptb_jar", lambda: not_a_jar)
    hard = generated_captions(3_000, seed=6)
    items = [CaptionItem(f"c{i}", f"img{i}", None, "sys", text, (hard[-1 - i],))
             for i, text in enumerate(hard[:1_500])]
    with pytest.raises(RuntimeError, match="the PTB tokenizer failed"):
        CiderD(corpus="pooled", tokenizer="ptb-java").compute(items)
