"""The mixture-of-experts MLP against a naive computation written here, token by token, expert by expert.

The naive version runs every token through a plain loop over its chosen experts in float64, from the weights
alone; the model runs the grouped path (no gradient, no expert hooked), the expert-by-expert path (a gradient
recorded) and the hooked path. All three must give its output to float32 rounding. Then the hooks: each
expert's rows are its tokens, an expert without tokens answers with zero rows, routing edits do what the
docs say, a bad edit is refused, and every way of attaching a hook reaches an expert's points.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from interp import HookedTransformer
from interp.compat.transformer_lens.fold import process_weights
from interp.model import experts as experts_module
from interp.model.moe import expert_tokens
from tests.model.variants import FAMILY_VARIANTS, tiny_config

ACTS = {"silu": F.silu, "gelu": F.gelu, "gelu_quick": lambda x: x * torch.sigmoid(1.702 * x)}
MOE = dict(
    norm="rmsnorm",
    positional="rotary",
    n_kv_heads=2,
    n_experts=6,
    experts_per_token=2,
    d_expert=12,
    mlp_bias=False,
)
SETTINGS = {
    "gated-renormalised": dict(MOE, mlp="gated", act="silu"),
    "gated-softmax-shared": dict(
        MOE, mlp="gated", act="silu", expert_weights="softmax", d_shared_expert=20, shared_expert_gate=True
    ),
    "biases-router-bias": dict(MOE, mlp="gated", act="silu", mlp_bias=True, router_bias=True),
    "ungated-shared-top3": dict(MOE, mlp="standard", act="gelu", experts_per_token=3, d_shared_expert=8),
    # GPT-OSS: biases, a router bias and the clamped unit, its clamp well inside the pre-activations' range
    "clamped-gpt-oss": dict(
        MOE, mlp="gated", act="gelu_quick", mlp_bias=True, router_bias=True, glu_clamp=2.0, attn_sinks=True
    ),
}


def _randomize(model: torch.nn.Module) -> None:
    """Biases and gains away from their init, so that a dropped one shows."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.ndim <= 2 and (name.rsplit(".", 1)[-1].startswith("b") or name.endswith(".w")):
                param.add_(0.3 * torch.randn(param.shape, generator=generator))
            elif "mlp" in name:
                param.mul_(10.0)  # expert weights large enough that a wrong expert moves the output


def _naive_moe(p: dict[str, torch.Tensor], cfg, x: torch.Tensor) -> torch.Tensor:
    """The layer's output from its parameters ``p`` (float64), each token through its top k experts by a
    plain loop."""
    act = ACTS[cfg.act]
    x = x.double()
    logits = x @ p["W_router"] + (p["b_router"] if cfg.router_bias else 0)  # [batch, pos, expert]
    probs = logits.softmax(-1)
    out = torch.zeros_like(x)
    for b in range(x.shape[0]):
        for t in range(x.shape[1]):
            top = probs[b, t].topk(cfg.experts_per_token).indices
            w = probs[b, t, top]
            if cfg.expert_weights == "softmax_topk":
                w = w / w.sum()
            for weight, e in zip(w, top.tolist(), strict=True):
                out[b, t] += weight * _naive_expert(p, "", x[b, t], e, cfg, act)
            if cfg.d_shared_expert is not None:
                shared = _naive_expert(p, "shared_expert.", x[b, t], None, cfg, act)
                if cfg.shared_expert_gate:
                    shared = torch.sigmoid(x[b, t] @ p["W_shared_gate"]) * shared
                out[b, t] += shared
    return out


def _naive_expert(p, prefix, x, e, cfg, act):
    def w(name):
        t = p[prefix + name]
        return t if e is None else t[e]

    def b(name):
        key = prefix + name
        return 0 if key not in p else (p[key] if e is None else p[key][e])

    up = x @ w("W_in") + b("b_in")
    if cfg.mlp != "gated":
        hidden = act(up)
    elif e is not None and cfg.glu_clamp is not None:  # GPT-OSS's routed experts
        c = cfg.glu_clamp
        hidden = act((x @ w("W_gate") + b("b_gate")).clamp(max=c)) * (up.clamp(-c, c) + 1)
    else:
        hidden = act(x @ w("W_gate") + b("b_gate")) * up
    return hidden @ w("W_out") + b("b_out")


