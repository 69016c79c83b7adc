"""Parity with transformers on tiny random checkpoints of every family, saved and loaded as folders.

Each reference is a transformers model with a small random config (:mod:`tests.load.families`), written by its
own ``save_pretrained`` (and once in shards) with a tokenizer trained here. Both sides read the same folder; the
logits must agree to float32 tolerance and every layer's ``hook_resid_post`` must equal the reference's hidden
state.
"""

from __future__ import annotations

import pytest
import torch

from interp.load import load
from tests.load.builders import SEED, byte_level_bpe, save_folder, wordpiece
from tests.load.families import build

TEXTS = [SEED, "The cat sat on the mat."]
ATOL = 1e-4


# name -> (config of tests.load.families.CONFIGS and its fields here, tokenizer, causal)
FAMILIES = {
    "gpt2": (("gpt2", {}), byte_level_bpe, True),
    "bert-mlm": (("bert", {}), wordpiece, False),
    "bert-plain": (("bert-plain", {}), wordpiece, False),
    "llama-gqa": (("llama", {"rope_theta": 500.0}), byte_level_bpe, True),
    "qwen2": (("qwen2", {}), byte_level_bpe, True),
    "mistral": (("mistral", {}), byte_level_bpe, True),
}


def _randomize_biases_and_norms(model: torch.nn.Module) -> None:
    """transformers initialises biases to 0 and norms to 1; random values make a dropped one visible."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for param in model.parameters():
            if param.ndim == 1:
                param.copy_(param + 0.1 * torch.randn(param.shape, generator=generator))


def _build(name: str, tmp_path, **save_kwargs):
    (config, fields), make_tokenizer, _ = FAMILIES[name]
    backend = make_tokenizer()
    reference = build(config, backend.get_vocab_size(), None, widen=False, **fields)
    _randomize_biases_and_norms(reference)
    folder = save_folder(reference, backend, tmp_path / name, **save_kwargs)
    return reference, load(folder)


def _reference_outputs(reference, ids, mask):
    with torch.no_grad():
        out = reference(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    head = getattr(out, "logits", None)
    return (head if head is not None else out.last_hidden_state), out.hidden_states


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_logits_and_residual_stream_match(name, tmp_path):
    reference, model = _build(name, tmp_path)
    causal = FAMILIES[name][2]
    ids, mask = model.to_tokens(TEXTS, padding_side="right")
    expected, hidden = _reference_outputs(reference, ids, mask)
    names = [f"blocks.{layer}.hook_resid_post" for layer in range(model.cfg.n_layers)]
    with torch.no_grad():
        logits, cache = model.run_with_cache(ids, mask, names_filter=names)
    real = mask.bool()
    torch.testing.assert_close(logits[real], expected[real], atol=ATOL, rtol=0)
    # transformers' last hidden state has the final norm applied in pre-norm models; post-norm ends in one
    last = model.cfg.n_layers - (1 if causal else 0)
    for layer in range(last):
        torch.testing.assert_close(cache[names[layer]][real], hidden[layer + 1][real], atol=ATOL, rtol=0)
    assert model.cfg.causal is causal


def test_config_of_each_family(tmp_path):
    _, bert = _build("bert-mlm", tmp_path)
    assert (bert.cfg.lm_head, bert.cfg.norm_placement, bert.cfg.embed_norm, bert.cfg.causal) == (
        "mlm",
        "post",
        True,
        False,
    )
    _, plain = _build("bert-plain", tmp_path)
    assert plain.cfg.lm_head == "none"
    _, qwen = _build("qwen2", tmp_path)
    assert qwen.cfg.attn_bias and qwen.cfg.tie_embeddings and qwen.cfg.n_kv_heads == 2
    assert torch.equal(qwen.blocks[0].attn.b_O, torch.zeros(64))  # Qwen2 has no output bias
    _, mistral = _build("mistral", tmp_path)
    assert (mistral.cfg.n_ctx, mistral.cfg.sliding_window) == (128, 48)  # a window masks; it is no context
    assert (mistral.cfg.norm, mistral.cfg.positional, mistral.cfg.mlp, mistral.cfg.act) == (
        "rmsnorm",
        "rotary",
        "gated",
        "silu",
    )


def test_left_padding_matches_unpadded(tmp_path):
    reference, model = _build("llama-gqa", tmp_path)
    ids, mask = model.to_tokens(TEXTS, padding_side="left")
    alone, _ = model.to_tokens(TEXTS[1])
    with torch.no_grad():
        batch = model(ids, mask)
        single = model(alone)
        expected = reference(input_ids=alone).logits
    shift = int((1 - mask[1]).sum())
    torch.testing.assert_close(batch[1, shift:], single[0], atol=ATOL, rtol=0)
    torch.testing.assert_close(single, expected, atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", ["llama-gqa", "bert-mlm"])
def test_sharded_checkpoint(name, tmp_path):
    reference, sharded = _build(name, tmp_path, max_shard_size="40KB")
    assert len(list((tmp_path / name).glob("model-*.safetensors"))) > 1
    ids, mask = sharded.to_tokens(TEXTS)
    expected, _ = _reference_outputs(reference, ids, mask)
    with torch.no_grad():
        logits = sharded(ids, mask)
    torch.testing.assert_close(logits[mask.bool()], expected[mask.bool()], atol=ATOL, rtol=0)


def test_dtype_and_device_are_applied_after_loading(tmp_path, device):
    reference, _ = _build("llama-gqa", tmp_path)
    model = load(tmp_path / "llama-gqa", device=device, dtype="bfloat16")
    assert model.dtype == torch.bfloat16 and model.device.type == torch.device(device).type
    assert model.tokenizer is not None and not model.training
    ids, mask = model.to_tokens(TEXTS)
    with torch.no_grad():
        logits = model(ids, mask).float().cpu()
        expected = reference(input_ids=ids.cpu(), attention_mask=mask.cpu()).logits
    real = mask.bool().cpu()
    assert (logits - expected)[real].abs().max() < 0.1  # bfloat16 rounding, not a different model
    same = load(tmp_path / "llama-gqa", dtype=torch.float32)
    assert same.dtype == torch.float32
