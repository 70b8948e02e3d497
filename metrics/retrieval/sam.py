"""Semantic Adaptive Margin (SAM, Biten et al., "Is an image worth five sentences?", WACV
2022, §4): a triplet loss for image-text matching whose margin follows a captioning metric
instead of a constant.

A batch holds B matched pairs, pair p = image i_p with caption c_p. `similarity[i, j]` is the
model's score s(i_i, c_j) of image i with caption j, and `relevance[i, j]` = φ(G_i, c_j), the
captioning metric (e.g. CIDEr) of caption j against image i's references G_i.

Eq. 6, the triplet loss with a constant margin alpha, over triplets (anchor, positive p,
negative n) in both directions:

    L_T = Σ [alpha - s(anchor, p) + s(anchor, n)]_+

Eq. 7, SAM: the margin of each triplet is measured against the ANCHOR PAIR's references G_p,
in both directions:

- image anchor i_p, positive caption c_p, negative caption c_k:
  alpha_i2t = (φ(G_p, c_p) - φ(G_p, c_k)) / τ = (relevance[p, p] - relevance[p, k]) / τ,
  hinge [alpha_i2t - s(i_p, c_p) + s(i_p, c_k)]_+;
- caption anchor c_p, positive image i_p, negative image i_k (c_k its caption):
  alpha_t2i = (φ(G_p, c_p) - φ(G_p, c_k)) / τ = (relevance[p, p] - relevance[p, k]) / τ,
  hinge [alpha_t2i - s(i_p, c_p) + s(i_k, c_p)]_+.

(The margin of a caption anchor is NOT φ(G_k, c_p) = relevance[k, p], the anchor caption
against the negative image's references.) `relevance` is detached: gradients reach
`similarity` only.

Which negatives enter the sum (`sampling`; §5.4 of the paper ablates the first three):

- "hard": per anchor and direction, the one negative closest to the anchor by the model,
  the largest s(anchor, n) (hard negative, HN);
- "soft": the one negative furthest from the anchor, the smallest s(anchor, n) (soft
  negative, SN);
- "random": one negative drawn uniformly among the B - 1 others (random sampling, RS).
  Reproducible: with `generator` (a torch.Generator) or under torch.manual_seed without it.
  The draw is `torch.randint(B - 1, (B,))` for the image anchors, then the same for the
  caption anchors, on the generator's device (CPU without one); anchor p's draw d names
  negative d if d < p, else d + 1;
- "max-violation": the one negative with the largest hinge (VSE++'s choice; chosen by the
  hinge, so by margin and similarity together, not by similarity alone);
- "all": every negative, summed.

hard, soft and random choose by similarity (or by chance) first and only then apply the
hinge with that negative's Eq. 7 margin, so a chosen negative may contribute 0. Ties in
similarity go to the lowest index (deterministic). The default is "max-violation": the
authors' code (github.com/andrespmd/semantic_adaptive_margin) defaults to "random", its
README trains COCO with "random" and Flickr30K with "soft", and without §5.4's table at hand
we cannot say that the paper names one of the three best overall; max-violation is
deterministic, was this module's default (then called "hardest") and is the VSE++ sampling
of the triplet losses SAM is added to.

With `triplet_margin`, L_T (Eq. 6) with alpha = triplet_margin is added, times
`triplet_weight`, over the same negatives: for hard, soft and random the same indices (one
draw serves both terms); for "max-violation" L_T's own largest hinge (with a constant margin
that is the hard negative); for "all" every negative. Torch is imported here only: install
the `metrics` extra. thumb-tui trains nothing; this is for those who do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

SAMPLING = ("hard", "soft", "random", "max-violation", "all")
SAMPLED = ("hard", "soft", "random")  # one negative per anchor, chosen before the hinge


def _without_diagonal(matrix: torch.Tensor) -> torch.Tensor:
    """(B x B-1): row p without its column p."""
    import torch

    size = matrix.shape[0]
    off = ~torch.eye(size, dtype=torch.bool, device=matrix.device)
    return matrix[off].view(size, size - 1)


def _offset_to_index(offsets: torch.Tensor) -> torch.Tensor:
    """Offset d among the B - 1 others of anchor p -> batch index (d, or d + 1 past p)."""
    import torch

    anchors = torch.arange(offsets.shape[0], device=offsets.device)
    return offsets + (offsets >= anchors).long()


def sample_negatives(similarity: torch.Tensor, sampling: str, *,
                     generator: torch.Generator | None = None
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """(negative caption of each image anchor, negative image of each caption anchor), two
    length-B index tensors, for sampling "hard", "soft" or "random" (see the module)."""
    import torch

    if sampling not in SAMPLED:
        raise ValueError(f"sampling must be one of {', '.join(SAMPLED)} to draw negatives")
    size = similarity.shape[0]
    if size < 2:
        raise ValueError("a batch of fewer than 2 pairs has no negatives")
    if sampling == "random":
        device = generator.device if generator is not None else torch.device("cpu")
        draws = [torch.randint(size - 1, (size,), generator=generator, device=device)
                 for _ in range(2)]
        return tuple(_offset_to_index(d.to(similarity.device)) for d in draws)
    picked = []
    for rows in (similarity, similarity.T):  # row p: s(anchor p, every candidate)
        others = _without_diagonal(rows.detach())
        # argmax/argmin return the first extreme: ties go to the lowest index
        offsets = others.argmax(dim=1) if sampling == "hard" else others.argmin(dim=1)
        picked.append(_offset_to_index(offsets))
    return picked[0], picked[1]


def _direction_hinges(similarity: torch.Tensor, margin: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Hinges in anchor-row form, (B x B) each, row p = anchor p, column k = negative k (the
    diagonal is no triplet): image anchors [margin[p, k] - s(i_p, c_p) + s(i_p, c_k)]_+ and
    caption anchors [margin[p, k] - s(i_p, c_p) + s(i_k, c_p)]_+."""
    import torch

    positive = similarity.diagonal()[:, None]
    return tuple(torch.relu(margin - positive + rows) for rows in (similarity, similarity.T))