def _layer(setting: str):
    cfg = tiny_config(**SETTINGS[setting], n_layers=1)
    model = HookedTransformer(cfg)
    _randomize(model)
    x = torch.randn(3, 7, cfg.d_model, generator=torch.Generator().manual_seed(2))
    return model, model.blocks[0].mlp, x


def _params(mlp, grad: bool = False) -> dict[str, torch.Tensor]:
    return {name: t.detach().double().requires_grad_(grad) for name, t in mlp.named_parameters()}


def _tokens(model, *shape: int) -> torch.Tensor:
    return torch.randint(0, model.cfg.d_vocab, shape, generator=torch.Generator().manual_seed(3))


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_every_path_computes_the_naive_layer(setting, monkeypatch):
    model, mlp, x = _layer(setting)
    expected = _naive_moe(_params(mlp), model.cfg, x).float()
    scale = expected.abs().max()
    grouped = []
    real = experts_module.F.grouped_mm
    monkeypatch.setattr(
        experts_module.F, "grouped_mm", lambda *a, **k: grouped.append(a[0].shape) or real(*a, **k)
    )
    with torch.no_grad():
        fast = mlp(x)
    matrices = 3 if model.cfg.mlp == "gated" else 2
    # only the chosen experts ran: tokens * k rows through each of the experts' matrices
    assert (
        grouped == [torch.Size([21 * model.cfg.experts_per_token, s]) for s in _widths(model.cfg)][:matrices]
    )
    x.requires_grad_(True)
    one_by_one = mlp(x)  # a gradient is recorded: expert after expert
    with model.hooks([("blocks.0.mlp.experts.0.hook_post", lambda t, hook: None)]):
        hooked = mlp(x)
    for out in (fast, one_by_one, hooked):
        torch.testing.assert_close(out, expected, atol=2e-6 * scale, rtol=0)
    assert len(grouped) == matrices  # the other two paths did not use it


def _widths(cfg):
    """The inner width of each grouped product, in the order the layer makes them."""
    d, m = cfg.d_model, cfg.d_expert
    return [d, d, m] if cfg.mlp == "gated" else [d, m]


def test_the_gradient_reaches_the_router_and_the_chosen_experts_only():
    model, mlp, x = _layer("gated-renormalised")
    mlp(x).square().sum().backward()
    params = _params(mlp, grad=True)
    _naive_moe(params, model.cfg, x).square().sum().backward()
    for name in ("W_router", "W_gate", "W_in", "W_out"):
        expected = params[name].grad.float()
        torch.testing.assert_close(
            getattr(mlp, name).grad, expected, atol=1e-5 * expected.abs().max(), rtol=0
        )
    chosen = (x @ mlp.W_router).softmax(-1).topk(2).indices.unique()
    idle = torch.ones(mlp.n_experts, dtype=torch.bool)
    idle[chosen] = False
    assert (mlp.W_out.grad[idle] == 0).all() and (mlp.W_out.grad[~idle] != 0).any()


