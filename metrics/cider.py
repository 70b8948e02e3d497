"""CIDEr-D, vectorised with sparse matrices. Gives pycocoevalcap's `Cider` scores (n=4,
sigma=6, clipped tf-idf, Gaussian length penalty on bigram counts, x10) on the same
tokens, without its per-pair Python loops."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from typing import TYPE_CHECKING

import numpy as np

from metrics.base import CaptionItem, Metric, MetricOption
from metrics.signature import digest
from metrics.tokenize import TOKENIZER, resolve_tokenizer, tokenize

if TYPE_CHECKING:  # SciPy loads when CIDEr-D runs, not when the command line starts
    from scipy import sparse

CORPORA = ("auto", "per-system", "pooled")


def _ngram_counts(texts: Sequence[str], n: int) -> list[sparse.csr_matrix]:
    """For k = 1..n, a (texts x distinct k-grams) count matrix, built with NumPy: tokens
    become integer ids, and each k-gram the number of its (k-1)-gram prefix and last
    token, numbered by np.unique (in the order of the k-grams' token ids)."""
    token_lists = [text.split() for text in texts]
    tokens = list(chain.from_iterable(token_lists))
    flat, vocabulary = _index(tokens)
    from scipy import sparse

    lengths = np.fromiter(map(len, token_lists), dtype=np.int64, count=len(token_lists))
    owner = np.repeat(np.arange(len(texts)), lengths)
    room = lengths[owner] - (np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths,
                                                              lengths))
    vocabulary_size = np.int64(len(vocabulary))
    grams = flat  # the (k-1)-gram starting at each position, as a column number
    matrices = []
    for k in range(1, n + 1):
        starts = np.nonzero(room >= k)[0]
        if k == 1:
            columns, width = flat, len(vocabulary)
        else:
            keys = grams[starts] * vocabulary_size + flat[starts + k - 1]
            distinct, columns = np.unique(keys, return_inverse=True)
            width = len(distinct)
            grams = np.zeros(len(flat), dtype=np.int64)
            grams[starts] = columns
        matrix = sparse.csr_matrix((np.ones(len(starts)), (owner[starts], columns.ravel())),
                                   shape=(len(texts), width))
        matrix.sum_duplicates()
        matrices.append(matrix)
    return matrices


PAIR_CHUNK = 200_000  # caption-reference pairs scored at once: bounds the memory


def _index(keys: Iterable[object]) -> tuple[np.ndarray, dict]:
    """Number the distinct keys in order of first appearance: (number of each key, keys)."""
    keys = list(keys)
    numbers = {key: number for number, key in enumerate(dict.fromkeys(keys))}
    return np.fromiter(map(numbers.__getitem__, keys), dtype=np.int64,
                       count=len(keys)), numbers


def _membership(groups: Sequence[Sequence[int]], width: int) -> sparse.csr_matrix:
    """(groups x width) matrix counting how often each group lists each member."""
    from scipy import sparse

    sizes = [len(members) for members in groups]
    return sparse.csr_matrix(
        (np.ones(sum(sizes)), (np.repeat(np.arange(len(groups)), sizes),
                               np.fromiter((m for ms in groups for m in ms), dtype=np.int64))),
        shape=(len(groups), width))


def _document_frequencies(corpus_sets: sparse.csr_matrix, set_refs: sparse.csr_matrix,
                          ref_counts: sparse.csr_matrix) -> sparse.csr_matrix:
    """(corpora x n-grams), sparse: in how many items of each corpus an n-gram occurs in at
    least one reference (pycocoevalcap's document frequency)."""
    present = (set_refs @ (ref_counts > 0).astype(np.float64)).tocsr()
    present.data[:] = 1.0  # the reference set contains the n-gram
    return (corpus_sets @ present).tocsr()


DENSE_IDF_CELLS = 1 << 22  # (corpora x n-grams) idf tables held dense up to this size


