"""Semantic Adaptive Margin (SAM, Biten et al., WACV 2022, §4): a triplet loss for
image-text matching whose margin follows a captioning metric instead of a constant.

For a batch of B matched pairs (image i with caption i), `similarity[i, j]` is the model's
score of image i with caption j and `relevance[i, j]` = φ(G_i, c_j), the metric of caption j
against image i's references. Each triplet (anchor, positive p, negative n) gets the margin
alpha = (φ(G_p, c_p) - φ(G_p, c_n)) / τ when an image anchors (negatives are captions), and
alpha = (φ(G_p, c_p) - φ(G_n, c_p)) / τ when a caption anchors (negatives are images). The loss
is Σ [alpha - s(anchor, p) + s(anchor, n)]_+ over the negatives of every anchor in both
directions ("all"), or over the one negative with the largest hinge per anchor ("hardest",
the VSE++ choice). With `triplet_margin`, the fixed-margin triplet loss L_T of the same
sampling is added, times `triplet_weight`. Torch is imported here only: install the
`metrics` extra. thumb-tui trains nothing; this is for those who do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

SAMPLING = ("hardest", "all")


def _hinge_terms(similarity: torch.Tensor, margin_i2t: torch.Tensor,
                 margin_t2i: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B x B) hinges of image anchors (row i: negatives j) and caption anchors (column
    j: negatives i), zero on the diagonal."""
    import torch

    positive = similarity.diagonal()
    i2t = torch.relu(margin_i2t - positive[:, None] + similarity)
    t2i = torch.relu(margin_t2i - positive[None, :] + similarity)
    off = ~torch.eye(similarity.shape[0], dtype=torch.bool, device=similarity.device)
    return i2t * off, t2i * off


def _reduce(i2t: torch.Tensor, t2i: torch.Tensor, sampling: str) -> torch.Tensor:
    if sampling == "hardest":
        return i2t.max(dim=1).values.sum() + t2i.max(dim=0).values.sum()
    return i2t.sum() + t2i.sum()


def sam_loss(similarity: torch.Tensor, relevance: torch.Tensor, *, tau: float = 1.0,
             sampling: str = "hardest", triplet_margin: float | None = None,
             triplet_weight: float = 1.0) -> torch.Tensor:
    """L_SAM (+ triplet_weight · L_T) of one batch; a scalar tensor with gradients."""
    import torch

    if sampling not in SAMPLING:
        raise ValueError(f"sampling must be one of {', '.join(SAMPLING)}")
    if tau <= 0:
        raise ValueError("τ must be positive")
    if similarity.ndim != 2 or similarity.shape[0] != similarity.shape[1]:
        raise ValueError("similarity must be a square (batch x batch) matrix")
    if relevance.shape != similarity.shape:
        raise ValueError(f"relevance has shape {tuple(relevance.shape)}, similarity "
                         f"{tuple(similarity.shape)}")
    relevance = relevance.to(similarity.dtype).detach()
    own = relevance.diagonal()
    margin_i2t = (own[:, None] - relevance) / tau  # row p: φ(G_p, c_p) - φ(G_p, c_n)
    margin_t2i = (own[None, :] - relevance) / tau  # column p: φ(G_p, c_p) - φ(G_n, c_p)
    loss = _reduce(*_hinge_terms(similarity, margin_i2t, margin_t2i), sampling)
    if triplet_margin is not None:
        fixed = torch.full_like(similarity, float(triplet_margin))
        loss = loss + triplet_weight * _reduce(*_hinge_terms(similarity, fixed, fixed),
                                               sampling)
    return loss
