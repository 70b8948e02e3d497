"""A short SAM example: fit linear projections of random image and caption features with
`metrics.retrieval.sam.sam_loss` on CPU in seconds, and watch NCS@5 (on held-out pairs) rise.

Images and captions share hidden "meanings" (latent vectors); each side sees them through
its own random linear map plus noise, and φ(image, caption) grows with the similarity of
their meanings, as a captioning metric would. Run: `python benchmarks/sam_example.py`."""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from metrics.retrieval.evaluation import RelevanceView, semantic_samples  # noqa: E402
from metrics.retrieval.rankings import scored_directions  # noqa: E402
from metrics.retrieval.sam import sam_loss  # noqa: E402


def _data(rng: np.random.Generator, pairs: int, latent: int = 16, features: int = 64):
    meaning = rng.normal(size=(pairs, latent))
    meaning /= np.linalg.norm(meaning, axis=1, keepdims=True)
    to_image, to_caption = rng.normal(size=(latent, features)), rng.normal(size=(latent,
                                                                                 features))
    images = meaning @ to_image + 0.3 * rng.normal(size=(pairs, features))
    captions = meaning @ to_caption + 0.3 * rng.normal(size=(pairs, features))
    relevance = 3 * np.clip(meaning @ meaning.T, 0, None) ** 2  # CIDEr-like, 3 on the diagonal
    return images, captions, relevance


def _ncs5(similarity: np.ndarray, relevance: np.ndarray) -> float:
    ids = tuple(range(len(similarity)))
    views = {"i2t": RelevanceView(ids, ids, relevance), "t2i": RelevanceView(ids, ids,
                                                                             relevance.T)}
    samples = semantic_samples(scored_directions(similarity, ids, ids), views,
                               ground_truth=None, ks=(5,), ms=(1,))
    ratios = [s[("ncs@k", 5, None)] for s in samples.values()]
    return float(np.mean([r.value() for r in ratios]))


def fit(steps: int = 300, seed: int = 0, batch: int = 64) -> tuple[dict, dict]:
    """({loss, ncs@5} before, the same after) training."""
    import torch

    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    images, captions, relevance = _data(rng, 1500)
    train, test = slice(0, 1000), slice(1000, 1500)
    x_img = torch.tensor(images, dtype=torch.float32)
    x_cap = torch.tensor(captions, dtype=torch.float32)
    phi = torch.tensor(relevance, dtype=torch.float32)
    project_img = torch.nn.Linear(images.shape[1], 32, bias=False)
    project_cap = torch.nn.Linear(captions.shape[1], 32, bias=False)
    optimizer = torch.optim.Adam([*project_img.parameters(), *project_cap.parameters()],
                                 lr=1e-2)

    def similarity(rows: slice | torch.Tensor) -> torch.Tensor:
        a = torch.nn.functional.normalize(project_img(x_img[rows]), dim=1)
        b = torch.nn.functional.normalize(project_cap(x_cap[rows]), dim=1)
        return a @ b.T

    def state() -> dict:
        with torch.no_grad():
            fixed = torch.arange(batch)
            loss = sam_loss(similarity(fixed), phi[fixed][:, fixed], tau=10.0,
                            triplet_margin=0.1).item()
            scores = similarity(test).numpy().astype(float)
        return {"loss": loss, "ncs@5": _ncs5(scores, relevance[test, test])}

    before = state()
    for _ in range(steps):
        rows = torch.randperm(train.stop)[:batch]
        loss = sam_loss(similarity(rows), phi[rows][:, rows], tau=10.0, triplet_margin=0.1)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return before, state()


if __name__ == "__main__":
    start = time.perf_counter()
    before, after = fit()
    print(f"batch loss {before['loss']:.2f} -> {after['loss']:.2f}; held-out NCS@5 "
          f"{before['ncs@5']:.3f} -> {after['ncs@5']:.3f} in {time.perf_counter() - start:.1f} s")
