"""Semantic-relevance matrices φ(image, caption) for NCS and Semantic Recall (Biten et al.,
WACV 2022): a captioning metric of every caption against every image's references.

CIDEr-D over all image x caption pairs, vectorised. Document frequencies count images
(an n-gram's df is the number of images whose references contain it; log of the number of
images), as one pycocoevalcap `Cider` call over one item per image would. The clipped
term Σ_g min(h_g, r_g)·r_g is not a dot product, but with h = tf_h·idf, r = tf_r·idf and
integer tf it is Σ_{t≥1} Σ_g [tf_h,g ≥ t]·([tf_r,g ≥ t]·tf_r,g·idf_g²): a sum of sparse
products, one per count level t. The Gaussian length penalty depends on the pair's two
lengths, so captions are grouped by length and each group meets its own penalty-weighted
per-image reference matrix. The result equals `metrics.text.cider.cider_d` scored one caption
against each image (tests check it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import sparse

from metrics.retrieval.evaluation import RelevanceView
from metrics.retrieval.positives import (
    Id,
    PositiveSet,
    normalize_id,
    positive_set_from_pairs,
)
from metrics.stats.confidence import check_ci
from metrics.stats.correlation import (
    correlation,
    correlation_ci,
    image_weights,
)
from metrics.text.cider import _ngram_counts
from metrics.untrusted import ID_KINDS, REAL_KINDS, Npz, check_array
from rubrics.escape import text_refusal

RELEVANCE_METRICS = ("cider-d", "spice-approx")


class RelevanceError(ValueError):
    """An unusable relevance file."""


@dataclass(frozen=True, eq=False)
class RelevanceMatrix:
    """φ as an (images x captions) float32 matrix, with its ids, the signature of how it
    was made, and the ground-truth pairs (each caption with its own image) that NCS's
    `no-gt` variant removes."""

    metric: str
    signature: str
    images: tuple[Id, ...]
    captions: tuple[Id, ...]
    values: np.ndarray
    ground_truth: tuple[tuple[Id, Id], ...] = ()

    def views(self) -> dict[str, RelevanceView]:
        return {"i2t": RelevanceView(self.images, self.captions, self.values),
                "t2i": RelevanceView(self.captions, self.images, self.values.T)}

    def truth(self) -> PositiveSet | None:
        if not self.ground_truth:
            return None
        return positive_set_from_pairs("ground-truth", self.ground_truth)


def write_relevance(matrix: RelevanceMatrix, path: Path) -> None:
    """An .npz with the values, the ids (as strings) and the signature."""
    truth = np.array(matrix.ground_truth, dtype=str).reshape(-1, 2)
    with open(path, "wb") as handle:
        np.savez(handle, values=matrix.values.astype(np.float32),
                 image_ids=np.array([str(i) for i in matrix.images]),
                 caption_ids=np.array([str(c) for c in matrix.captions]),
                 metric=np.array(matrix.metric), signature=np.array(matrix.signature),
                 ground_truth=truth)


def read_relevance(path: Path) -> RelevanceMatrix:
    """A relevance matrix as `write_relevance` writes it, each array's header checked
    before its data is read (`metrics.untrusted.Npz`): values a 2-D real matrix of shape
    (len(image_ids), len(caption_ids)), ids 1-D, metric and signature single strings,
    ground_truth (pairs, N x 2). RelevanceError names the file and the problem."""
    path = Path(path)
    with Npz(path, RelevanceError) as archive:  # a FIFO or a directory is refused here
        needed = {"values", "image_ids", "caption_ids", "metric", "signature"}
        missing = needed - set(archive.files)
        if missing:
            raise RelevanceError(f"{path}: not a relevance matrix (missing "
                                 f"{', '.join(sorted(missing))}); build one with "
                                 "`thumb retrieval relevance`")
        shapes = {}
        for name, kinds, what, ndim in (
                ("values", REAL_KINDS, "relevance is real numbers", (2,)),
                ("image_ids", ID_KINDS, "ids are integers or strings", (1,)),
                ("caption_ids", ID_KINDS, "ids are integers or strings", (1,)),
                ("metric", "U", "a metric is a name", (0,)),
                ("signature", "U", "a signature is text", (0,)),
                ("ground_truth", ID_KINDS, "ids are integers or strings", (2,))):
            if name in archive.files:
                header = archive.header(name)
                check_array(header, f"{path}: {name}", RelevanceError, kinds=kinds,
                            what=what, ndim=ndim)
                shapes[name] = header.shape
        expected = (shapes["image_ids"][0], shapes["caption_ids"][0])
        if shapes["values"] != expected or shapes.get("ground_truth", (0, 2))[1:] != (2,):
            raise RelevanceError(f"{path}: values must be a finite {expected[0]} x "
                                 f"{expected[1]} matrix, ground_truth pairs (N x 2)")
        try:
            images = tuple(normalize_id(str(i)) for i in archive.array("image_ids"))
            captions = tuple(normalize_id(str(c)) for c in archive.array("caption_ids"))
            truth = archive.array("ground_truth") if "ground_truth" in shapes else []
            pairs = tuple((normalize_id(str(i)), normalize_id(str(c))) for i, c in truth)
        except ValueError as error:
            if isinstance(error, RelevanceError):
                raise
            raise RelevanceError(f"{path}: {error}") from None
        metric, signature = str(archive.array("metric")), str(archive.array("signature"))
        for name, text in (("metric", metric), ("signature", signature)):
            problem = text_refusal(text)  # both are stored and shown, like imported text
            if problem is not None:
                raise RelevanceError(f"{path}: {name}: {problem}")
        values = archive.array("values")
    if values.dtype.kind in "iu":
        values = values.astype(np.float64)
    if not np.isfinite(values).all():
        raise RelevanceError(f"{path}: values must be a finite {len(images)} x "
                             f"{len(captions)} matrix")
    if values.min(initial=0) < 0:  # CIDEr-D and spice-approx (`relevance`) are >= 0
        row, column = (int(i[0]) for i in np.nonzero(values < 0))
        raise RelevanceError(f"{path}: relevance must not be negative (NCS, Biten et al. "
                             f"2022, sums it as a gain): image {images[row]!r}, caption "
                             f"{captions[column]!r} has {values[row, column]:g} "
                             f"({int((values < 0).sum())} negative value(s) in all)")
    return RelevanceMatrix(metric, signature, images, captions, values, pairs)


# --- CIDEr-D over all pairs ------------------------------------------------------------

def cider_d_all_pairs(captions: Sequence[str], references: Sequence[Sequence[str]], *,
                      n: int = 4, sigma: float = 6.0, chunk: int = 2048,
                      progress: Callable[[int, int], None] | None = None) -> np.ndarray:
    """(images x captions) CIDEr-D of every tokenised caption against every image's
    tokenised references. `progress(done, total)` is called as caption groups finish."""
    images = len(references)
    if images == 0 or not captions:
        return np.zeros((images, len(captions)), dtype=np.float32)
    unique_refs: dict[str, int] = {}
    pair_ref = np.array([unique_refs.setdefault(r, len(unique_refs))
                         for refs in references for r in refs], dtype=np.int64)
    owner = np.repeat(np.arange(images), [len(refs) for refs in references])
    if (np.bincount(owner, minlength=images) == 0).any():
        raise ValueError("every image needs at least one reference")
    counts = _ngram_counts([*captions, *unique_refs], n)
    split = len(captions)
    membership = sparse.csr_matrix((np.ones(len(owner)), (owner, pair_ref)),
                                   shape=(images, len(unique_refs)))
    present_of = membership.copy()
    present_of.data[:] = 1.0
    per_image = np.bincount(owner, minlength=images).astype(float)
    lengths = np.asarray(counts[1].sum(axis=1)).ravel()  # bigrams, as pycocoevalcap
    caption_length, ref_length = lengths[:split], lengths[split:]
    groups = np.unique(caption_length)
    prepared = []
    for matrix in counts:
        hyp, ref = matrix[:split].tocsr(), matrix[split:].tocsr()
        df = np.asarray(((present_of @ (ref > 0).astype(float)) > 0).sum(axis=0)).ravel()
        idf = np.log(float(images)) - np.log(np.maximum(1.0, df))
        norm_h = _norms(hyp, idf)
        norm_r = _norms(ref, idf)
        levels = []
        for level in range(1, int(max(hyp.data.max(initial=0), 1)) + 1):
            a = _level_rows(hyp, level, None, norm_h)
            b = _level_rows(ref, level, idf**2, norm_r)
            if a.nnz and b.nnz:
                levels.append((a, b))
        prepared.append(levels)
    result = np.zeros((len(captions), images), dtype=np.float32)
    done = 0
    for length in groups:
        members = np.nonzero(caption_length == length)[0]
        penalty = np.exp(-((length - ref_length) ** 2) / (2 * sigma**2))
        weights = sparse.csr_matrix(
            (penalty[pair_ref] / per_image[owner], (owner, pair_ref)),
            shape=(images, len(unique_refs)))
        products = [(a, (weights @ b).T.tocsr()) for levels in prepared for a, b in levels]
        for start in range(0, len(members), chunk):
            rows = members[start : start + chunk]
            block = np.zeros((len(rows), images))
            for a, image_side in products:
                block += (a[rows] @ image_side).toarray()
            result[rows] = block * (10.0 / n)
            done += len(rows)
            if progress is not None:
                progress(done, len(captions))
    return result.T.copy()


def _norms(counts: sparse.csr_matrix, idf: np.ndarray) -> np.ndarray:
    weighted = counts.multiply(idf[None, :]).tocsr()
    return np.sqrt(np.asarray(weighted.multiply(weighted).sum(axis=1)).ravel())


def _level_rows(counts: sparse.csr_matrix, level: int, weight: np.ndarray | None,
                norms: np.ndarray) -> sparse.csr_matrix:
    """Entries with count ≥ level: 1 (captions) or count·weight (references), rows
    divided by their tf-idf norm (rows of norm 0 stay 0: they share nothing)."""
    kept = counts.copy()
    mask = kept.data >= level
    if weight is None:
        kept.data = mask.astype(float)
    else:
        kept.data = np.where(mask, kept.data * weight[kept.indices], 0.0)
    kept.eliminate_zeros()
    scale = np.divide(1.0, norms, out=np.zeros_like(norms, dtype=float), where=norms != 0)
    return sparse.diags(scale) @ kept


def pairwise_relevance(captions: Sequence[str], references: Sequence[Sequence[str]],
                       score: Callable[[str, Sequence[str]], float]) -> np.ndarray:
    """(images x captions) of any per-pair metric: a plain loop, for small projects."""
    return np.array([[score(caption, refs) for caption in captions] for refs in references],
                    dtype=np.float32)


# --- human agreement (the NCS paper's Table 1 analysis) --------------------------------

def human_agreement(judgments: pd.DataFrame, scorers: Mapping[str, np.ndarray], *,
                    bootstrap: int = 1000, ci: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Pearson, Spearman and Kendall τ-b of each scorer's value per judged pair (binary
    relevance of a positive set, or φ of a relevance matrix) with the human grades; BCa
    bootstrap CIs resample images, Kendall's τ-b's too (one O(n log n) pass per
    resample). One row per scorer and method: scorer, method, r, ci_low, ci_high, n,
    ci_warning (why a CI deserves less trust, if it does)."""
    check_ci(ci)
    grades = judgments["grade"].to_numpy(dtype=float)
    weights = image_weights(judgments["image_id"].tolist(), bootstrap, seed,
                            jackknife=True) if bootstrap else None
    rows = []
    for name, values in scorers.items():
        values = np.asarray(values, dtype=float)
        if values.shape != grades.shape:
            raise ValueError(f"{name}: {values.shape[0]} values for {len(grades)} judgments")
        for method in ("pearson", "spearman", "kendall-b"):
            constant = np.ptp(values) == 0 or np.ptp(grades) == 0
            r = float("nan") if constant else correlation(values, grades, method)
            low, high, warning = (float("nan"), float("nan"), None) \
                if weights is None or constant else correlation_ci(
                    values, grades, method, weights, ci, kendall=True, bootstrap=bootstrap,
                    estimate=r)
            rows.append({"scorer": name, "method": method, "r": r, "ci_low": low,
                         "ci_high": high, "n": len(grades), "ci_warning": warning})
    return pd.DataFrame(rows)
