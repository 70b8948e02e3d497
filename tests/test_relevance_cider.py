"""The all-pairs CIDEr-D relevance matrix (φ of the NCS paper) against pycocoevalcap's
`Cider`, called once per caption with every image's references as its corpus: the
definition the matrix claims (document frequencies over images, each image once)."""

from __future__ import annotations

import numpy as np
import pytest

from metrics.retrieval.relevance import cider_d_all_pairs

Cider = pytest.importorskip("pycocoevalcap.cider.cider").Cider


def _corpus(rng: np.random.Generator, images: int) -> tuple[list[str], list[list[str]]]:
    words = [f"w{i}" for i in range(12)]

    def sentence() -> str:
        return " ".join(rng.choice(words, rng.integers(1, 9)))

    references = [[sentence() for _ in range(rng.integers(1, 5))] for _ in range(images)]
    references[1] = list(references[0])  # two images with the same references
    captions = [sentence() for _ in range(9)] + [references[2][0]]
    return captions, references


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_pair_equals_pycocoevalcap(seed):
    captions, references = _corpus(np.random.default_rng(seed), images=7)
    matrix = cider_d_all_pairs(captions, references)
    assert matrix.shape == (len(references), len(captions))
    expected = np.empty(matrix.shape)
    for column, caption in enumerate(captions):
        gts = {image: refs for image, refs in enumerate(references)}
        res = {image: [caption] for image in range(len(references))}
        expected[:, column] = Cider().compute_score(gts, res)[1]
    assert np.abs(expected).max() > 1  # not all zero: the comparison can fail
    tolerance = 1e-12 if matrix.dtype == np.float64 else 1e-5
    np.testing.assert_allclose(matrix, expected, rtol=tolerance, atol=tolerance)
