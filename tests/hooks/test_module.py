"""Hook behaviour on a two-layer toy: editing, cleanup, name checking, gradients, cache contents."""

import pytest
import torch

from hooks import HookEditError, UnknownHookError
from interp import HookedTransformer
from tests.model.variants import tiny_config


@pytest.fixture
def model():
    return HookedTransformer(tiny_config(n_kv_heads=2))


TOKENS = torch.tensor([[4, 8, 15, 16, 23, 42]])


def all_fns(model):
    return [fn for point in model.hook_dict.values() for fn in (*point.fwd_fns, *point.bwd_fns)]


def test_zeroing_a_heads_z_equals_removing_its_output_term(model):
    layer, head = 1, 2

    def zero_head(z, hook):
        z = z.clone()
        z[:, :, head] = 0
        return z

    edited = model.run_with_hooks(TOKENS, fwd_hooks=[(f"blocks.{layer}.attn.hook_z", zero_head)])
    with torch.no_grad():
        model.blocks[layer].attn.W_O[head] = 0
    torch.testing.assert_close(edited, model(TOKENS))


def test_wrong_shape_replacement_names_the_hook(model):
    with pytest.raises(HookEditError, match=r"blocks\.0\.attn\.hook_pattern.*shape"):
        model.run_with_hooks(TOKENS, fwd_hooks=[("blocks.0.attn.hook_pattern", lambda x, hook: x[..., :-1])])
    with pytest.raises(HookEditError, match="dtype"):
        model.run_with_hooks(TOKENS, fwd_hooks=[("hook_embed", lambda x, hook: x.double())])
    assert not all_fns(model)


def test_hooks_are_gone_after_each_entry_point_and_after_errors(model):
    model.run_with_hooks(TOKENS, fwd_hooks=[("hook_embed", lambda x, hook: None)])
    assert not all_fns(model)
    model.run_with_cache(TOKENS)
    assert not all_fns(model)
    with model.hooks(fwd_hooks=[("blocks.0.hook_resid_pre", lambda x, hook: None)]):
        assert len(all_fns(model)) == 1
    assert not all_fns(model)

    def boom(x, hook):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        model.run_with_hooks(TOKENS, fwd_hooks=[("blocks.1.hook_resid_mid", boom)])
    with pytest.raises(RuntimeError, match="boom"):
        model.run_with_cache(TOKENS, fwd_hooks=[("blocks.1.hook_resid_mid", boom)])
    with pytest.raises(RuntimeError, match="boom"), model.hooks(fwd_hooks=[("hook_embed", boom)]):
        model(TOKENS)
    assert not all_fns(model)


def test_unknown_names_suggest_close_ones(model):
    with pytest.raises(UnknownHookError, match=r"did you mean 'blocks\.1\.attn\.hook_pattern'"):
        model.run_with_cache(TOKENS, names_filter="blocks.1.attn.hook_patern")
    with pytest.raises(ValueError, match="matches no hook"):
        model.run_with_cache(TOKENS, names_filter="blocks.*.attn.hook_nothing")
    with pytest.raises(ValueError, match="matches no hook"):
        model.run_with_cache(TOKENS, names_filter=lambda name: False)
    with pytest.raises(UnknownHookError, match="unknown hook"):
        model.run_with_hooks(TOKENS, fwd_hooks=[("blocks.9.hook_resid_pre", lambda x, hook: None)])
    assert not all_fns(model)


def test_cache_holds_exactly_what_was_named(model):
    _, cache = model.run_with_cache(
        TOKENS, names_filter=["blocks.0.attn.hook_pattern", "blocks.1.hook_resid_post"]
    )
    assert list(cache) == ["blocks.0.attn.hook_pattern", "blocks.1.hook_resid_post"]
    assert cache.nbytes == (1 * 4 * 6 * 6 + 1 * 6 * 32) * 4
    _, cache = model.run_with_cache(TOKENS, names_filter="blocks.*.attn.hook_q")
    assert list(cache) == ["blocks.0.attn.hook_q", "blocks.1.attn.hook_q"]
    for t in cache.values():
        assert t.untyped_storage().nbytes() == t.nbytes and not t.requires_grad
    torch.testing.assert_close(cache.stack("q"), torch.stack([cache["q", 0], cache["q", 1]]))
    assert cache["q", -1] is cache["blocks.1.attn.hook_q"]
    with pytest.raises(KeyError, match="not in this cache"):
        cache["pattern", 0]
    with pytest.raises(TypeError):
        cache["q"] = 1  # read-only