def _idf_table(df: sparse.csr_matrix, log_size: np.ndarray
               ) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """log(corpus size) - log(max(1, df)) at given (corpus rows, n-gram columns): read from
    a dense table where it is small (few distinct corpora: the usual case), else looked up
    in the sparse frequencies."""
    if df.shape[0] * df.shape[1] <= DENSE_IDF_CELLS:
        table = log_size[:, None] - np.log(np.maximum(1.0, df.toarray()))
        return lambda rows, columns: table[rows, columns]
    df.sort_indices()
    width = np.int64(df.shape[1])
    keys = np.repeat(np.arange(df.shape[0], dtype=np.int64), np.diff(df.indptr)) * width \
        + df.indices

    def lookup(rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
        wanted = rows.astype(np.int64) * width + columns
        at = np.minimum(np.searchsorted(keys, wanted), max(len(keys) - 1, 0))
        found = np.zeros(len(wanted)) if not len(keys) else np.where(
            keys[at] == wanted, df.data[at], 0.0)
        return log_size[rows] - np.log(np.maximum(1.0, found))

    return lookup


def _tfidf(counts: sparse.csr_matrix, rows: np.ndarray, row_corpus: np.ndarray,
           idf: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> sparse.csr_matrix:
    """The rows `rows` of `counts`, each weighted by the idf of its corpus."""
    vectors = counts[rows].tocsr()
    owner = np.repeat(row_corpus, np.diff(vectors.indptr))
    vectors.data = vectors.data * idf(owner, vectors.indices)
    return vectors


def _corpora(group: np.ndarray, set_of: np.ndarray, scored: np.ndarray
             ) -> tuple[dict, np.ndarray]:
    """Corpora with the same multiset of reference sets are one distinct corpus: (the
    distinct corpora, the distinct corpus of each item, -1 for an item not scored)."""
    rows = np.nonzero(scored)[0]
    order = rows[np.lexsort((set_of[rows], group[rows]))]
    groups, first = np.unique(group[order], return_index=True)
    keys = [tuple(sets.tolist()) for sets in np.split(set_of[order], first[1:])
            ] if len(order) else []
    corpus_of_group, distinct = _index(keys)
    item_corpus = np.full(len(group), -1, dtype=np.int64)
    if len(groups):
        position = np.searchsorted(groups, group[rows])
        item_corpus[rows] = corpus_of_group[position]
    return distinct, item_corpus


def cider_d(
    hypotheses: Sequence[str], references: Sequence[Sequence[str]], n: int = 4,
    sigma: float = 6.0, corpus: Sequence[int] | None = None,
) -> np.ndarray:
    """CIDEr-D of each tokenised hypothesis against its tokenised references.

    Document frequencies come from the items of the same `corpus` id (default: all items
    form one corpus, as in one pycocoevalcap `Cider` call); several corpora are scored in
    one pass, and corpora with the same reference sets (systems captioning the same
    images) share one set of frequencies. Each distinct text is counted once; time and
    memory grow with the number of caption-reference pairs. An item without references
    scores NaN (CIDEr-D is undefined for it) and is left out of the frequencies."""
    items = len(references)
    if not items:
        return np.zeros(0)
    group = np.zeros(items, dtype=np.int64) if corpus is None else np.asarray(corpus)
    hyp_of, distinct_hyps = _index(hypotheses)
    # captions of one image share its reference list: the lists are numbered first, and
    # each distinct list is read once
    list_of, distinct_lists = _index(tuple(refs) for refs in references)
    ref_numbers: dict[str, int] = {}
    list_refs = [np.array([ref_numbers.setdefault(r, len(ref_numbers)) for r in refs],
                          dtype=np.int64) for refs in distinct_lists]
    distinct_refs = list(ref_numbers)
    list_sizes = np.array([len(refs) for refs in list_refs], dtype=np.int64)
    per_item = list_sizes[list_of]
    owner = np.repeat(np.arange(items), per_item)
    scored = per_item > 0
    flat = np.concatenate([np.zeros(0, dtype=np.int64), *list_refs])
    starts = np.cumsum(list_sizes) - list_sizes
    pair_ref = flat[np.repeat(starts[list_of], per_item)
                    + np.arange(len(owner)) - np.repeat(np.cumsum(per_item) - per_item,
                                                        per_item)]
    # the set of distinct references of each item, and the items' corpora with the same
    # multiset of reference sets, which therefore share their document frequencies
    set_of_list, distinct_sets = _index(tuple(sorted(set(refs.tolist()))) for refs in list_refs)
    set_of = set_of_list[list_of]
    distinct_corpora, item_corpus = _corpora(group, set_of, scored)
    log_size = np.log(np.array([len(key) for key in distinct_corpora], dtype=float))
    set_refs = _membership(list(distinct_sets), len(distinct_refs))
    corpus_sets = _membership(list(distinct_corpora), len(distinct_sets))

    counts = _ngram_counts([*distinct_hyps, *distinct_refs], n)
    split = len(distinct_hyps)
    lengths = counts[1].sum(axis=1).A.ravel()  # THUMB/COCO: length = number of bigrams
    # reference vectors depend on (corpus, reference): weight each such pair once
    pair_corpus = item_corpus[owner]
    ref_unit, units = _index(zip(pair_corpus.tolist(), pair_ref.tolist(), strict=True))
    unit_corpus = np.array([c for c, _ in units], dtype=np.int64)
    unit_ref = np.array([r for _, r in units], dtype=np.int64)
    item_rows = np.nonzero(scored)[0]
    item_at = np.full(items, -1, dtype=np.int64)  # row of each scored item in hyp_vec
    item_at[item_rows] = np.arange(len(item_rows))
    per_pair = np.zeros(len(owner))
    for matrix in counts:
        hyp_counts, ref_counts = matrix[:split].tocsr(), matrix[split:].tocsr()
        idf = _idf_table(_document_frequencies(corpus_sets, set_refs, ref_counts), log_size)
        hyp_vec = _tfidf(hyp_counts, hyp_of[item_rows], item_corpus[item_rows], idf)
        ref_vec = _tfidf(ref_counts, unit_ref, unit_corpus, idf)
        norm_h = np.sqrt(hyp_vec.multiply(hyp_vec).sum(axis=1).A.ravel())
        norm_r = np.sqrt(ref_vec.multiply(ref_vec).sum(axis=1).A.ravel())
        for start in range(0, len(owner), PAIR_CHUNK):
            chunk = slice(start, start + PAIR_CHUNK)
            h_rows, r_rows = item_at[owner[chunk]], ref_unit[chunk]
            r = ref_vec[r_rows]
            overlap = hyp_vec[h_rows].minimum(r).multiply(r).sum(axis=1).A.ravel()
            norms = norm_h[h_rows] * norm_r[r_rows]
            both = norms != 0
            overlap[both] /= norms[both]
            per_pair[chunk] += overlap
    delta = lengths[hyp_of[owner]] - lengths[split:][pair_ref]
    per_pair *= np.exp(-(delta**2) / (2 * sigma**2)) / n
    sums = np.bincount(owner, weights=per_pair, minlength=items)
    scores = np.full(items, np.nan)
    scores[scored] = sums[scored] / per_item[scored] * 10.0
    return scores


class CiderD(Metric):
    """CIDEr-D with an explicit document-frequency corpus: one per system (as THUMB
    computed it) or all captions pooled (the literature's convention for judgment sets);
    `auto` is per-system when every caption has a system, else pooled."""

    name = "cider-d"
    help = "CIDEr-D (x10), document frequencies from a per-system or pooled corpus"
    options = (
        MetricOption("cider_corpus", "corpus", "auto",
                     "CIDEr-D's document-frequency corpus: per-system (THUMB), pooled (the "
                     "literature's), or auto: per-system when every caption has a system."),
        TOKENIZER,
    )
    corpus_level = True

    def __init__(self, corpus: str = "auto", tokenizer: str = "auto") -> None:
        if corpus not in CORPORA:
            raise ValueError(f"CIDEr corpus must be one of {', '.join(CORPORA)}")
        self.corpus = corpus
        self.tokenizer = resolve_tokenizer(tokenizer)  # the signature's name for the tokens
        self.tokenize_with = tokenizer  # `auto` picks the faster path per call

    def _tokens(self, items: Sequence[CaptionItem]) -> tuple[list[str], list[list[str]]]:
        texts = [item.text for item in items]
        flat = [ref for item in items for ref in item.references]
        tokens = tokenize([*texts, *flat], self.tokenize_with)
        hyps, rest = tokens[: len(texts)], tokens[len(texts):]
        refs, start = [], 0
        for item in items:
            refs.append(rest[start:start + len(item.references)])
            start += len(item.references)
        return hyps, refs

    def corpus_for(self, items: Sequence[CaptionItem]) -> str:
        """The corpus actually used: `auto` resolved on these captions."""
        if self.corpus != "auto":
            return self.corpus
        return "per-system" if all(item.system for item in items) else "pooled"

    def settings(self, items: Sequence[CaptionItem]) -> dict[str, str]:
        corpus = digest(f"{i.system}\t{i.text}\t{'|'.join(i.references)}" for i in items)
        return {"impl": "thumb-tui-sparse", "n": "4", "sigma": "6",
                "tok": self.tokenizer, "corpus": f"{self.corpus_for(items)}#{corpus}"}

    def corpus_ids(self, items: Sequence[CaptionItem]) -> list[int]:
        """The document-frequency corpus of each item: its system's, or one for all."""
        if self.corpus_for(items) == "pooled":
            return [0] * len(items)
        systems: dict[str, int] = {}
        return [systems.setdefault(item.system, len(systems)) for item in items]

    def compute(self, items: Sequence[CaptionItem]) -> np.ndarray:
        hyps, refs = self._tokens(items)
        return cider_d(hyps, refs, corpus=self.corpus_ids(items))
