import pytest
import torch

from interp.analysis import ablate, ablation_hooks
from tests.analysis.models import build, tokens


@pytest.fixture(autouse=True)
def _no_grad():
    """These tests run without autograd, as analysis code usually does; the mode ends with each test."""
    with torch.no_grad():
        yield


@pytest.fixture(scope="module")
def model():
    return build("gpt2")


def test_zero_ablating_a_head_removes_its_result(model):
    toks = tokens()
    _, cache = model.run_with_cache(
        toks, names_filter=["blocks.1.attn.hook_result", "blocks.1.hook_attn_out"]
    )
    _, ablated = model.run_with_cache(
        toks,
        names_filter="blocks.1.hook_attn_out",
        fwd_hooks=ablation_hooks(model, "blocks.1.attn.hook_z", "zero", heads=[2]),
    )
    expected = cache["blocks.1.hook_attn_out"] - cache["blocks.1.attn.hook_result"][:, :, 2]
    torch.testing.assert_close(ablated["blocks.1.hook_attn_out"], expected, atol=1e-5, rtol=0)


def test_mean_and_resample(model):
    toks, other = tokens(seed=3), tokens(seed=4)
    name = "blocks.0.hook_resid_post"
    resampled = ablate(model, toks, name, "resample", reference=other)
    torch.testing.assert_close(resampled, model(other), atol=0, rtol=0)
    only_last = ablate(model, toks, name, "resample", positions=[-1], reference=other)
    torch.testing.assert_close(only_last[:, :-1], model(toks)[:, :-1], atol=0, rtol=0)
    dataset = tokens(batch=6, seed=5)
    _, ref = model.run_with_cache(dataset, names_filter=name)
    mean = ref[name].mean(0, keepdim=True)
    _, got = model.run_with_cache(
        toks, names_filter=name, fwd_hooks=ablation_hooks(model, name, "mean", reference=dataset)
    )
    torch.testing.assert_close(got[name], mean.expand(2, -1, -1), atol=1e-6, rtol=0)
    # padding in the reference is left out of the mean
    mask = torch.ones(6, 8, dtype=torch.long)
    mask[3:, :2] = 0
    flat = ablation_hooks(model, name, "mean", reference=dataset, reference_mask=mask, per_position=False)
    _, got = model.run_with_cache(toks, names_filter=name, fwd_hooks=flat)
    _, padded = model.run_with_cache(dataset, mask, names_filter=name)
    expected = padded[name][mask.bool()].mean(0)
    torch.testing.assert_close(got[name][0, 0], expected, atol=1e-5, rtol=0)


def test_ablation_errors(model):
    toks = tokens()
    with pytest.raises(ValueError, match="how='mean' needs reference="):
        ablate(model, toks, "blocks.0.hook_resid_post", "mean")
    with pytest.raises(ValueError, match="how='drop'"):
        ablate(model, toks, "blocks.0.hook_resid_post", "drop")
    with pytest.raises(ValueError, match="has no head axis"):
        ablate(model, toks, "blocks.0.hook_resid_post", heads=[0])
    with pytest.raises(IndexError, match="head 7 is out of range"):
        ablate(model, toks, "blocks.0.attn.hook_z", heads=[7])
    with pytest.raises(IndexError, match="position -9 is out of range"):
        ablate(model, toks, "blocks.0.attn.hook_z", positions=[-9])
    with pytest.raises(ValueError, match="per_position=False"):
        ablate(model, toks, "blocks.0.hook_resid_post", "mean", reference=tokens(n=5))
