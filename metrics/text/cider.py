"""CIDEr-D, vectorised with sparse matrices. Gives pycocoevalcap's `Cider` scores (n=4,
sigma=6, clipped tf-idf, Gaussian length penalty on bigram counts, x10) on the same
tokens, without its per-pair Python loops."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain
from typing import TYPE_CHECKING

import numpy as np

from metrics.arrays import sorted_positions
from metrics.base import CaptionItem, Metric, MetricOption
from metrics.signature import digest
from metrics.text.tokenize import TOKENIZER, Tokenization, resolve_tokenizer, tokenize

if TYPE_CHECKING:  # SciPy loads when CIDEr-D runs, not when the command line starts
    from scipy import sparse

CORPORA = ("auto", "per-system", "pooled")


class NgramCounter:
    """Counts the 1- to n-grams of texts added in batches (`CiderD` counts the plain texts
    while the JVM tokenizes the others): for k = 1..n a (rows x distinct k-grams) count
    matrix, built with NumPy. Tokens become integer ids, each k-gram the pair of its
    (k-1)-gram prefix and last token, numbered by np.unique (in the order of those pairs;
    the k-grams first met in a later batch are numbered after those of earlier ones)."""

    def __init__(self, rows: int, n: int) -> None:
        self.rows, self.n = rows, n
        self._vocabulary: dict[str, int] = {}
        # for each k >= 2: the k-grams met so far, sorted, and the column of each
        self._known = [np.zeros(0, dtype=np.int64) for _ in range(n - 1)]
        self._columns = [np.zeros(0, dtype=np.int64) for _ in range(n - 1)]
        self._entries: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(n)]

    def add(self, rows: Sequence[int], texts: Sequence[str]) -> None:
        """Count the tokens `texts[i]` (space-separated) in row `rows[i]`."""
        token_lists = [text.split() for text in texts]
        tokens = list(chain.from_iterable(token_lists))
        vocabulary = self._vocabulary
        for token in dict.fromkeys(tokens):
            vocabulary.setdefault(token, len(vocabulary))
        flat = np.fromiter(map(vocabulary.__getitem__, tokens), dtype=np.int64,
                           count=len(tokens))
        lengths = np.fromiter(map(len, token_lists), dtype=np.int64, count=len(token_lists))
        owner = np.repeat(np.asarray(rows, dtype=np.int64), lengths)
        room = np.repeat(lengths, lengths) - (
            np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths))
        grams = flat  # the (k-1)-gram starting at each position, as a column number
        for k in range(1, self.n + 1):
            starts = np.nonzero(room >= k)[0]
            columns = flat
            if k > 1:  # ids below 2**31: (prefix, last token) in one int64, in pair order
                columns = self._number(k - 2, (grams[starts] << 32) | flat[starts + k - 1])
                grams = np.zeros(len(flat), dtype=np.int64)
                grams[starts] = columns
            self._entries[k - 1].append((owner[starts], columns))

    def _number(self, level: int, keys: np.ndarray) -> np.ndarray:
        """The column of each key: a known one's, or the next free one for a new key."""
        distinct, inverse = np.unique(keys, return_inverse=True)
        known, known_columns = self._known[level], self._columns[level]
        at = np.searchsorted(known, distinct)
        found = at < len(known)
        found[found] = known[at[found]] == distinct[found]
        columns = np.empty(len(distinct), dtype=np.int64)
        columns[found] = known_columns[at[found]]
        new = np.nonzero(~found)[0]
        columns[new] = len(known) + np.arange(len(new))
        self._known[level] = np.insert(known, at[new], distinct[new])  # still sorted
        self._columns[level] = np.insert(known_columns, at[new], columns[new])
        return columns[inverse.ravel()]

    def matrices(self) -> list[sparse.csr_matrix]:
        from scipy import sparse

        widths = [len(self._vocabulary), *(len(known) for known in self._known)]
        matrices = []
        for entries, width in zip(self._entries, widths, strict=True):
            rows = np.concatenate([np.zeros(0, dtype=np.int64), *(r for r, _ in entries)])
            columns = np.concatenate([np.zeros(0, dtype=np.int64), *(c for _, c in entries)])
            matrix = sparse.csr_matrix((np.ones(len(rows)), (rows, columns)),
                                       shape=(self.rows, width))
            matrix.sum_duplicates()
            matrices.append(matrix)
        return matrices


