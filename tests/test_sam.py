"""The SAM loss against a direct loop over triplets: values and gradients."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from metrics.sam import sam_loss  # noqa: E402


def _loop(similarity, relevance, tau, sampling, triplet_margin, triplet_weight):
    """The paper's formula one triplet at a time."""
    size = similarity.shape[0]
    total = similarity.new_zeros(())
    for margin_kind in ("sam", "fixed") if triplet_margin is not None else ("sam",):
        weight = 1.0 if margin_kind == "sam" else triplet_weight
        for anchor in range(size):
            image_terms, caption_terms = [], []
            for negative in range(size):
                if negative == anchor:
                    continue
                if margin_kind == "sam":
                    alpha_i = (relevance[anchor, anchor] - relevance[anchor, negative]) / tau
                    alpha_c = (relevance[anchor, anchor] - relevance[negative, anchor]) / tau
                else:
                    alpha_i = alpha_c = triplet_margin
                image_terms.append(torch.clamp(alpha_i - similarity[anchor, anchor]
                                               + similarity[anchor, negative], min=0))
                caption_terms.append(torch.clamp(alpha_c - similarity[anchor, anchor]
                                                 + similarity[negative, anchor], min=0))
            for terms in (image_terms, caption_terms):
                stacked = torch.stack(terms)
                total = total + weight * (stacked.max() if sampling == "hardest"
                                          else stacked.sum())
    return total


@pytest.mark.parametrize("sampling", ["hardest", "all"])
@pytest.mark.parametrize(("triplet_margin", "tau"), [(None, 1.0), (0.2, 4.0)])
def test_sam_equals_the_triplet_loop_in_value_and_gradient(sampling, triplet_margin, tau):
    generator = torch.Generator().manual_seed(0)
    base = torch.randn(7, 7, generator=generator, dtype=torch.float64)
    relevance = torch.rand(7, 7, generator=generator, dtype=torch.float64) * 3
    ours_input = base.clone().requires_grad_(True)
    loop_input = base.clone().requires_grad_(True)
    ours = sam_loss(ours_input, relevance, tau=tau, sampling=sampling,
                    triplet_margin=triplet_margin, triplet_weight=0.5)
    loop = _loop(loop_input, relevance, tau, sampling, triplet_margin, 0.5)
    ours.backward()
    loop.backward()
    assert ours.item() == pytest.approx(loop.item(), rel=1e-12)
    assert torch.allclose(ours_input.grad, loop_input.grad, atol=1e-12)
    assert ours.item() > 0 and ours_input.grad.abs().sum() > 0


def test_sam_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match="relevance has shape"):
        sam_loss(torch.zeros(3, 3), torch.zeros(3, 4))
    with pytest.raises(ValueError, match="sampling"):
        sam_loss(torch.zeros(3, 3), torch.zeros(3, 3), sampling="semi-hard")


def test_the_example_fits_a_projection_in_seconds():
    from benchmarks.sam_example import fit

    before, after = fit(steps=60, seed=0)
    assert after["loss"] < 0.5 * before["loss"]
    assert after["ncs@5"] > before["ncs@5"]