def test_expert_hooks_see_their_own_tokens_and_an_idle_expert_answers_with_no_rows():
    model, mlp, x = _layer("gated-renormalised")
    tokens = _tokens(model, 2, 6)

    def never_expert_5(logits, hook):
        logits[..., 5] = float("-inf")
        return logits

    with torch.no_grad():
        _, cache = model.run_with_cache(
            tokens, fwd_hooks=[("blocks.0.mlp.hook_router_logits", never_expert_5)]
        )
    indices = cache["blocks.0.mlp.hook_expert_indices"]  # [batch, pos, k]
    assert not (indices == 5).any()
    assert cache["blocks.0.mlp.experts.5.hook_post"].shape == (0, model.cfg.d_expert)
    assert cache["blocks.0.mlp.experts.5.hook_out"].shape == (0, model.cfg.d_model)
    normed = cache["blocks.0.ln2.hook_normalized"] * model.blocks[0].ln2.w.detach()  # what the MLP reads
    rows = 0
    for e in range(5):
        batch, pos = expert_tokens(indices, e)
        rows += len(batch)
        x_e = normed[batch, pos]  # [n_routed, d_model]
        gate = cache[f"blocks.0.mlp.experts.{e}.hook_gate"]
        torch.testing.assert_close(gate, x_e @ mlp.W_gate[e], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(
            cache[f"blocks.0.mlp.experts.{e}.hook_out"],
            cache[f"blocks.0.mlp.experts.{e}.hook_post"] @ mlp.W_out[e],
            atol=1e-5,
            rtol=1e-5,
        )
    assert rows == tokens.numel() * model.cfg.experts_per_token  # every (token, choice) once, no more


def test_the_block_output_is_the_weighted_sum_of_the_experts_outputs():
    model, _, _ = _layer("gated-softmax-shared")
    tokens = _tokens(model, 2, 6)
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    indices, weights = cache["blocks.0.mlp.hook_expert_indices"], cache["blocks.0.mlp.hook_expert_weights"]
    total = cache["blocks.0.mlp.hook_shared_expert_weight"] * cache["blocks.0.mlp.shared_expert.hook_out"]
    for e in range(model.cfg.n_experts):
        batch, pos = expert_tokens(indices, e)
        weight = (weights * (indices == e))[batch, pos].sum(-1, keepdim=True)  # [n_routed, 1]
        total = total.index_put(
            (batch, pos), weight * cache[f"blocks.0.mlp.experts.{e}.hook_out"], accumulate=True
        )
    torch.testing.assert_close(total, cache["blocks.0.hook_mlp_out"], atol=1e-5, rtol=1e-5)
    assert cache["blocks.0.mlp.hook_shared_expert_weight"].min() > 0  # a sigmoid


def test_routing_edits_force_remove_and_reweight_experts():
    model, _, _ = _layer("gated-renormalised")
    tokens = _tokens(model, 2, 6)
    with torch.no_grad():
        plain, cache = model.run_with_cache(tokens, names_filter="blocks.0.mlp.hook_expert_*")
        forced = torch.full_like(cache["blocks.0.mlp.hook_expert_indices"], 0)
        forced[..., 1] = 3  # every token to experts 0 and 3

        def force(indices, hook):
            return forced

        _, edited = model.run_with_cache(
            tokens, fwd_hooks=[("blocks.0.mlp.hook_expert_indices", force)], names_filter="blocks.0.mlp.*"
        )
    assert edited["blocks.0.mlp.experts.0.hook_out"].shape[0] == tokens.numel()
    assert edited["blocks.0.mlp.experts.1.hook_out"].shape[0] == 0
    probs = edited["blocks.0.mlp.hook_router_logits"].softmax(-1)
    expected = probs[..., [0, 3]] / probs[..., [0, 3]].sum(-1, keepdim=True)  # read at the experts given
    torch.testing.assert_close(edited["blocks.0.mlp.hook_expert_weights"], expected)
    with torch.no_grad():
        zeroed = model.run_with_hooks(
            tokens, fwd_hooks=[("blocks.0.mlp.hook_expert_weights", lambda w, hook: torch.zeros_like(w))]
        )
        without = model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.hook_mlp_out", lambda o, hook: 0 * o)])
    torch.testing.assert_close(zeroed, without)  # no weight, no expert output
    assert not torch.allclose(zeroed, plain)


def test_an_edit_naming_an_expert_the_layer_lacks_is_refused():
    model, _, _ = _layer("gated-renormalised")
    tokens = _tokens(model, 1, 4)
    with pytest.raises(
        ValueError, match=r"blocks.0.mlp.hook_expert_indices was edited to hold expert 6, .* 0 to 5"
    ):
        model.run_with_hooks(
            tokens, fwd_hooks=[("blocks.0.mlp.hook_expert_indices", lambda i, hook: torch.full_like(i, 6))]
        )


def test_every_way_of_attaching_a_hook_reaches_an_expert():
    """The layer looks at its experts' points once per forward; each API must make it see them."""
    model, _, _ = _layer("gated-renormalised")
    tokens = _tokens(model, 2, 8)
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter="blocks.0.mlp.hook_expert_indices")
    counts = torch.bincount(
        cache["blocks.0.mlp.hook_expert_indices"].flatten(), minlength=model.cfg.n_experts
    )
    expert = int(counts.argmax())  # an expert with tokens, so that "reached" shows in the rows it sees
    name = f"blocks.0.mlp.experts.{expert}.hook_pre"
    point = model.hook_dict[name]
    seen = []

    def fn(x, hook):
        seen.append(x.shape[0])

    model.run_with_hooks(tokens, fwd_hooks=[(name, fn)])
    model.add_hook(name, fn)
    model(tokens)
    model.reset_hooks()
    handle = point.register_forward_hook(lambda module, args, out: seen.append(out.shape[0]))
    model(tokens)
    handle.remove()
    model(tokens)
    # each way saw the expert's own rows, one per (token, choice) sent to it; the removed hook saw nothing
    assert counts[expert] > 0 and seen == [int(counts[expert])] * 3