def _ngram_counts(texts: Sequence[str], n: int) -> list[sparse.csr_matrix]:
    """For k = 1..n, the (texts x distinct k-grams) count matrix (`NgramCounter`)."""
    counter = NgramCounter(len(texts), n)
    counter.add(range(len(texts)), texts)
    return counter.matrices()


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
        at = sorted_positions(keys, rows.astype(np.int64) * width + columns)
        found = np.zeros(len(at))
        stored = at >= 0
        found[stored] = df.data[at[stored]]
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


class CiderItems:
    """What CIDEr-D needs to know of its items before their tokens: the distinct captions
    and references (texts, or tokens), each caption-reference pair, and the corpora of
    document frequencies. Found from the texts alone, so `CiderD` finds it while the JVM
    tokenizes, and counts the n-grams of the texts whose tokens it has (`count`); `score`
    counts the rest.

    Document frequencies come from the items of the same `corpus` id (default: all items
    form one corpus, as in one pycocoevalcap `Cider` call); several corpora are scored in
    one pass, and corpora with the same reference sets (systems captioning the same
    images) share one set of frequencies. An item without references scores NaN (CIDEr-D
    is undefined for it) and is left out of the frequencies."""

    def __init__(self, hypotheses: Sequence[str], references: Sequence[Sequence[str]],
                 corpus: Sequence[int] | None = None, n: int = 4) -> None:
        items = self.items = len(references)
        group = np.zeros(items, dtype=np.int64) if corpus is None else np.asarray(corpus)
        self.hyp_of, self.distinct_hyps = _index(hypotheses)
        # captions of one image share its reference list: the lists are numbered first, and
        # each distinct list is read once
        list_of, distinct_lists = _index(tuple(refs) for refs in references)
        ref_numbers: dict[str, int] = {}
        list_refs = [np.array([ref_numbers.setdefault(r, len(ref_numbers)) for r in refs],
                              dtype=np.int64) for refs in distinct_lists]
        self.distinct_refs = list(ref_numbers)
        list_sizes = np.array([len(refs) for refs in list_refs], dtype=np.int64)
        self.per_item = per_item = list_sizes[list_of]
        self.owner = owner = np.repeat(np.arange(items), per_item)  # the item of each pair
        self.scored = scored = per_item > 0
        flat = np.concatenate([np.zeros(0, dtype=np.int64), *list_refs])
        starts = np.cumsum(list_sizes) - list_sizes
        self.pair_ref = flat[np.repeat(starts[list_of], per_item)
                             + np.arange(len(owner)) - np.repeat(np.cumsum(per_item) - per_item,
                                                                 per_item)]
        # the set of distinct references of each item, and the items' corpora with the same
        # multiset of reference sets, which therefore share their document frequencies
        set_of_list, distinct_sets = _index(tuple(sorted(set(refs.tolist())))
                                            for refs in list_refs)
        distinct_corpora, self.item_corpus = _corpora(group, set_of_list[list_of], scored)
        self.log_size = np.log(np.array([len(key) for key in distinct_corpora], dtype=float))
        self.set_refs = _membership(list(distinct_sets), len(self.distinct_refs))
        self.corpus_sets = _membership(list(distinct_corpora), len(distinct_sets))
        # reference vectors depend on (corpus, reference): weight each such pair once
        refs = max(len(self.distinct_refs), 1)
        units, unit_of_pair = np.unique(self.item_corpus[owner] * refs + self.pair_ref,
                                        return_inverse=True)
        self.ref_unit = unit_of_pair.ravel()
        self.unit_corpus, self.unit_ref = np.divmod(units, refs)
        self.item_rows = np.nonzero(scored)[0]
        self.item_at = np.full(items, -1, dtype=np.int64)  # row of each scored item's vector
        self.item_at[self.item_rows] = np.arange(len(self.item_rows))
        self.n = n
        # the rows of the n-gram counts: the distinct captions, then the distinct references
        self._uncounted = dict(enumerate([*self.distinct_hyps, *self.distinct_refs]))
        self._counter = NgramCounter(len(self._uncounted), n)

    def count(self, tokens: Mapping[str, str] | None = None) -> None:
        """Count the n-grams of the texts not counted yet whose tokens `tokens` has (all
        of them when None: the texts are tokens already)."""
        ready = {row: text for row, text in self._uncounted.items()
                 if tokens is None or text in tokens}
        self._counter.add(list(ready), [text if tokens is None else tokens[text]
                                        for text in ready.values()])
        for row in ready:
            del self._uncounted[row]

    def score(self, tokens: Mapping[str, str] | None = None, sigma: float = 6.0
              ) -> np.ndarray:
        """CIDEr-D of each item, given the tokens of each text (`tokens`; None when the
        texts are tokens already). Each distinct text is counted once; time and memory grow
        with the number of caption-reference pairs."""
        if not self.items:
            return np.zeros(0)
        self.count(tokens)
        counts, n = self._counter.matrices(), self.n
        split = len(self.distinct_hyps)
        owner, item_rows, item_at = self.owner, self.item_rows, self.item_at
        lengths = counts[1].sum(axis=1).A.ravel()  # THUMB/COCO: length = number of bigrams
        per_pair = np.zeros(len(owner))
        for matrix in counts:
            hyp_counts, ref_counts = matrix[:split].tocsr(), matrix[split:].tocsr()
            idf = _idf_table(_document_frequencies(self.corpus_sets, self.set_refs,
                                                   ref_counts), self.log_size)
            hyp_vec = _tfidf(hyp_counts, self.hyp_of[item_rows], self.item_corpus[item_rows],
                             idf)
            ref_vec = _tfidf(ref_counts, self.unit_ref, self.unit_corpus, idf)
            norm_h = np.sqrt(hyp_vec.multiply(hyp_vec).sum(axis=1).A.ravel())
            norm_r = np.sqrt(ref_vec.multiply(ref_vec).sum(axis=1).A.ravel())
            for start in range(0, len(owner), PAIR_CHUNK):
                chunk = slice(start, start + PAIR_CHUNK)
                h_rows, r_rows = item_at[owner[chunk]], self.ref_unit[chunk]
                r = ref_vec[r_rows]
                overlap = hyp_vec[h_rows].minimum(r).multiply(r).sum(axis=1).A.ravel()
                norms = norm_h[h_rows] * norm_r[r_rows]
                both = norms != 0
                overlap[both] /= norms[both]
                per_pair[chunk] += overlap
        delta = lengths[self.hyp_of[owner]] - lengths[split:][self.pair_ref]
        per_pair *= np.exp(-(delta**2) / (2 * sigma**2)) / n
        sums = np.bincount(owner, weights=per_pair, minlength=self.items)
        scores = np.full(self.items, np.nan)
        scored = self.scored
        scores[scored] = sums[scored] / self.per_item[scored] * 10.0
        return scores


def cider_d(
    hypotheses: Sequence[str], references: Sequence[Sequence[str]], n: int = 4,
    sigma: float = 6.0, corpus: Sequence[int] | None = None,
) -> np.ndarray:
    """CIDEr-D of each tokenised hypothesis against its tokenised references, document
    frequencies from the items of each `corpus` id (`CiderItems`)."""
    return CiderItems(hypotheses, references, corpus, n).score(sigma=sigma)


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
        texts = [item.text for item in items]
        references = [item.references for item in items]
        with Tokenization(chain(texts, *references), self.tokenize_with) as tokenization:
            layout = CiderItems(texts, references, self.corpus_ids(items))  # as the JVM works
            layout.count(tokenization.known)  # the plain texts
            while (arrived := tokenization.arrived()) is not None:
                layout.count(arrived)  # the JVM's, as it gives them
            tokens = tokenization.result()
        return layout.score(tokens)