def test_cache_device_and_edit_then_cache(model):
    def double(x, hook):
        return 2 * x

    _, cache = model.run_with_cache(
        TOKENS, names_filter="hook_embed", device="cpu", fwd_hooks=[("hook_embed", double)]
    )
    torch.testing.assert_close(cache["hook_embed"], 2 * model.embed.W_E[TOKENS])
    assert cache.to("cpu")["hook_embed"].device.type == "cpu"


def test_backward_hooks_receive_gradients_of_the_named_activation(model):
    grads = {}
    out = model.run_with_hooks(
        TOKENS,
        bwd_hooks=[("blocks.1.hook_resid_mid", lambda g, hook: grads.__setitem__(hook.name, g.clone()))],
    )
    assert not all_fns(model)
    _, cache = model.run_with_cache(TOKENS, names_filter="blocks.1.hook_resid_mid")
    out.logsumexp(-1).sum().backward()
    mid = cache["resid_mid", 1].clone().requires_grad_(True)
    # the same gradient, computed by restarting the forward from resid_mid
    restarted = model.run_with_hooks(TOKENS, fwd_hooks=[("blocks.1.hook_resid_mid", lambda x, hook: mid)])
    (expected,) = torch.autograd.grad(restarted.logsumexp(-1).sum(), mid)
    torch.testing.assert_close(grads["blocks.1.hook_resid_mid"], expected)


def test_backward_hook_can_edit_gradient(model):
    emb = model.embed.W_E
    out = model.run_with_hooks(
        TOKENS, bwd_hooks=[("blocks.0.hook_resid_pre", lambda g, hook: torch.zeros_like(g))]
    )
    out.sum().backward()
    assert emb.grad is not None and emb.grad.abs().sum() == 0


def test_mounted_points_are_listed_in_order_and_removed_exactly(model):
    from hooks import HookPoint

    before = list(model.hook_dict.items())
    extra = {"blocks.0.hook_resid_post.hook_x": HookPoint(), "blocks.0.hook_resid_post.hook_y": HookPoint()}
    with pytest.raises(RuntimeError, match="inside"):
        with model.mounted(extra, after="blocks.0.hook_resid_post"):
            names = model.hook_names()
            i = names.index("blocks.0.hook_resid_post")
            assert names[i + 1 : i + 3] == list(extra)
            assert extra["blocks.0.hook_resid_post.hook_y"].layer == 0
            assert model.resolve("blocks.0.hook_resid_post.hook_*") == list(extra)
            raise RuntimeError("inside")
    assert list(model.hook_dict.items()) == before
    assert all(p.name is None for p in extra.values())
    with pytest.raises(ValueError, match="already has a hook"):
        with model.mounted({"hook_embed": HookPoint()}, after="hook_embed"):
            pass
    with pytest.raises(UnknownHookError, match="did you mean"):
        with model.mounted(extra, after="blocks.0.hook_resid_pst"):
            pass


def test_hooks_order_first_and_last_around_normal_ones(model):
    order = []

    def fn(tag):
        return lambda x, hook: order.append(tag)

    name = "blocks.0.hook_resid_pre"
    point = model.hook_dict[name]
    with model.hooks([(name, fn("last"))], order="last"):
        with model.hooks([(name, fn("first"))], order="first"):
            model.run_with_hooks(TOKENS, fwd_hooks=[(name, fn("user"))])
            assert order == ["first", "user", "last"]
            order.clear()
            with model.hooks([(name, fn("user2"))]):
                model.run_with_hooks(TOKENS, fwd_hooks=[(name, fn("user3"))])
    assert order == ["first", "user2", "user3", "last"]
    assert point.fwd_fns == [] and point.pinned == {}
    with pytest.raises(ValueError, match="order='middle'; expected one of"):
        with model.hooks([(name, fn("x"))], order="middle"):
            pass


def test_hooks_order_is_removed_when_the_block_raises(model):
    name = "blocks.0.hook_resid_pre"
    with pytest.raises(RuntimeError, match="inside"):
        with model.hooks([(name, lambda x, h: None)], order="last"):
            raise RuntimeError("inside")
    assert model.hook_dict[name].fwd_fns == [] and model.hook_dict[name].pinned == {}
