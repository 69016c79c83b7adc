"""interp.from_hf: a loaded transformers model becomes a HookedTransformer with the same logits."""

from __future__ import annotations

import pytest
import torch

import interp
from interp.load import CheckpointError
from tests.hf_models import VOCAB, bert, gpt2, llama
from tests.load.families import build

transformers = pytest.importorskip("transformers")


def bert_base():
    return transformers.BertModel(bert().config, add_pooling_layer=False)


@pytest.mark.parametrize("build", [gpt2, bert, bert_base, llama])
def test_logits_equal_the_hf_model(build):
    torch.manual_seed(0)
    hf_model = build().eval()
    with torch.no_grad():
        for p in hf_model.parameters():  # random norms and biases, so that a misplaced one would show
            p.add_(torch.randn_like(p) * 0.02)
        ids = torch.randint(1, VOCAB, (2, 9), generator=torch.Generator().manual_seed(5))
        want = hf_model(input_ids=ids)
        want = want.logits if hasattr(want, "logits") else want.last_hidden_state
        model = interp.from_hf(hf_model)
        got = model(ids)
    assert isinstance(model, interp.HookedTransformer) and not model.training
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_the_converted_model_keeps_the_hf_dtype():
    hf_model = gpt2().to(torch.bfloat16)
    assert interp.from_hf(hf_model).dtype == torch.bfloat16
    assert interp.from_hf(hf_model, dtype="float32").dtype == torch.float32


def test_unsupported_inputs_raise():
    with pytest.raises(TypeError, match="needs a transformers model"):
        interp.from_hf(torch.nn.Linear(2, 2))
    odd = build("gpt2", 16, None, widen=False, scale_attn_by_inverse_layer_idx=True)
    with pytest.raises(CheckpointError, match="scale_attn_by_inverse_layer_idx"):
        interp.from_hf(odd)
