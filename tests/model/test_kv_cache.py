"""The KV cache: running a prefix and then one token at a time gives what one forward over everything gives."""

import pytest
import torch

from interp import HookedTransformer
from interp.model.kv_cache import KVCache
from tests.model.variants import FAMILY_VARIANTS, tiny_config

CONFIGS = {
    "learned": dict(positional="learned"),
    "rotary-gqa": dict(positional="rotary", n_kv_heads=2, norm="rmsnorm", mlp="gated"),
    **FAMILY_VARIANTS,
}


def _incremental(model, tokens, mask, prefix: int, hooks=()):
    """Logits of ``tokens`` from a cached prefix and then one position per forward."""
    cache = KVCache(model.cfg.n_layers)
    with model.hooks(hooks):
        parts = [model(tokens[:, :prefix], mask[:, :prefix], kv_cache=cache)]
        for i in range(prefix, tokens.shape[1]):
            parts.append(model(tokens[:, i : i + 1], mask[:, i : i + 1], kv_cache=cache))
    assert len(cache) == tokens.shape[1]
    return torch.cat(parts, dim=1)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_cached_steps_equal_one_forward(name):
    cfg = tiny_config(**CONFIGS[name], n_ctx=24)
    model = HookedTransformer(cfg)
    tokens = torch.randint(0, cfg.d_vocab, (3, 10))
    mask = torch.ones_like(tokens)
    mask[1, :3] = 0  # left padding, as batched generation has it
    with torch.no_grad():
        full = model(tokens, mask)
        stepped = _incremental(model, tokens, mask, prefix=4)
        explicit = _incremental(
            model, tokens, mask, prefix=4, hooks=[("blocks.*.attn.hook_pattern", lambda x, hook: None)]
        )
    real = mask.bool()
    torch.testing.assert_close(stepped[real], full[real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(explicit[real], full[real], atol=1e-5, rtol=1e-5)


def test_hooks_see_only_the_new_positions():
    cfg = tiny_config(positional="rotary", n_kv_heads=2, n_ctx=24)
    model = HookedTransformer(cfg)
    cache = KVCache(cfg.n_layers)
    tokens = torch.randint(0, cfg.d_vocab, (2, 6))
    model(tokens[:, :4], kv_cache=cache)
    shapes = {}
    names = [
        "blocks.0.attn.hook_q",
        "blocks.0.attn.hook_k",
        "blocks.0.attn.hook_pattern",
        "blocks.0.hook_resid_pre",
    ]
    model.run_with_hooks(
        tokens[:, 4:],
        kv_cache=cache,
        fwd_hooks=[(names, lambda x, hook: shapes.__setitem__(hook.name.rsplit(".", 1)[-1], tuple(x.shape)))],
    )
    assert shapes == {
        "hook_q": (2, 2, 4, 8),
        "hook_k": (2, 2, 2, 8),
        "hook_pattern": (2, 4, 2, 6),  # [batch, head, new, cached + new]
        "hook_resid_pre": (2, 2, 32),
    }


def test_a_failed_pass_leaves_the_cache_as_it_was():
    cfg = tiny_config(positional="rotary", n_ctx=24)
    model = HookedTransformer(cfg)
    cache = KVCache(cfg.n_layers)
    tokens = torch.randint(0, cfg.d_vocab, (1, 6))
    model(tokens[:, :3], kv_cache=cache)

    def boom(x, hook):
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        model.run_with_hooks(tokens[:, 3:5], kv_cache=cache, fwd_hooks=[("blocks.1.hook_resid_pre", boom)])
    assert len(cache) == 3
    stepped = torch.cat([model(tokens[:, i : i + 1], kv_cache=cache) for i in range(3, 6)], dim=1)
    torch.testing.assert_close(stepped, model(tokens)[:, 3:], atol=1e-5, rtol=1e-5)


def test_cache_limits_are_checked():
    cfg = tiny_config(positional="rotary", n_ctx=8)
    model = HookedTransformer(cfg)
    cache = KVCache(cfg.n_layers)
    model(torch.randint(0, cfg.d_vocab, (1, 6)), kv_cache=cache)
    with pytest.raises(
        ValueError, match="6 cached \\+ 3 new tokens is longer than the model's context n_ctx=8"
    ):
        model(torch.randint(0, cfg.d_vocab, (1, 3)), kv_cache=cache)
    with pytest.raises(ValueError, match="the KV cache holds 1 sequences but this step has 2"):
        model(torch.randint(0, cfg.d_vocab, (2, 1)), kv_cache=cache)
    encoder = HookedTransformer(tiny_config(causal=False))
    with pytest.raises(ValueError, match="a KV cache serves causal models"):
        encoder(torch.tensor([[1, 2]]), kv_cache=KVCache(2))


def test_cache_grows_by_doubling_and_keeps_values():
    cache = KVCache(n_layers=1, capacity=2)
    written = []
    for step in range(5):
        k = torch.full((1, 1, 1, 2), float(step))
        keys, _ = cache.append(0, k, k)
        cache.commit(torch.ones(1, 1, dtype=torch.bool))
        written.append(step)
        assert keys[0, :, 0, 0].tolist() == written
    assert cache.keys[0].shape[1] == 8  # 2 -> 4 -> 8


def test_select_copies_rows_and_leaves_the_cache_alone():
    cfg = tiny_config(positional="rotary", n_kv_heads=2, n_ctx=24)
    model = HookedTransformer(cfg)
    tokens = torch.randint(0, cfg.d_vocab, (2, 6))
    mask = torch.ones_like(tokens)
    mask[1, :2] = 0
    cache = KVCache(cfg.n_layers)
    model(tokens[:, :5], mask[:, :5], kv_cache=cache)
    copy = cache.select(torch.tensor([1, 0, 1]))
    stepped = model(tokens[[1, 0, 1], 5:], mask[[1, 0, 1], 5:], kv_cache=copy)
    assert len(cache) == 5 and cache.batch_size == 2 and len(copy) == 6
    full = model(tokens, mask)[:, -1]
    torch.testing.assert_close(stepped[:, -1], full[[1, 0, 1]], atol=1e-5, rtol=1e-5)
    again = model(tokens[:, 5:], mask[:, 5:], kv_cache=cache)  # the original still serves its own batch
    torch.testing.assert_close(again[:, -1], full, atol=1e-5, rtol=1e-5)
