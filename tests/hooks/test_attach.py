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


class CappedWindowAttention(nn.Module):
    """Attention written out by hand: qkv fused per head, q/k norms, a soft-cap and a sliding window."""

    def __init__(self, qk_norm: str, softcap: float | None, window: int | None) -> None:
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.out = nn.Linear(D, D)
        width = E if qk_norm == "head" else D
        self.q_norm, self.k_norm = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qk_norm, self.softcap, self.window = qk_norm, softcap, window
        self.pattern: torch.Tensor | None = None

    def _normed(self, norm: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return norm(x) if self.qk_norm == "head" else norm(x.flatten(-2)).unflatten(-1, (H, E))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, p, _ = x.shape
        q, k, v = self.qkv(x).view(b, p, H, 3, E).unbind(-2)  # [batch, pos, head, d_head] each
        q, k = self._normed(self.q_norm, q), self._normed(self.k_norm, k)
        scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(E)
        if self.softcap is not None:
            scores = self.softcap * torch.tanh(scores / self.softcap)
        i, j = torch.arange(p)[:, None], torch.arange(p)[None, :]
        allowed = (j <= i) & ((i - j < self.window) if self.window is not None else True)
        self.pattern = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
        z = torch.einsum("bhqk,bkhe->bqhe", self.pattern, v)
        return self.out(z.reshape(b, p, D))


@pytest.mark.parametrize("qk_norm", ["head", "full"])
@pytest.mark.parametrize("softcap, window", [(None, 3), (1.5, None), (1.5, 3)])
def test_softcap_window_qk_norms_and_per_head_qkv(qk_norm, softcap, window):
    torch.manual_seed(0)
    attn = CappedWindowAttention(qk_norm, softcap, window).eval()
    with torch.no_grad():
        attn.qkv.weight.mul_(4)  # large scores, so that the cap and the window both matter
    x = torch.randn(2, 9, D, generator=torch.Generator().manual_seed(2))
    spec = AttentionSpec(
        qkv="qkv", qkv_layout="heads", out="out", n_heads=H, q_norm="q_norm", k_norm="k_norm",
        qk_norm=qk_norm, softcap=softcap, window=window, causal=True,
    )  # fmt: skip
    with torch.no_grad():
        want = attn(x)
        naive = attn.pattern
        with attach(attn, {"": spec}) as hooked:
            out, cache = hooked.run_with_cache(
                x, names_filter=["hook_pattern", "q_norm.hook_out", "hook_rot_q"]
            )
            plain = hooked(x)  # nothing hooked: fused where no cap forces the explicit path
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(plain, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(cache["hook_pattern"], naive, atol=1e-6, rtol=1e-5)
    if window is not None:
        assert cache["hook_pattern"][:, :, 8, :5].abs().max() == 0  # outside the window
    assert cache["hook_rot_q"].shape == (2, 9, H, E)  # after the norms (no rotary here)
    dropped = {"softcap": None} if softcap is not None else {"window": None}
    wrong = AttentionSpec(**{**{f: getattr(spec, f) for f in spec.__dataclass_fields__}, **dropped})
    with (
        pytest.raises(AttentionSpecError, match="differs from the module's own"),
        attach(attn, {"": wrong}) as hooked,
    ):
        hooked(x)


def test_window_on_top_of_the_models_mask():
    from hooks.attention_spec import effective_mask

    spec = AttentionSpec(qkv="qkv", n_heads=H, window=2, causal=True)
    both = effective_mask(spec, None, 4, 4, torch.device("cpu"))
    want = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]], dtype=torch.bool)
    assert torch.equal(both, want)
    # A mask the model gives replaces the causal flag (as in scaled_dot_product_attention); the window still
    # applies on top: here a padding mask, key 0 padded.
    keep = torch.tensor([False, True, True, True]).view(1, 1, 1, 4)  # [batch, 1, 1, key]
    recent = torch.ones(4, 4, dtype=torch.bool).triu(diagonal=-1)  # at most one key back
    assert torch.equal(effective_mask(spec, keep, 4, 4, torch.device("cpu")), keep & recent)
    additive = torch.zeros(1, 1, 4, 4)
    combined = effective_mask(spec, additive, 4, 4, torch.device("cpu"))
    assert torch.equal(combined.isinf(), ~recent.expand(1, 1, 4, 4))  # -inf outside the window only
    cached = effective_mask(spec, None, 1, 5, torch.device("cpu"))  # one new query after four cached keys
    assert torch.equal(cached, torch.tensor([[0, 0, 0, 1, 1]], dtype=torch.bool))
    assert (
        effective_mask(AttentionSpec(qkv="qkv", n_heads=H, causal=True), None, 4, 4, torch.device("cpu"))
        is None
    )


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(q_norm="q_norm"), "give both q_norm and k_norm, or neither"),
        (dict(qk_norm="rows"), r"qk_norm='rows'; expected one of \('head', 'full'\)"),
        (dict(qkv_layout="interleaved"), r"qkv_layout='interleaved'"),
        (dict(softcap=0.0), "softcap must be positive or None, got 0.0"),
        (dict(window=0), "window must be a positive integer, got 0"),
    ],
)
def test_bad_spec_fields(fields, message):
    with pytest.raises(AttentionSpecError, match=message):
        AttentionSpec(qkv="qkv", n_heads=H, **fields)


def test_per_head_qkv_needs_as_many_kv_heads():
    torch.manual_seed(0)
    attn = CappedWindowAttention("head", None, None).eval()
    spec = AttentionSpec(qkv="qkv", qkv_layout="heads", out="out", n_heads=H, n_kv_heads=2, causal=True)
    with pytest.raises(AttentionSpecError, match="a per-head fused qkv needs n_kv_heads = n_heads"):
        with attach(attn, {"": spec}) as hooked:
            hooked(torch.randn(1, 3, D))
