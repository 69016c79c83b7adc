"""The fused and explicit attention paths agree, and nobody pays for a pattern they did not ask for."""

import pytest
import torch
import torch.nn.functional as F

from interp import HookedTransformer
from tests.model.variants import FAMILY_VARIANTS, VARIANTS, tiny_config, variant_id


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_fused_and_explicit_logits_agree(variant):
    cfg = tiny_config(**variant)
    model = HookedTransformer(cfg)
    tokens = torch.randint(0, cfg.d_vocab, (3, 9))
    mask = torch.ones_like(tokens)
    mask[0, :2] = 0  # left padding in one row
    mask[1, -3:] = 0  # right padding in another
    for m in (None, mask):
        fused = model(tokens, m)
        explicit = model.run_with_hooks(
            tokens, m, fwd_hooks=[("blocks.*.attn.hook_pattern", lambda x, hook: None)]
        )
        valid = torch.ones_like(tokens, dtype=torch.bool) if m is None else m.bool()
        torch.testing.assert_close(fused[valid], explicit[valid], atol=1e-5, rtol=1e-5)


def test_unhooked_layers_run_the_fused_kernel(monkeypatch):
    cfg = tiny_config(n_layers=3)
    model = HookedTransformer(cfg)
    calls = []
    real = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or real(*a, **k))
    tokens = torch.randint(0, cfg.d_vocab, (1, 6))
    model(tokens)
    assert len(calls) == 3
    calls.clear()
    model.run_with_cache(tokens, names_filter="blocks.1.attn.hook_pattern")
    assert len(calls) == 2, "only the layer whose pattern is cached may leave the fused path"
    calls.clear()
    model.run_with_cache(tokens, names_filter=["blocks.0.hook_resid_post", "blocks.2.attn.hook_q"])
    assert len(calls) == 3, "caching the stream or queries must not materialise patterns"
    calls.clear()
    model.run_with_cache(tokens, names_filter="blocks.2.attn.hook_result")
    assert len(calls) == 2


def test_result_is_formed_only_when_asked(monkeypatch):
    model = HookedTransformer(tiny_config())
    einsums = []
    real = torch.einsum
    monkeypatch.setattr(torch, "einsum", lambda eq, *ops: einsums.append(eq) or real(eq, *ops))
    model.run_with_cache(torch.tensor([[1, 2, 3]]), names_filter="blocks.0.attn.hook_pattern")
    assert "bphe,hed->bphd" not in einsums
    model.run_with_cache(torch.tensor([[1, 2, 3]]), names_filter="blocks.0.attn.hook_result")
    assert "bphe,hed->bphd" in einsums


@pytest.mark.parametrize("family", sorted(FAMILY_VARIANTS))
def test_family_fused_and_explicit_agree(family):
    cfg = tiny_config(**FAMILY_VARIANTS[family], n_ctx=24)
    model = HookedTransformer(cfg)
    tokens = torch.randint(0, cfg.d_vocab, (3, 11))
    mask = torch.ones_like(tokens)
    mask[0, :3] = 0  # left padding
    mask[1, -4:] = 0  # right padding
    for m in (None, mask):
        fused = model(tokens, m)
        explicit = model.run_with_hooks(
            tokens, m, fwd_hooks=[("blocks.*.attn.hook_pattern", lambda x, hook: None)]
        )
        valid = torch.ones_like(tokens, dtype=torch.bool) if m is None else m.bool()
        torch.testing.assert_close(fused[valid], explicit[valid], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", sorted(FAMILY_VARIANTS))
def test_families_pay_only_for_what_is_asked(family, monkeypatch):
    """Unhooked layers run the fused kernel, windows included; soft-capped scores and sinks cannot."""
    cfg = tiny_config(**FAMILY_VARIANTS[family])
    model = HookedTransformer(cfg)
    calls = []
    real = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or real(*a, **k))
    model(torch.randint(0, cfg.d_vocab, (2, 7)))
    explicit_only = cfg.attn_softcap is not None or cfg.attn_sinks
    assert len(calls) == (0 if explicit_only else cfg.n_layers)


def test_pattern_is_zero_outside_the_window():
    cfg = tiny_config(**FAMILY_VARIANTS["mistral"], n_ctx=24)
    model = HookedTransformer(cfg)
    tokens = torch.randint(0, cfg.d_vocab, (2, 9))
    mask = torch.ones_like(tokens)
    mask[1, :2] = 0
    _, cache = model.run_with_cache(tokens, mask, names_filter="blocks.*.attn.hook_pattern")
    q = torch.arange(9)[:, None]
    k = torch.arange(9)[None, :]
    inside = (k <= q) & (k > q - cfg.sliding_window)
    for layer in range(cfg.n_layers):
        pattern = cache["pattern", layer]  # [batch, head, query, key]
        assert (pattern[0][:, ~inside] == 0).all()
        torch.testing.assert_close(pattern[0].sum(-1), torch.ones(cfg.n_heads, 9))
        # the padded row: real queries see only real keys inside the window
        assert (pattern[1, :, 2:, :2] == 0).all() and (pattern[1, :, 2:][:, ~inside[2:]] == 0).all()
