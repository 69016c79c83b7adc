"""Identities that must hold exactly (to float tolerance) in every variant."""

import pytest
import torch

from interp import HookedTransformer
from interp.model.positional import sinusoidal_table
from tests.model.variants import VARIANTS, tiny_config, variant_id


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_stream_identities(variant):
    cfg = tiny_config(**variant)
    model = HookedTransformer(cfg)
    _, cache = model.run_with_cache(torch.randint(0, cfg.d_vocab, (2, 7)))
    for L in range(cfg.n_layers):
        pattern = cache["pattern", L]
        torch.testing.assert_close(pattern.sum(-1), torch.ones(pattern.shape[:-1]))
        assert (pattern.triu(1) == 0).all(), "causal pattern has weight above the diagonal"
        attn_bias = model.blocks[L].attn.b_O
        torch.testing.assert_close(
            cache["result", L].sum(2) + attn_bias, cache["attn_out", L], atol=1e-6, rtol=0
        )
        pre, mid, post = cache["resid_pre", L], cache["resid_mid", L], cache["resid_post", L]
        attn_out, mlp_out = cache["attn_out", L], cache["mlp_out", L]
        if cfg.norm_placement == "pre":
            torch.testing.assert_close(mid, pre + attn_out)
            torch.testing.assert_close(post, mid + mlp_out)
        else:
            ln1, ln2 = model.blocks[L].ln1, model.blocks[L].ln2
            torch.testing.assert_close(
                mid, torch.nn.functional.layer_norm(pre + attn_out, (cfg.d_model,), ln1.w, ln1.b, cfg.eps)
            )
            torch.testing.assert_close(
                post, torch.nn.functional.layer_norm(mid + mlp_out, (cfg.d_model,), ln2.w, ln2.b, cfg.eps)
            )
        if L + 1 < cfg.n_layers:
            torch.testing.assert_close(cache["resid_pre", L + 1], post)
        torch.testing.assert_close(
            cache["scale", L, "ln1"] > 0, torch.ones_like(cache["scale", L, "ln1"], dtype=torch.bool)
        )


def test_masked_scores_are_minus_infinity():
    model = HookedTransformer(tiny_config())
    _, cache = model.run_with_cache(
        torch.randint(0, 61, (1, 4)), names_filter="blocks.0.attn.hook_attn_scores"
    )
    scores = cache["attn_scores", 0][0, 0]
    assert torch.isneginf(scores.triu(1)[scores.triu(1) != 0]).all()
    assert torch.isneginf(scores[0, 1:]).all() and torch.isfinite(scores.tril()).all()


def test_sinusoidal_encoding_is_vaswani_formula():
    table = sinusoidal_table(50, 16)
    for pos in (0, 1, 7, 49):
        for i in range(8):
            angle = pos / 10000 ** (2 * i / 16)
            assert table[pos, 2 * i].item() == pytest.approx(__import__("math").sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(__import__("math").cos(angle), abs=1e-6)
    model = HookedTransformer(tiny_config(positional="sinusoidal"))
    _, cache = model.run_with_cache(torch.tensor([[1, 2, 3]]), names_filter="hook_pos_embed")
    torch.testing.assert_close(cache["hook_pos_embed"][0], sinusoidal_table(16, 32)[:3])


@pytest.mark.parametrize("placement", ["pre", "post"])
def test_without_position_or_mask_permuting_tokens_permutes_every_activation(placement):
    cfg = tiny_config(positional="none", causal=False, norm_placement=placement)
    model = HookedTransformer(cfg)
    tokens = torch.tensor([[3, 14, 15, 9, 26, 5]])
    perm = torch.tensor([4, 0, 5, 2, 1, 3])
    logits, cache = model.run_with_cache(tokens)
    logits_p, cache_p = model.run_with_cache(tokens[:, perm])
    torch.testing.assert_close(logits_p, logits[:, perm], atol=1e-5, rtol=1e-5)
    for name, act in cache.items():
        if name.endswith(("hook_attn_scores", "hook_pattern")):  # [batch, head, query, key]: both axes move
            expected = act[:, :, perm][:, :, :, perm]
        else:  # [batch, pos, ...]
            expected = act[:, perm]
        torch.testing.assert_close(cache_p[name], expected, atol=1e-5, rtol=1e-5, msg=name)


def test_with_positions_permuting_tokens_does_not_permute_outputs():
    model = HookedTransformer(tiny_config(positional="learned", causal=False))
    with torch.no_grad():
        model.pos_embed.W_pos.normal_(0, 1.0)
    tokens = torch.tensor([[3, 14, 15, 9, 26, 5]])
    perm = torch.tensor([4, 0, 5, 2, 1, 3])
    assert not torch.allclose(model(tokens[:, perm]), model(tokens)[:, perm], atol=1e-3)


@pytest.mark.parametrize("positional", ["learned", "rotary"])
def test_left_and_right_padding_match_unpadded(positional):
    model = HookedTransformer(tiny_config(positional=positional))
    seq = torch.tensor([7, 8, 9, 10])
    alone = model(seq[None])[0]
    pad = torch.tensor([0, 0])
    right = torch.cat([seq, pad])[None]
    left = torch.cat([pad, seq])[None]
    mask_r = torch.tensor([[1, 1, 1, 1, 0, 0]])
    mask_l = torch.tensor([[0, 0, 1, 1, 1, 1]])
    torch.testing.assert_close(model(right, mask_r)[0, :4], alone, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(model(left, mask_l)[0, 2:], alone, atol=1e-5, rtol=1e-5)
    batch = torch.cat([right, left])
    mask = torch.cat([mask_r, mask_l])
    out, cache = model.run_with_cache(batch, mask, names_filter="blocks.0.attn.hook_pattern")
    torch.testing.assert_close(out[0, :4], out[1, 2:], atol=1e-5, rtol=1e-5)
    pattern = cache["pattern", 0]
    assert not pattern.isnan().any()
    assert (pattern[0, :, :4, 4:] == 0).all() and (pattern[1, :, 2:, :2] == 0).all()
