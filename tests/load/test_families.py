"""Every family against ``transformers``: logits, every layer's pattern and every ``hook_resid_pre`` (and, in
mixture-of-experts families, every router's logits, against ``output_router_logits``).

Each reference is a tiny random model of the family (``tests/load/families.py``) saved with its own
``save_pretrained`` and a tokenizer trained here. Both sides read the same folder (``interp.load``) or the same
in-memory model (``interp.from_hf``), and run a padded batch whose longest sentence is longer than every
sliding window. Patterns are compared with ``output_attentions`` under eager attention, the stream with
``output_hidden_states``; padding positions are excluded (their outputs are never used by either side).
"""

from __future__ import annotations

import pytest
import torch

from interp import from_hf
from interp.load import load
from tests.load.builders import byte_level_bpe, save_folder
from tests.load.families import FAMILIES, MOE, WINDOW, build

TEXTS = [
    "The animal didn't cross the street because it was too tired.",
    "The cat sat on the mat.",
    "Numbers like 12345 appear in text",
]
ATOL = 1e-5


@pytest.fixture(scope="module")
def tokenizer():
    return byte_level_bpe()


def _reference(reference, ids, mask, routers: bool = False):
    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)  # real-token positions, as interp counts them
    extra = {"output_router_logits": True} if routers else {}
    with torch.no_grad():
        out = reference(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            output_hidden_states=True,
            output_attentions=True,
            **extra,
        )
    return out.logits, out.hidden_states, out.attentions, getattr(out, "router_logits", None)


def _compare(model, reference, padding_side: str):
    ids, mask = model.to_tokens(TEXTS, padding_side=padding_side)
    assert ids.shape[1] > WINDOW + 3  # the window matters for the longest sentence
    moe = [layer for layer, kind in enumerate(model.cfg.mlp_types) if kind == "moe"]
    logits, hidden, attentions, routers = _reference(reference, ids, mask, routers=bool(moe))
    n = model.cfg.n_layers
    names = [f"blocks.{l}.hook_resid_pre" for l in range(n)] + [
        f"blocks.{l}.attn.hook_pattern" for l in range(n)
    ]
    names += [f"blocks.{l}.mlp.hook_router_logits" for l in moe]
    with torch.no_grad():
        ours, cache = model.run_with_cache(ids, mask, names_filter=names)
    real = mask.bool()
    torch.testing.assert_close(ours[real], logits[real], atol=ATOL, rtol=ATOL)
    for layer in range(n):
        torch.testing.assert_close(cache["resid_pre", layer][real], hidden[layer][real], atol=ATOL, rtol=ATOL)
        pattern, expected = cache["pattern", layer], attentions[layer]
        torch.testing.assert_close(
            pattern.transpose(1, 2)[real], expected.transpose(1, 2)[real], atol=ATOL, rtol=ATOL
        )  # [real query, head, key]
    assert len(moe) == len(routers or ())  # transformers returns the logits of its sparse layers only
    for layer, expected in zip(moe, routers or (), strict=True):
        ours_router = cache[f"blocks.{layer}.mlp.hook_router_logits"]  # [batch, pos, expert]
        theirs_router = expected.view(*ids.shape, -1)  # transformers' [batch * pos, expert]
        torch.testing.assert_close(ours_router[real], theirs_router[real], atol=ATOL, rtol=ATOL)
    with torch.no_grad():
        plain = model(ids, mask)  # nothing hooked: the fused path where the family allows it
    torch.testing.assert_close(plain[real], logits[real], atol=ATOL, rtol=ATOL)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_folder_matches_transformers(name, tokenizer, tmp_path):
    reference = build(name, tokenizer.get_vocab_size())
    model = load(save_folder(reference, tokenizer, tmp_path / name))
    _compare(model, reference, "right")
    _compare(model, reference, "left")


