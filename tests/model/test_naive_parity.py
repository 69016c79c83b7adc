"""An independent, deliberately plain implementation reproduces every attention hook and the logits.

Nothing here imports model code: weights are read from the state dict and the forward pass is written with
explicit loops over heads and positions, from the definitions (scaled dot-product attention, rotate-half rotary,
LayerNorm/RMSNorm, gated MLP).
"""

import math

import pytest
import torch
import torch.nn.functional as F

from interp import HookedTransformer
from tests.model.variants import tiny_config

ACT = {"gelu": F.gelu, "silu": F.silu, "relu": F.relu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh")}


def naive_norm(x, sd, prefix, cfg):
    if cfg.norm == "layernorm":
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + cfg.eps) * sd[prefix + ".w"] + sd[prefix + ".b"]
    return x / torch.sqrt((x**2).mean(-1, keepdim=True) + cfg.eps) * sd[prefix + ".w"]


def naive_rotate(vec, pos, cfg):
    """Rotate pairs (i, i + r/2) of one head vector by pos * base^(-2i/r)."""
    out = vec.clone()
    half = cfg.rotary_dim // 2
    for i in range(half):
        theta = pos * cfg.rotary_base ** (-2 * i / cfg.rotary_dim)
        a, b = vec[i], vec[i + half]
        out[i] = a * math.cos(theta) - b * math.sin(theta)
        out[i + half] = b * math.cos(theta) + a * math.sin(theta)
    return out


def naive_forward(model, tokens):
    cfg, sd = model.cfg, model.state_dict()
    (P,) = tokens.shape
    h, g, e = cfg.n_heads, cfg.n_kv_heads, cfg.d_head
    acts = {}
    x = sd["embed.W_E"][tokens]
    if cfg.positional == "learned":
        x = x + sd["pos_embed.W_pos"][:P]
    for L in range(cfg.n_layers):
        pre = f"blocks.{L}."
        xin = naive_norm(x, sd, pre + "ln1", cfg)
        q = torch.zeros(P, h, e)
        k = torch.zeros(P, g, e)
        v = torch.zeros(P, g, e)
        for p in range(P):
            for hh in range(h):
                q[p, hh] = xin[p] @ sd[pre + "attn.W_Q"][hh] + sd[pre + "attn.b_Q"][hh]
            for gg in range(g):
                k[p, gg] = xin[p] @ sd[pre + "attn.W_K"][gg] + sd[pre + "attn.b_K"][gg]
                v[p, gg] = xin[p] @ sd[pre + "attn.W_V"][gg] + sd[pre + "attn.b_V"][gg]
        acts[pre + "attn.hook_q"], acts[pre + "attn.hook_k"], acts[pre + "attn.hook_v"] = q, k, v
        if cfg.positional == "rotary":
            q = torch.stack(
                [torch.stack([naive_rotate(q[p, i], p, cfg) for i in range(h)]) for p in range(P)]
            )
            k = torch.stack(
                [torch.stack([naive_rotate(k[p, i], p, cfg) for i in range(g)]) for p in range(P)]
            )
        scores = torch.full((h, P, P), float("-inf"))
        for hh in range(h):
            kv = hh // (h // g)
            for i in range(P):
                for j in range(i + 1):
                    scores[hh, i, j] = q[i, hh] @ k[j, kv] / math.sqrt(e)
        pattern = torch.exp(scores - scores.max(-1, keepdim=True).values)
        pattern = pattern / pattern.sum(-1, keepdim=True)
        z = torch.zeros(P, h, e)
        result = torch.zeros(P, h, cfg.d_model)
        for hh in range(h):
            kv = hh // (h // g)
            for i in range(P):
                z[i, hh] = sum(pattern[hh, i, j] * v[j, kv] for j in range(P))
                result[i, hh] = z[i, hh] @ sd[pre + "attn.W_O"][hh]
        attn_out = result.sum(1) + sd[pre + "attn.b_O"]
        acts.update({pre + "attn.hook_attn_scores": scores, pre + "attn.hook_pattern": pattern})
        acts.update(
            {pre + "attn.hook_z": z, pre + "attn.hook_result": result, pre + "hook_attn_out": attn_out}
        )
        x = x + attn_out
        xm = naive_norm(x, sd, pre + "ln2", cfg)
        act = ACT[cfg.act]
        if cfg.mlp == "gated":
            hidden = act(xm @ sd[pre + "mlp.W_gate"] + sd[pre + "mlp.b_gate"]) * (
                xm @ sd[pre + "mlp.W_in"] + sd[pre + "mlp.b_in"]
            )
        else:
            hidden = act(xm @ sd[pre + "mlp.W_in"] + sd[pre + "mlp.b_in"])
        x = x + hidden @ sd[pre + "mlp.W_out"] + sd[pre + "mlp.b_out"]
    x = naive_norm(x, sd, "ln_final", cfg)
    w_u = sd["embed.W_E"].T if cfg.tie_embeddings else sd["unembed.W_U"]
    acts["logits"] = x @ w_u + sd["unembed.b_U"]
    return acts


CONFIGS = {
    "gpt2-like": dict(norm="layernorm", positional="learned", act="gelu_tanh"),
    "llama-like": dict(norm="rmsnorm", positional="rotary", mlp="gated", n_kv_heads=2, tie_embeddings=True),
    "partial-rotary": dict(positional="rotary", rotary_dim=4, act="relu"),
}


@pytest.mark.parametrize("name", CONFIGS)
def test_naive_implementation_matches_every_hook(name):
    model = HookedTransformer(tiny_config(**CONFIGS[name]))
    with torch.no_grad():  # non-zero biases, so a forgotten bias would show
        for pname, param in model.named_parameters():
            if pname.rsplit(".", 1)[-1].startswith("b"):
                param.normal_(0, 0.1)
    tokens = torch.tensor([5, 17, 3, 60, 0, 42])
    expected = naive_forward(model, tokens)
    logits, cache = model.run_with_cache(tokens[None])
    for hook_name, value in expected.items():
        got = logits[0] if hook_name == "logits" else cache[hook_name][0]
        torch.testing.assert_close(got, value, atol=1e-5, rtol=1e-4, msg=lambda m, n=hook_name: f"{n}: {m}")