def _reduce(hinges: tuple[torch.Tensor, torch.Tensor], sampling: str,
            negatives: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
    total = hinges[0].new_zeros(())
    for direction, hinge in enumerate(hinges):
        if sampling == "all":
            total = total + _without_diagonal(hinge).sum()
        elif sampling == "max-violation":
            total = total + _without_diagonal(hinge).max(dim=1).values.sum()
        else:
            total = total + hinge.gather(1, negatives[direction][:, None]).sum()
    return total


def sam_loss(similarity: torch.Tensor, relevance: torch.Tensor, *, tau: float = 1.0,
             sampling: str = "max-violation", triplet_margin: float | None = None,
             triplet_weight: float = 1.0,
             generator: torch.Generator | None = None) -> torch.Tensor:
    """L_SAM (Eq. 7) + triplet_weight · L_T (Eq. 6, when triplet_margin is given) of one
    batch, summed over anchors and both directions; a scalar tensor with gradients. A batch
    of one pair has no negatives: 0. `generator` serves sampling="random" only."""
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
    if similarity.shape[0] < 2:
        return similarity.sum() * 0
    relevance = relevance.to(similarity.dtype).detach()
    # margin[p, k] = (φ(G_p, c_p) - φ(G_p, c_k)) / τ: Eq. 7 in both directions
    margin = (relevance.diagonal()[:, None] - relevance) / tau
    negatives = None
    if sampling in SAMPLED:
        negatives = sample_negatives(similarity, sampling, generator=generator)
    loss = _reduce(_direction_hinges(similarity, margin), sampling, negatives)
    if triplet_margin is not None:
        fixed = torch.full_like(similarity, float(triplet_margin))
        loss = loss + triplet_weight * _reduce(_direction_hinges(similarity, fixed),
                                               sampling, negatives)
    return loss