@pytest.mark.parametrize("name", ["gemma2", "gemma3", "pythia", "phi3", "olmo2", "qwen3", *MOE])
def test_from_hf_matches_transformers(name, tokenizer, tmp_path):
    reference = build(name, tokenizer.get_vocab_size())
    model = from_hf(reference)
    folder_model = load(save_folder(reference, tokenizer, tmp_path / name))
    model.tokenizer = folder_model.tokenizer
    _compare(model, reference, "right")
    for (key, ours), theirs in zip(
        model.state_dict().items(), folder_model.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(ours, theirs, atol=0, rtol=0, msg=key)


def test_what_each_family_sets(tokenizer, tmp_path):
    vocab = tokenizer.get_vocab_size()

    def cfg(name):
        return load(save_folder(build(name, vocab), tokenizer, tmp_path / name)).cfg

    gemma2 = cfg("gemma2")
    assert gemma2.layer_types == ("sliding", "full", "sliding")  # the first layer slides, as in transformers
    assert (gemma2.sliding_window, gemma2.attn_softcap, gemma2.logit_softcap) == (WINDOW, 4.0, 6.0)
    assert gemma2.attn_scale == pytest.approx(40**0.5) and gemma2.norm_placement == "sandwich"
    assert (gemma2.norm_offset, gemma2.embed_scale, gemma2.d_head) == (1.0, 8.0, 24)
    gemma3 = cfg("gemma3")
    assert gemma3.layer_types == ("sliding",) * 5 + ("full", "sliding")
    assert (gemma3.qk_norm, gemma3.local_rotary_base, gemma3.rotary_base) == ("head", 50.0, 100000.0)
    assert gemma3.rotary_scaling.kind == "linear" and gemma3.attn_softcap is None
    pythia = cfg("pythia")
    assert pythia.parallel_attn_mlp and pythia.rotary_dim == 4 and pythia.norm == "layernorm"
    assert "blocks.0.hook_resid_mid" not in load(tmp_path / "pythia").hook_dict
    assert cfg("qwen3-sliding").layer_types == ("full", "sliding", "sliding")
    assert cfg("qwen2-sliding").layer_types == ("full", "full", "sliding")
    mistral = cfg("mistral-sliding")
    assert mistral.n_ctx == 128 and mistral.sliding_window == WINDOW  # a window is a mask, not the context
    olmo2 = cfg("olmo2")
    assert (olmo2.norm_placement, olmo2.qk_norm, olmo2.norm_gain_in_float32) == ("output", "full", True)
    assert cfg("dynamic-rope").n_ctx == 40  # dynamic scaling runs past max_position_embeddings (x factor)


@pytest.mark.parametrize(
    "name, change",
    [
        ("gemma2", dict(attn_softcap=None)),
        ("gemma2", dict(logit_softcap=None)),
        ("gemma2", dict(norm_offset=0.0)),
        ("gemma2", dict(sliding_window=64)),
        ("gemma3", dict(local_rotary_base=None, layer_types=("sliding",) * 5 + ("full", "sliding"))),
        ("gemma3", dict(rotary_scaling=None)),
        ("gemma", dict(embed_scale=1.0)),
        ("pythia", dict(parallel_attn_mlp=False)),
        ("olmo2", dict(qk_norm="head")),
        ("llama3-rope", dict(rotary_scaling=None)),
        ("yarn-rope", dict(rotary_scaling=None)),
    ],
)
def test_each_feature_changes_the_logits(name, change, tokenizer, tmp_path):
    """The tolerance above would catch a wrong implementation: dropping any one feature moves the logits."""
    from interp import HookedTransformer

    model = load(save_folder(build(name, tokenizer.get_vocab_size()), tokenizer, tmp_path / name))
    if change.get("qk_norm") == "head":  # same weights per head cannot be expressed; zero them instead
        return _qk_norm_matters(model)
    changed = HookedTransformer(model.cfg.replace(**change), init_weights=False)
    changed.load_state_dict(model.state_dict())
    ids, mask = model.to_tokens(TEXTS)
    with torch.no_grad():
        gap = (model(ids, mask) - changed(ids, mask))[mask.bool()].abs().max()
    assert gap > 100 * ATOL


def _qk_norm_matters(model):
    ids, mask = model.to_tokens(TEXTS)
    with torch.no_grad():
        before = model(ids, mask)
        for block in model.blocks:
            block.attn.q_norm.w.mul_(2.0)
        after = model(ids, mask)
    assert (before - after)[mask.bool()].abs().max() > 100 * ATOL


def test_swapped_gate_and_up_would_fail(tokenizer, tmp_path):
    model = load(save_folder(build("phi3", tokenizer.get_vocab_size()), tokenizer, tmp_path / "phi3"))
    ids, mask = model.to_tokens(TEXTS)
    with torch.no_grad():
        before = model(ids, mask)
        for block in model.blocks:
            gate, up = block.mlp.W_gate.clone(), block.mlp.W_in.clone()
            block.mlp.W_gate.copy_(up)
            block.mlp.W_in.copy_(gate)
        after = model(ids, mask)
    assert (before - after)[mask.bool()].abs().max() > 100 * ATOL


def test_gemma3_image_text_checkpoint_loads_its_text_model(tokenizer, tmp_path):
    """Gemma 3 4B and up ship as an image-and-text model: its language model loads, the vision tower is left out."""
    from tests.load.families import embolden, transformers

    vocab = tokenizer.get_vocab_size()
    text = dict(
        hidden_size=48,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        intermediate_size=64,
        vocab_size=vocab,
        max_position_embeddings=64,
        sliding_window=WINDOW,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=1,
    )
    vision = dict(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=28,
        patch_size=14,
    )
    cfg = transformers.Gemma3Config(
        text_config=text,
        vision_config=vision,
        mm_tokens_per_image=4,
        image_token_index=vocab - 1,
        boi_token_index=vocab - 2,
        eoi_token_index=vocab - 3,
    )
    torch.manual_seed(0)
    reference = transformers.Gemma3ForConditionalGeneration(cfg).eval()
    embolden(reference)
    model = load(save_folder(reference, tokenizer, tmp_path / "gemma3-mm"))
    assert model.cfg.qk_norm == "head" and model.cfg.n_layers == 2
    ids, mask = model.to_tokens(TEXTS, padding_side="right")
    with torch.no_grad():
        expected = reference(input_ids=ids, attention_mask=mask).logits
        ours = model(ids, mask)
    torch.testing.assert_close(ours[mask.bool()], expected[mask.bool()], atol=ATOL, rtol=ATOL)
