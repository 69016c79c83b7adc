"""Tiny models for the circuit tests, and an independent by-hand implementation of a patched circuit run.

The by-hand run is written from the definition, for a GPT-2-like model (LayerNorm before each sublayer,
learned positions, a standard GELU MLP, biases), one sequence at a time, with Python loops over nodes: every
head and MLP input is the corrupted stream at that input plus, for each kept edge, its source's patched minus
corrupted output. It shares nothing with ``interp.circuits`` but the model's weights.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from interp import HookedTransformer, TransformerConfig
from interp.circuits import Graph, Pairs

BASE = dict(n_layers=2, d_model=16, n_heads=2, d_mlp=32, d_vocab=23, n_ctx=12, seed=0)

CONFIGS = {
    "gpt2": dict(),
    "llama-gqa": dict(
        n_heads=4, n_kv_heads=2, norm="rmsnorm", positional="rotary", mlp="gated", act="silu", attn_bias=False
    ),
    "neox": dict(positional="rotary", rotary_dim=4, parallel_attn_mlp=True),
}


def tiny(name: str = "gpt2", **overrides) -> HookedTransformer:
    """A tiny random model with weights large enough (std 0.25) that heads attend unevenly and edges matter,
    and non-zero biases and norm gains."""
    model = HookedTransformer(TransformerConfig(**{**BASE, **CONFIGS[name], **overrides}))
    with torch.no_grad():
        g = torch.Generator().manual_seed(1)
        for pname, p in model.named_parameters():
            leaf = pname.rsplit(".", 1)[-1]
            if leaf == "w":
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            elif leaf.startswith("b"):
                p.copy_(0.05 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.25 * torch.randn(p.shape, generator=g))
    return model.eval()


def tiny_pairs(model, n: int = 3, n_pos: int = 6, seed: int = 0, *, positions: bool = False) -> Pairs:
    """Random clean inputs; the corrupted ones differ at two positions."""
    g = torch.Generator().manual_seed(seed)
    clean = torch.randint(0, model.cfg.d_vocab, (n, n_pos), generator=g)
    corrupt = clean.clone()
    corrupt[:, 1] = torch.randint(0, model.cfg.d_vocab, (n,), generator=g)
    corrupt[:, 3] = torch.randint(0, model.cfg.d_vocab, (n,), generator=g)
    answer = torch.randint(0, model.cfg.d_vocab, (n,), generator=g)
    foil = (answer + 1 + torch.randint(0, model.cfg.d_vocab - 1, (n,), generator=g)) % model.cfg.d_vocab
    return Pairs(
        clean=clean,
        corrupt=corrupt,
        positions=torch.full((n,), n_pos - 1) if positions else None,
        labels={"answer": answer, "foil": foil},
    )


# -- by hand ------------------------------------------------------------------------------------------------


def _ln(norm, x):
    return F.layer_norm(x, x.shape[-1:], norm.w, norm.b, norm.eps)


def _head(model, layer: int, h: int, xq, xk, xv):
    """One head's write ``[pos, d_model]`` from its query, key and value streams ``[pos, d_model]``."""
    block = model.blocks[layer]
    a = block.attn
    g = h // (model.cfg.n_heads // model.cfg.n_kv_heads)
    q = _ln(block.ln1, xq) @ a.W_Q[h] + a.b_Q[h]
    k = _ln(block.ln1, xk) @ a.W_K[g] + a.b_K[g]
    v = _ln(block.ln1, xv) @ a.W_V[g] + a.b_V[g]
    scores = q @ k.T / math.sqrt(q.shape[-1])
    n = scores.shape[0]
    scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
    return scores.softmax(-1) @ v @ a.W_O[h]


def _mlp(model, layer: int, x):
    block = model.blocks[layer]
    m = block.mlp
    return F.gelu(_ln(block.ln2, x) @ m.W_in + m.b_in) @ m.W_out + m.b_out


def _logits(model, x):
    return _ln(model.ln_final, x) @ model.unembed.weight + model.unembed.b_U


def _run(model, tokens, read):
    """A forward pass of one sequence in which every input is ``read(input_name, own_stream, outputs)``."""
    cfg = model.cfg
    outputs = {"input": model.embed.W_E[tokens] + model.pos_embed.W_pos[: len(tokens)]}
    stream = outputs["input"]
    for layer in range(cfg.n_layers):
        a = model.blocks[layer].attn
        heads = {}
        for h in range(cfg.n_heads):
            g = h // (cfg.n_heads // cfg.n_kv_heads)
            xq = read(f"L{layer}.H{h}.q", stream, outputs)
            xk = read(f"L{layer}.KV{g}.k", stream, outputs)
            xv = read(f"L{layer}.KV{g}.v", stream, outputs)
            heads[f"L{layer}.H{h}"] = _head(model, layer, h, xq, xk, xv)
        outputs.update(heads)
        stream = stream + sum(heads.values()) + a.b_O
        mlp = _mlp(model, layer, read(f"L{layer}.MLP", stream, outputs))
        outputs[f"L{layer}.MLP"] = mlp
        stream = stream + mlp
    return _logits(model, read("logits", stream, outputs)), outputs


def by_hand_circuit(model, clean, corrupt, keep: set[tuple[str, str]]):
    """Logits ``[pos, d_vocab]`` of one clean sequence with every edge outside ``keep`` patched from ``corrupt``."""
    graph = Graph.from_model(model)
    streams: dict[str, torch.Tensor] = {}

    def record(name, stream, outputs):
        streams[name] = stream
        return stream

    _, corrupt_out = _run(model, corrupt, record)

    def patched(name, stream, outputs):
        x = streams[name].clone()
        j = graph.input_index(name)
        for i in range(graph.n_readable(j)):
            source = graph.sources[i]
            if (source, name) in keep:
                x = x + outputs[source] - corrupt_out[source]
        return x

    return _run(model, clean, patched)[0]


def by_hand_logits(model, tokens):
    return _run(model, tokens, lambda name, stream, outputs: stream)[0]
