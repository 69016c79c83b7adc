"""hooks.attach on a user-written toy transformer: hook points by path, an attention spec, clean detach."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from hooks import UnknownHookError, attach
from hooks.attach import HookNotFiredError
from hooks.attention_spec import AttentionSpec, AttentionSpecError

D, H, E, N_LAYERS, VOCAB = 16, 4, 4, 2, 23


class ToyAttention(nn.Module):
    """Causal attention with a fused qkv projection, written the way a user would."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.out = nn.Linear(D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, p, _ = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)
        q, k, v = (t.view(b, p, H, E).transpose(1, 2) for t in (q, k, v))  # [batch, head, pos, d_head]
        z = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(z.transpose(1, 2).reshape(b, p, D))


class ToyBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(D)
        self.attn = ToyAttention()
        self.mlp = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm(x))
        return x + self.mlp(x)


class Toy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D)
        self.layers = nn.ModuleList(ToyBlock() for _ in range(N_LAYERS))
        self.unembed = nn.Linear(D, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.unembed(x)


SPEC = AttentionSpec(qkv="qkv", out="out", n_heads=H, causal=True)
HOOK_DICTS = (
    "_forward_hooks",
    "_forward_pre_hooks",
    "_backward_hooks",
    "_backward_pre_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_pre_hooks_with_kwargs",
    "_forward_hooks_always_called",
)


@pytest.fixture
def toy() -> Toy:
    torch.manual_seed(0)
    return Toy().eval()


@pytest.fixture
def tokens() -> torch.Tensor:
    return torch.randint(0, VOCAB, (2, 7), generator=torch.Generator().manual_seed(1))


def snapshot(model: nn.Module) -> dict:
    return {
        path: ({k: dict(getattr(m, k)) for k in HOOK_DICTS}, "forward" in m.__dict__)
        for path, m in model.named_modules()
    }


def naive_pattern(attn: ToyAttention, x: torch.Tensor) -> torch.Tensor:
    b, p, _ = x.shape
    q, k, _ = attn.qkv(x).split(D, dim=-1)
    q, k = (t.view(b, p, H, E) for t in (q, k))
    scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(E)
    scores = scores.masked_fill(~torch.ones(p, p, dtype=torch.bool).tril(), float("-inf"))
    return scores.softmax(-1)  # [batch, head, query, key]


def test_patterns_equal_a_naive_computation(toy, tokens):
    with attach(toy, {"layers.*.attn": SPEC}) as hooked:
        logits, cache = hooked.run_with_cache(
            tokens,
            names_filter=[
                "layers.0.attn.hook_in",
                "layers.0.attn.hook_pattern",
                "layers.1.attn.hook_pattern",
            ],
        )
    torch.testing.assert_close(logits, toy(tokens))
    x = cache["layers.0.attn.hook_in"]
    torch.testing.assert_close(cache["layers.0.attn.hook_pattern"], naive_pattern(toy.layers[0].attn, x))
    assert cache["layers.1.attn.hook_pattern"].shape == (2, H, 7, 7)
    torch.testing.assert_close(cache["layers.1.attn.hook_pattern"].sum(-1), torch.ones(2, H, 7))


def test_hook_shapes_follow_the_contract(toy, tokens):
    with attach(toy, {"layers.*.attn": SPEC}) as hooked:
        _, cache = hooked.run_with_cache(tokens, names_filter="layers.1.attn.hook_*")
    b, p = tokens.shape
    shapes = {name.rsplit(".", 1)[1]: tuple(t.shape) for name, t in cache.items()}
    assert shapes == {
        "hook_in": (b, p, D),
        "hook_q": (b, p, H, E),
        "hook_k": (b, p, H, E),
        "hook_v": (b, p, H, E),
        "hook_attn_scores": (b, H, p, p),
        "hook_pattern": (b, H, p, p),
        "hook_z": (b, p, H, E),
        "hook_result": (b, p, H, D),
        "hook_out": (b, p, D),
    }
    results = cache["layers.1.attn.hook_result"].sum(2) + toy.layers[1].attn.out.bias
    torch.testing.assert_close(results, cache["layers.1.attn.hook_out"])


def test_zeroing_a_head_in_z_removes_its_term(toy, tokens):
    head = 2
    attn = toy.layers[0].attn

    def zero_head(z, hook):
        z = z.clone()
        z[:, :, head] = 0
        return z

    with attach(toy, {"layers.*.attn": SPEC}) as hooked:
        _, cache = hooked.run_with_cache(
            tokens, names_filter=["layers.0.attn.hook_z", "layers.0.attn.hook_out"]
        )
        ablated = hooked.run_with_cache(
            tokens, names_filter="layers.0.attn.hook_out", fwd_hooks=[("layers.0.attn.hook_z", zero_head)]
        )[1]["layers.0.attn.hook_out"]
    z = cache["layers.0.attn.hook_z"]  # [batch, pos, head, d_head]
    w_o = attn.out.weight.T.reshape(H, E, D)  # [head, d_head, d_model]
    expected = cache["layers.0.attn.hook_out"] - z[:, :, head] @ w_o[head]
    torch.testing.assert_close(ablated, expected)


def test_edits_to_the_pattern_change_the_output(toy, tokens):
    def uniform(pattern, hook):
        return torch.ones_like(pattern).tril() / torch.ones_like(pattern).tril().sum(-1, keepdim=True)

    with attach(toy, {"layers.*.attn": SPEC}) as hooked:
        edited = hooked.run_with_hooks(tokens, fwd_hooks=[("layers.0.attn.hook_pattern", uniform)])
        plain = hooked(tokens)
    assert (edited - plain).abs().max() > 1e-3
    torch.testing.assert_close(plain, toy(tokens))


def test_every_submodule_has_in_and_out_points(toy, tokens):
    with attach(toy) as hooked:
        names = hooked.hook_names()
        assert names[0] == "hook_in" and names[-1] == "hook_out"
        assert {"layers.0.mlp.1.hook_in", "layers.1.attn.qkv.hook_out", "unembed.hook_out"} <= set(names)
        assert "layers.hook_in" not in names  # a ModuleList is never called
        assert "layers.0.attn.hook_pattern" not in names  # no spec given
        _, cache = hooked.run_with_cache(tokens, names_filter=["layers.1.norm.hook_out", "hook_out"])
    torch.testing.assert_close(cache["hook_out"], toy(tokens))
    x = toy.embed(tokens)
    x = toy.layers[0](x)
    torch.testing.assert_close(cache["layers.1.norm.hook_out"], toy.layers[1].norm(x))


def test_hook_in_replaces_the_first_tensor_argument(toy, tokens):
    with attach(toy) as hooked:
        out = hooked.run_with_hooks(
            tokens, fwd_hooks=[("unembed.hook_in", lambda x, hook: torch.zeros_like(x))]
        )
    torch.testing.assert_close(out, toy.unembed.bias.expand_as(out))


def test_names_are_checked(toy, tokens):
    with attach(toy, {"layers.*.attn": SPEC}) as hooked:
        with pytest.raises(UnknownHookError, match="did you mean 'layers.0.attn.hook_pattern'"):
            hooked.run_with_cache(tokens, names_filter="layers.0.attn.hook_patern")
        with pytest.raises(ValueError, match="matches no hook"):
            hooked.run_with_cache(tokens, names_filter="blocks.*.hook_pattern")
        with pytest.raises(ValueError, match="empty list"):
            hooked.run_with_cache(tokens, names_filter=[])
    with pytest.raises(ValueError, match="did you mean 'layers.0.attn'"):
        attach(toy, {"layers.0.atn": SPEC})


def test_a_named_hook_that_does_not_fire_raises(toy, tokens):
    toy.unused = nn.Linear(D, D)  # a submodule the forward never calls
    with attach(toy) as hooked:
        with pytest.raises(HookNotFiredError, match="'unused.hook_out' did not fire"):
            hooked.run_with_cache(tokens, names_filter=["unused.hook_out", "hook_out"])
        _, cache = hooked.run_with_cache(tokens, names_filter="*.hook_out")  # a glob takes what fired
    assert "unused.hook_out" not in cache and "unembed.hook_out" in cache


def test_detach_restores_the_model_exactly(toy, tokens):
    before, keys, expected = snapshot(toy), list(toy.state_dict()), toy(tokens)
    with attach(toy, {"layers.*.attn": SPEC}) as hooked:
        hooked.run_with_cache(tokens)
        with hooked.hooks([("layers.*.hook_out", lambda x, hook: None)]):
            assert snapshot(toy) != before
        hooked.run_with_hooks(tokens, bwd_hooks=[("layers.0.attn.hook_q", lambda g, hook: None)])
        assert "forward" in toy.layers[0].attn.__dict__
    assert snapshot(toy) == before
    assert list(toy.state_dict()) == keys
    torch.testing.assert_close(toy(tokens), expected)
    with pytest.raises(RuntimeError, match="detached"):
        hooked(tokens)


def test_detach_after_an_exception(toy, tokens):
    before, expected = snapshot(toy), toy(tokens)

    def boom(x, hook):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        with attach(toy, {"layers.*.attn": SPEC}) as hooked:
            hooked.run_with_hooks(tokens, fwd_hooks=[("layers.1.attn.hook_k", boom), ("hook_out", boom)])
    assert snapshot(toy) == before
    torch.testing.assert_close(toy(tokens), expected)


def test_long_lived_handle(toy, tokens):
    hooked = attach(toy, {"layers.*.attn": SPEC})
    try:
        _, cache = hooked.run_with_cache(tokens, names_filter="layers.0.attn.hook_pattern")
        assert cache["layers.0.attn.hook_pattern"].shape == (2, H, 7, 7)
    finally:
        hooked.detach()
    assert "forward" not in toy.layers[0].attn.__dict__
    hooked.detach()  # twice is fine


@pytest.mark.parametrize(
    "spec",
    [
        AttentionSpec(qkv="qkv", out="out", n_heads=2, causal=True),
        AttentionSpec(qkv="qkv", qkv_order="kqv", out="out", n_heads=H, causal=True),
        AttentionSpec(qkv="qkv", out="out", n_heads=H, causal=False),
    ],
    ids=["wrong-n-heads", "swapped-q-k", "not-causal"],
)
def test_a_wrong_spec_raises_the_mismatch_error(toy, tokens, spec):
    before = snapshot(toy)
    with attach(toy, {"layers.*.attn": spec}) as hooked:
        with pytest.raises(AttentionSpecError, match=r"does not describe ToyAttention.*differs .* by up to"):
            hooked(tokens)
    assert snapshot(toy) == before


def test_gradients_reach_backward_hooks(toy, tokens):
    grads = {}

    def keep(g, hook):
        grads[hook.name] = g

    with attach(toy, {"layers.*.attn": SPEC}) as hooked:
        with hooked.hooks(bwd_hooks=[("layers.0.attn.hook_v", keep), ("layers.1.hook_in", keep)]):
            hooked(tokens).sum().backward()
    assert grads["layers.0.attn.hook_v"].shape == (2, 7, H, E)
    assert grads["layers.1.hook_in"].abs().sum() > 0


class DictAttention(nn.Module):
    """Separate projections, grouped keys and values, a padding mask argument, a dict for an output."""

    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(D, D, bias=False)
        self.k = nn.Linear(D, 2 * E, bias=False)
        self.v = nn.Linear(D, 2 * E, bias=False)
        self.o = nn.Linear(D, D, bias=False)

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> dict[str, torch.Tensor]:
        b, p, _ = x.shape
        q = self.q(x).view(b, p, H, E).transpose(1, 2)
        k, v = (f(x).view(b, p, 2, E).transpose(1, 2).repeat_interleave(2, dim=1) for f in (self.k, self.v))
        allowed = keep[:, None, None, :].bool()  # [batch, 1, 1, key]
        z = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        return {"out": self.o(z.transpose(1, 2).reshape(b, p, D)), "n": p}


def test_separate_projections_gqa_mask_and_a_custom_output():
    torch.manual_seed(0)
    attn = DictAttention().eval()
    spec = AttentionSpec(
        q="q",
        k="k",
        v="v",
        out="o",
        n_heads=H,
        mask=lambda m, args, kwargs: args[1][:, None, None, :].bool(),
        output=lambda out, pattern: {"out": out, "n": out.shape[1]},
    )
    x = torch.randn(2, 5, D)
    keep = torch.tensor([[1, 1, 1, 1, 1], [0, 1, 1, 1, 1]])
    want = attn(x, keep)
    with attach(attn, {"": spec}) as hooked:
        out, cache = hooked.run_with_cache(x, keep, names_filter=["hook_k", "hook_pattern"])
    torch.testing.assert_close(out["out"], want["out"])
    assert out["n"] == 5
    assert cache["hook_k"].shape == (2, 5, 2, E)
    assert (cache["hook_pattern"][1, :, :, 0] == 0).all()
    torch.testing.assert_close(cache["hook_pattern"].sum(-1), torch.ones(2, H, 5))


def test_the_first_call_check_runs_no_hook_functions(toy, tokens):
    calls = []
    with attach(toy, {"layers.*.attn": SPEC}) as hooked:
        hooked.run_with_hooks(
            tokens, fwd_hooks=[("layers.0.attn.qkv.hook_out", lambda x, hook: calls.append(1))]
        )
    assert calls == [1]
