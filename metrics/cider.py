"""CIDEr-D, vectorised with sparse matrices. Gives pycocoevalcap's `Cider` scores (n=4,
sigma=6, clipped tf-idf, Gaussian length penalty on bigram counts, x10) on the same
tokens, without its per-pair Python loops."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import sparse

from metrics.base import CaptionItem, Metric, MetricOption
from metrics.signature import digest
from metrics.tokenize import TOKENIZER, resolve_tokenizer, tokenize

CORPORA = ("auto", "per-system", "pooled")


def _ngram_counts(texts: Sequence[str], n: int) -> list[sparse.csr_matrix]:
    """For k = 1..n, a (texts x distinct k-grams) count matrix, built with NumPy: tokens
    become integer ids, k-gram windows become integer keys, np.unique numbers them."""
    vocabulary: dict[str, int] = {}
    token_lists = [[vocabulary.setdefault(t, len(vocabulary)) for t in text.split()]
                   for text in texts]
    lengths = np.array([len(tokens) for tokens in token_lists], dtype=np.int64)
    flat = np.fromiter((t for tokens in token_lists for t in tokens), dtype=np.int64,
                       count=int(lengths.sum()))
    owner = np.repeat(np.arange(len(texts)), lengths)
    position = np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    base = len(vocabulary) + 1
    matrices = []
    for k in range(1, n + 1):
        starts = np.nonzero(position <= lengths[owner] - k)[0]
        windows = flat[starts[:, None] + np.arange(k)]
        if float(base) ** k < 2**62:
            keys = np.zeros(len(starts), dtype=np.int64)
            for column in range(k):
                keys = keys * base + windows[:, column]
            _, columns = np.unique(keys, return_inverse=True)
        else:  # a huge vocabulary: number the windows row-wise instead
            _, columns = np.unique(windows, axis=0, return_inverse=True)
        columns = columns.ravel()
        width = int(columns.max()) + 1 if len(columns) else 0
        matrix = sparse.csr_matrix(
            (np.ones(len(starts)), (owner[starts], columns)), shape=(len(texts), width)
        )
        matrix.sum_duplicates()
        matrices.append(matrix)
    return matrices


def _scale_rows(matrix: sparse.csr_matrix, weights: np.ndarray, row_group: np.ndarray
                ) -> sparse.csr_matrix:
    """Multiply each stored entry (row r, column c) by weights[row_group[r], c]."""
    rows = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
    scaled = matrix.copy()
    scaled.data = matrix.data * weights[row_group[rows], matrix.indices]
    return scaled


def cider_d(
    hypotheses: Sequence[str], references: Sequence[Sequence[str]], n: int = 4,
    sigma: float = 6.0, corpus: Sequence[int] | None = None,
) -> np.ndarray:
    """CIDEr-D of each tokenised hypothesis against its tokenised references.

    Document frequencies come from the items of the same `corpus` id (default: all items
    form one corpus, as in one pycocoevalcap `Cider` call); several corpora are scored in
    one pass. Identical reference texts are counted once, however many captions share them."""
    items, split = len(references), len(hypotheses)
    group = np.zeros(items, dtype=np.int64) if corpus is None else np.asarray(corpus)
    groups = int(group.max()) + 1 if items else 0
    unique_refs: dict[str, int] = {}
    pair_ref = np.array([unique_refs.setdefault(r, len(unique_refs))
                         for refs in references for r in refs], dtype=np.int64)
    owner = np.repeat(np.arange(items), [len(refs) for refs in references])
    counts = _ngram_counts([*hypotheses, *unique_refs], n)
    # which unique references each corpus contains, once per item that lists them
    membership = sparse.csr_matrix(
        (np.ones(len(owner)), (owner, pair_ref)), shape=(items, len(unique_refs)))
    membership.data[:] = 1.0
    corpus_of = sparse.csr_matrix(
        (np.ones(items), (group, np.arange(items))), shape=(groups, items))
    log_size = np.log(np.bincount(group, minlength=groups).astype(float))
    lengths = counts[1].sum(axis=1).A.ravel()  # THUMB/COCO: length = number of bigrams
    penalty = np.exp(-((lengths[owner] - lengths[split:][pair_ref]) ** 2) / (2 * sigma**2))
    per_order = np.zeros((len(owner), n))
    for k, matrix in enumerate(counts):
        hyp, ref = matrix[:split].tocsr(), matrix[split:].tocsr()
        present = (membership @ (ref > 0).astype(float)).tocsr()
        present.data[:] = 1.0  # item i's reference set contains the n-gram
        df = (corpus_of @ present).toarray()  # corpora x n-grams
        weights = log_size[:, None] - np.log(np.maximum(1.0, df))
        hyp_vec = _scale_rows(hyp, weights, group)
        ref_vec = _scale_rows(ref[pair_ref], weights, group[owner])  # weights of the pair
        h = hyp_vec[owner]
        overlap = h.minimum(ref_vec).multiply(ref_vec).sum(axis=1).A.ravel()
        norm_h = np.sqrt(hyp_vec.multiply(hyp_vec).sum(axis=1).A.ravel())[owner]
        norm_r = np.sqrt(ref_vec.multiply(ref_vec).sum(axis=1).A.ravel())
        both = (norm_h != 0) & (norm_r != 0)
        overlap[both] /= norm_h[both] * norm_r[both]
        per_order[:, k] = overlap * penalty
    per_ref = per_order.mean(axis=1)
    sums = np.bincount(owner, weights=per_ref, minlength=items)
    return sums / np.bincount(owner, minlength=items) * 10.0


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
        self.tokenizer = resolve_tokenizer(tokenizer)

    def _tokens(self, items: Sequence[CaptionItem]) -> tuple[list[str], list[list[str]]]:
        texts = [item.text for item in items]
        flat = [ref for item in items for ref in item.references]
        tokens = tokenize([*texts, *flat], self.tokenizer)
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

    def compute(self, items: Sequence[CaptionItem]) -> np.ndarray:
        hyps, refs = self._tokens(items)
        if self.corpus_for(items) == "pooled":
            return cider_d(hyps, refs)
        systems: dict[str, int] = {}
        corpus = [systems.setdefault(item.system, len(systems)) for item in items]
        return cider_d(hyps, refs, corpus=corpus)