def test_folding_the_norm_into_router_experts_and_shared_expert_keeps_the_logits():
    cfg = tiny_config(**{**SETTINGS["gated-softmax-shared"], "norm": "layernorm"})
    model = HookedTransformer(cfg)
    _randomize(model)
    tokens = _tokens(model, 2, 6)
    with torch.no_grad():
        before = model(tokens).log_softmax(-1)
        process_weights(model, center_writing_weights=True)
        after = model(tokens).log_softmax(-1)
    torch.testing.assert_close(after, before, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("family", ["mixtral", "qwen2_moe", "olmoe"])
def test_family_variants_route_through_every_expert_of_a_long_enough_batch(family):
    """Each token goes to the k experts whose router logits, computed here in float64 from what the MLP reads,
    are largest; and over 128 tokens every expert of every layer is chosen at least once."""
    cfg = tiny_config(**FAMILY_VARIANTS[family], n_ctx=32)
    model = HookedTransformer(cfg)
    tokens = _tokens(model, 4, 32)
    k = cfg.experts_per_token
    with torch.no_grad():
        _, cache = model.run_with_cache(
            tokens,
            names_filter=lambda name: name.endswith(("ln2.hook_normalized", "mlp.hook_expert_indices")),
        )
    routed = [(layer, block) for layer, block in enumerate(model.blocks) if hasattr(block.mlp, "W_router")]
    assert routed  # (a family may keep some layers dense)
    for layer, block in routed:
        mlp = block.mlp
        x = (
            cache[f"blocks.{layer}.ln2.hook_normalized"] * block.ln2.w.detach()
        ).double()  # what the MLP reads
        logits = x @ mlp.W_router.detach().double()  # [batch, pos, expert]
        if mlp.b_router is not None:
            logits = logits + mlp.b_router.detach().double()
        top = logits.topk(k + 1, dim=-1)  # [batch, pos, k + 1]
        clear = top.values[..., k - 1] - top.values[..., k] > 1e-4  # no near-tie at the k-th choice
        chosen = cache[f"blocks.{layer}.mlp.hook_expert_indices"]  # [batch, pos, k]
        assert chosen.shape == (4, 32, k) and clear.float().mean() > 0.9
        assert torch.equal(chosen.sort(-1).values[clear], top.indices[..., :k].sort(-1).values[clear])
        assert set(chosen.flatten().tolist()) == set(range(cfg.n_experts)), (layer, chosen.unique())


def test_transformer_lens_3_router_scores_name_the_router_logits():
    model = HookedTransformer(tiny_config(**FAMILY_VARIANTS["qwen2_moe"]))
    _, cache = model.run_with_cache(_tokens(model, 1, 4), names_filter="blocks.0.mlp.hook_router_scores")
    assert list(cache) == ["blocks.0.mlp.hook_router_logits"]
    with pytest.raises(LookupError, match="blocks.1.mlp.hook_router_scores"):  # layer 1 is dense
        model.run_with_cache(_tokens(model, 1, 4), names_filter="blocks.1.mlp.hook_router_scores")


@pytest.mark.parametrize(
    "family, name, close",
    [
        ("mixtral", "blocks.0.mlp.experts.4.hook_out", "blocks.0.mlp.experts.3.hook_out"),  # 4 experts
        ("qwen2_moe", "blocks.1.mlp.hook_router_logits", "blocks.0.mlp.hook_router_logits"),  # a dense layer
    ],
)
def test_a_hook_on_an_expert_or_router_the_layer_lacks_is_refused_before_the_forward(family, name, close):
    """An idle expert answers with zero rows (above); one the layer does not have is a name that does not exist."""
    model = HookedTransformer(tiny_config(**FAMILY_VARIANTS[family]))
    ran = []
    hooks = [("hook_embed", lambda x, hook: ran.append(hook.name)), (name, lambda x, hook: None)]
    with pytest.raises(LookupError, match=rf"unknown hook '{name}'; did you mean .*'{close}'") as err:
        model.run_with_hooks(_tokens(model, 1, 4), fwd_hooks=hooks)
    assert "\n" not in str(err.value) and ran == []
