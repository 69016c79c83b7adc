import pytest
import torch

from interp.analysis import (
    MissingHooksError,
    accumulated_resid,
    direct_logit_attribution,
    dla_names,
    logit_lens,
    logit_lens_top,
)
from tests.analysis.models import build, tokens


@pytest.fixture(autouse=True)
def _no_grad():
    """These tests run without autograd, as analysis code usually does; the mode ends with each test."""
    with torch.no_grad():
        yield


@pytest.mark.parametrize("kind", ["gpt2", "llama", "bert", "gemma2", "neox"])
def test_final_row_of_the_lens_is_the_logits(kind):
    model = build(kind)
    logits, cache = model.run_with_cache(tokens(), names_filter="blocks.*.hook_resid_*")
    labels, streams = accumulated_resid(cache)
    assert labels == ["L0_pre", "L1_pre", "final"]
    assert streams.shape == (3, 2, 8, 32)
    labels, lens = logit_lens(model, cache, -1)
    torch.testing.assert_close(lens[-1], logits[:, -1].float(), atol=1e-4, rtol=1e-4)
    per_row = torch.tensor([3, 5])
    mid = not model.cfg.parallel_attn_mlp
    _, lens = logit_lens(model, cache, per_row, incl_mid=mid)
    assert lens.shape == (5 if mid else 3, 2, 50)
    torch.testing.assert_close(lens[-1], logits[[0, 1], [3, 5]].float(), atol=1e-4, rtol=1e-4)
    top = logit_lens_top(model, cache, -1, k=3)
    final = top[(top["stream"] == "final") & (top["batch"] == 0)]
    assert final["token"].tolist() == logits[0, -1].topk(3).indices.tolist()


def test_dla_of_a_soft_capped_model_adds_up_before_the_cap():
    model = build("gemma2")
    logits, cache = model.run_with_cache(tokens(), names_filter=dla_names(model))
    cap = model.cfg.logit_softcap
    uncapped = cap * torch.atanh(logits[:, -1].double() / cap)
    frame = direct_logit_attribution(model, cache, 3, -1)
    assert frame["value"].sum() == pytest.approx(float(uncapped[:, 3].mean()), abs=1e-3)


@pytest.mark.parametrize("kind", ["gpt2", "llama", "bert", "olmo2", "neox"])
def test_direct_logit_attribution_adds_up_to_the_logit_difference(kind):
    model = build(kind, lm_head="linear")
    logits, cache = model.run_with_cache(tokens(), names_filter=dla_names(model))
    frame = direct_logit_attribution(model, cache, (3, 7), -1)
    expected = (logits[:, -1, 3] - logits[:, -1, 7]).mean()
    assert frame["value"].sum() == pytest.approx(float(expected), abs=1e-4)
    assert "unembed_bias" in set(frame["component"])
    assert ("ln_final_bias" in set(frame["component"])) == (
        model.cfg.final_norm and model.cfg.norm == "layernorm"
    )
    assert frame.loc[frame["component"] == "L1H2", ["layer", "head"]].values.tolist() == [[1, 2]]
    rows = direct_logit_attribution(
        model, cache, torch.tensor([[3, 7], [4, 9]]), torch.tensor([2, 6]), reduce="none"
    )
    sums = rows.groupby("batch")["value"].sum()
    assert sums[0] == pytest.approx(float(logits[0, 2, 3] - logits[0, 2, 7]), abs=1e-4)
    assert sums[1] == pytest.approx(float(logits[1, 6, 4] - logits[1, 6, 9]), abs=1e-4)


def test_dla_errors():
    model = build("gpt2")
    _, cache = model.run_with_cache(tokens(), names_filter="blocks.*.hook_resid_*")
    with pytest.raises(MissingHooksError, match="dla_names"):
        direct_logit_attribution(model, cache, 3, -1)
    _, cache = model.run_with_cache(tokens(), names_filter=dla_names(model))
    with pytest.raises(IndexError, match="token id 50 is out of range"):
        direct_logit_attribution(model, cache, (50, 1), -1)
    with pytest.raises(IndexError, match="position 9 is out of range"):
        direct_logit_attribution(model, cache, 3, 9)
    mlm = build("bert", lm_head="mlm")
    _, cache = mlm.run_with_cache(tokens(), names_filter=[*dla_names(mlm), "blocks.1.hook_resid_post"])
    with pytest.raises(ValueError, match="lm_head='mlm'"):
        direct_logit_attribution(mlm, cache, 3, 0)
    frame = direct_logit_attribution(mlm, cache, torch.ones(32), 0)  # a direction in the final stream is fine
    assert frame["value"].sum() == pytest.approx(
        float(cache["blocks.1.hook_resid_post"][:, 0].sum(-1).mean()), abs=1e-4
    )
