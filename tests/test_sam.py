"""The SAM loss (Biten et al., WACV 2022, Eq. 6-7 and the §5.4 sampling strategies) against
the paper's text, one triplet at a time: values and gradients."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from metrics.retrieval.sam import SAMPLING, sam_loss, sample_negatives  # noqa: E402


def _pick(candidates, sampling, hinge_of, draw):
    """The paper's choice of ONE negative among (index, s(anchor, negative)) candidates, in
    batch order: HN the closest to the anchor (largest s), SN the furthest (smallest s), the
    first of equals; RS the draw-th of them; max-violation the largest hinge."""
    if sampling == "random":
        return candidates[draw][0]
    if sampling == "max-violation":
        best = candidates[0][0]
        for index, _ in candidates:
            if hinge_of(index).item() > hinge_of(best).item():
                best = index
        return best
    best, best_score = candidates[0]
    for index, score in candidates[1:]:
        closer = score > best_score if sampling == "hard" else score < best_score
        if closer:
            best, best_score = index, score
    return best


def _paper_loss(similarity, relevance, tau, sampling, triplet_margin=None,
                triplet_weight=1.0, draws=None):
    """L_SAM (+ triplet_weight · L_T) written from the paper, anchor by anchor.

    Pair p is image i_p with caption c_p; s(i_a, c_b) = similarity[a][b] and
    φ(G_a, c_b) = relevance[a][b] (caption b against image a's references)."""
    size = len(similarity)

    def s(image, caption):
        return similarity[image][caption]

    def phi(references_of, caption):
        return relevance[references_of][caption].item()

    total = similarity.new_zeros(())
    for anchor_kind in ("image", "caption"):
        for p in range(size):
            others = [k for k in range(size) if k != p]
            s_positive = s(p, p)  # s(i_p, c_p), both directions

            def s_negative(k, anchor_kind=anchor_kind, p=p):
                # image anchor i_p against caption c_k; caption anchor c_p against image i_k
                return s(p, k) if anchor_kind == "image" else s(k, p)

            def alpha_sam(k, p=p):
                # Eq. 7: image anchor: (φ(G_p, c_p) - φ(G_p, c_k)) / τ; caption anchor with
                # negative image i_k, whose caption is c_k: also (φ(G_p, c_p) - φ(G_p, c_k)) / τ
                return (phi(p, p) - phi(p, k)) / tau

            terms = [("sam", 1.0, alpha_sam)]
            if triplet_margin is not None:
                terms.append(("fixed", triplet_weight, lambda k: triplet_margin))  # Eq. 6
            candidates = [(k, s_negative(k).item()) for k in others]
            draw = None if draws is None else draws[anchor_kind][p]
            for name, weight, alpha in terms:

                def hinge(k, alpha=alpha, s_positive=s_positive, s_negative=s_negative):
                    return torch.clamp(alpha(k) - s_positive + s_negative(k), min=0)

                if sampling == "all":
                    for k in others:
                        total = total + weight * hinge(k)
                    continue
                # hard/soft/random: one negative per anchor for both terms; max-violation:
                # each term its own largest hinge
                picked = _pick(candidates, sampling, hinge, draw)
                assert picked != p, name
                total = total + weight * hinge(picked)
    return total


def _documented_draws(seed, size):
    """What sampling="random" draws with torch.Generator().manual_seed(seed), as the module
    documents it: randint(B - 1, (B,)) for image anchors, then for caption anchors; the draw
    is the position among the anchor's B - 1 others, in batch order."""
    generator = torch.Generator().manual_seed(seed)
    image = torch.randint(size - 1, (size,), generator=generator).tolist()
    caption = torch.randint(size - 1, (size,), generator=generator).tolist()
    return {"image": image, "caption": caption}


def _batch(seed, size=7):
    generator = torch.Generator().manual_seed(seed)
    similarity = torch.randn(size, size, generator=generator, dtype=torch.float64)
    relevance = torch.rand(size, size, generator=generator, dtype=torch.float64) * 3
    return similarity, relevance  # relevance is asymmetric: Eq. 7's direction matters


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("sampling", SAMPLING)
@pytest.mark.parametrize(("triplet_margin", "tau"), [(None, 2.5), (0.2, 4.0), (0.5, 0.75)])
def test_sam_equals_the_papers_triplets_in_value_and_gradient(seed, sampling, triplet_margin,
                                                              tau):
    similarity, relevance = _batch(seed)
    ours_input = similarity.clone().requires_grad_(True)
    paper_input = similarity.clone().requires_grad_(True)
    generator = torch.Generator().manual_seed(100 + seed)
    ours = sam_loss(ours_input, relevance, tau=tau, sampling=sampling,
                    triplet_margin=triplet_margin, triplet_weight=0.5, generator=generator)
    draws = _documented_draws(100 + seed, len(similarity)) if sampling == "random" else None
    paper = _paper_loss(paper_input, relevance, tau, sampling, triplet_margin, 0.5, draws)
    ours.backward()
    paper.backward()
    assert ours.item() == pytest.approx(paper.item(), rel=1e-13, abs=1e-13)
    assert torch.allclose(ours_input.grad, paper_input.grad, rtol=0, atol=1e-13)
    assert paper.item() > 0 and paper_input.grad.abs().sum() > 0


# A hand-worked batch (B = 3, τ = 2). Rows are images, columns captions:
#   similarity s(i_a, c_b)      relevance φ(G_a, c_b)
#   [0.9 0.2 0.1]               [3 1 2]
#   [0.3 0.8 0.4]               [0 3 1]
#   [0.5 0.0 0.7]               [1 2 3]
# Eq. 7 margins (φ(G_p, c_p) - φ(G_p, c_k)) / 2, the same for both directions:
#   anchor 0: k=1 1.0, k=2 0.5;  anchor 1: k=0 1.5, k=2 1.0;  anchor 2: k=0 1.0, k=1 0.5.
# Image anchors [alpha - s(i_p, c_p) + s(i_p, c_k)]_+:
#   p0: k1 1.0-0.9+0.2 = 0.3, k2 0.5-0.9+0.1 < 0 -> 0
#   p1: k0 1.5-0.8+0.3 = 1.0, k2 1.0-0.8+0.4 = 0.6
#   p2: k0 1.0-0.7+0.5 = 0.8, k1 0.5-0.7+0.0 < 0 -> 0
# Caption anchors [alpha - s(i_p, c_p) + s(i_k, c_p)]_+:
#   p0: k1 1.0-0.9+0.3 = 0.4, k2 0.5-0.9+0.5 = 0.1
#   p1: k0 1.5-0.8+0.2 = 0.9, k2 1.0-0.8+0.0 = 0.2
#   p2: k0 1.0-0.7+0.1 = 0.4, k1 0.5-0.7+0.4 = 0.2
# all: 2.7 + 2.2 = 4.9.  max-violation: (0.3+1.0+0.8) + (0.4+0.9+0.4) = 3.8.
# hard (largest s): images p0->c1, p1->c2, p2->c0: 0.3+0.6+0.8 = 1.7; captions p0->i2 (0.5 >
#   0.3), p1->i0 (0.2 > 0.0), p2->i1 (0.4 > 0.1): 0.1+0.9+0.2 = 1.2; total 2.9.
# soft (smallest s): images p0->c2, p1->c0, p2->c1: 0+1.0+0 = 1.0; captions p0->i1, p1->i2,
#   p2->i0: 0.4+0.2+0.4 = 1.0; total 2.0.
# The old caption-anchor margin (φ(G_p, c_p) - φ(G_k, c_p)) / 2 = relevance[k, p] gave
#   p0: k1 1.5, k2 1.0; p1: k0 1.0, k2 0.5; p2: k0 0.5, k1 1.0, hinges 0.9, 0.6 | 0.4, 0 |
#   0, 0.7: all 2.7 + 2.6 = 5.3 and max-violation 2.1 + 2.0 = 4.1 instead of 4.9 and 3.8.
HAND_SIMILARITY = [[0.9, 0.2, 0.1], [0.3, 0.8, 0.4], [0.5, 0.0, 0.7]]
HAND_RELEVANCE = [[3.0, 1.0, 2.0], [0.0, 3.0, 1.0], [1.0, 2.0, 3.0]]


@pytest.mark.parametrize(("sampling", "expected"), [("all", 4.9), ("max-violation", 3.8),
                                                    ("hard", 2.9), ("soft", 2.0)])
def test_caption_anchor_margin_is_measured_against_the_anchors_references(sampling, expected):
    similarity = torch.tensor(HAND_SIMILARITY, dtype=torch.float64)
    relevance = torch.tensor(HAND_RELEVANCE, dtype=torch.float64)
    loss = sam_loss(similarity, relevance, tau=2.0, sampling=sampling)
    assert loss.item() == pytest.approx(expected, abs=1e-12)


def test_hand_example_gradient():
    # hard: the six chosen hinges above (0.3, 0.6, 0.8 | 0.1, 0.9, 0.2) are all positive, so
    # each adds -1 at its s(i_p, c_p) and +1 at its negative's similarity: image anchors at
    # (0,1), (1,2), (2,0); caption anchors s(i_k, c_p) at (2,0), (0,1), (1,2).
    similarity = torch.tensor(HAND_SIMILARITY, dtype=torch.float64, requires_grad=True)
    relevance = torch.tensor(HAND_RELEVANCE, dtype=torch.float64)
    sam_loss(similarity, relevance, tau=2.0, sampling="hard").backward()
    assert similarity.grad.tolist() == [[-2.0, 2.0, 0.0], [0.0, -2.0, 2.0], [2.0, 0.0, -2.0]]


def test_ties_in_similarity_go_to_the_lowest_index():
    similarity = torch.tensor([[1.0, 0.2, 0.7, 0.7],
                               [0.5, 1.0, 0.5, 0.5],
                               [0.5, 0.5, 1.0, 0.5],
                               [0.5, 0.5, 0.5, 1.0]])
    hard_images, hard_captions = sample_negatives(similarity, "hard")
    soft_images, soft_captions = sample_negatives(similarity, "soft")
    # image anchors read rows: row 0 ties 0.7 at captions 2 and 3; rows 1-3 tie everywhere
    assert hard_images.tolist() == [2, 0, 0, 0]
    assert soft_images.tolist() == [1, 0, 0, 0]
    # caption anchors read columns: column 1 is (0.2, ·, 0.5, 0.5), column 2 (0.7, 0.5, ·, 0.5)
    assert hard_captions.tolist() == [1, 2, 0, 0]
    assert soft_captions.tolist() == [1, 0, 1, 1]


def test_random_sampling_is_reproducible_and_never_the_anchor():
    similarity, relevance = _batch(5, size=9)
    losses = {sam_loss(similarity, relevance, sampling="random",
                       generator=torch.Generator().manual_seed(7)).item() for _ in range(3)}
    assert len(losses) == 1
    torch.manual_seed(3)
    first = sam_loss(similarity, relevance, sampling="random").item()
    torch.manual_seed(3)
    assert sam_loss(similarity, relevance, sampling="random").item() == first
    seen = set()
    for seed in range(200):
        for direction in sample_negatives(similarity, "random",
                                          generator=torch.Generator().manual_seed(seed)):
            pairs = list(enumerate(direction.tolist()))
            assert all(anchor != negative for anchor, negative in pairs)
            seen.update(pairs)
    assert len(seen) == 9 * 8  # every (anchor, other) pair is drawn sometime


def test_a_single_pair_has_no_negatives():
    for sampling in SAMPLING:
        assert sam_loss(torch.ones(1, 1), torch.ones(1, 1), sampling=sampling,
                        triplet_margin=0.2).item() == 0


def test_sam_refuses_bad_arguments():
    with pytest.raises(ValueError, match="relevance has shape"):
        sam_loss(torch.zeros(3, 3), torch.zeros(3, 4))
    for name in ("semi-hard", "hardest"):
        with pytest.raises(ValueError, match="sampling must be one of"):
            sam_loss(torch.zeros(3, 3), torch.zeros(3, 3), sampling=name)
    with pytest.raises(ValueError, match="τ"):
        sam_loss(torch.zeros(3, 3), torch.zeros(3, 3), tau=0)


@pytest.mark.slow
def test_the_example_fits_a_projection_in_seconds():
    from benchmarks.sam_example import fit

    before, after = fit(steps=60, seed=0)
    assert after["loss"] < 0.5 * before["loss"]
    assert after["ncs@5"] > before["ncs@5"]
