"""Tiny mixture-of-experts models shared by the routing tests: ``transformers`` checkpoints of
``tests/load/families.py`` converted with ``from_hf`` (kept beside them as the reference), and batches with
right padding."""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

import interp
from tests.load.families import build

VOCAB = 60


@functools.cache
def pair(name: str) -> tuple[torch.nn.Module, interp.HookedTransformer]:
    """``(transformers model, interp model)`` of the tiny checkpoint ``name`` (``mixtral``, ``qwen2-moe``...)."""
    reference = build(name, VOCAB)
    return reference, interp.from_hf(reference).eval()


def model(name: str) -> interp.HookedTransformer:
    return pair(name)[1]


def tokens(batch: int = 3, n: int = 7, seed: int = 0) -> torch.Tensor:
    """Random ids ``[batch, n]`` that avoid the special ids 0 and 1."""
    return torch.randint(2, VOCAB, (batch, n), generator=torch.Generator().manual_seed(seed))


def padded(batch: int = 3, n: int = 7, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens and a right-padding mask: row ``i`` has ``n - i`` real tokens (padding holds id 1)."""
    ids = tokens(batch, n, seed)
    mask = (torch.arange(n)[None] < torch.tensor([n - i for i in range(batch)])[:, None]).long()
    return ids.masked_fill(mask == 0, 1), mask


def naive_moe_writes(model: interp.HookedTransformer, layer: int, x: torch.Tensor) -> torch.Tensor:
    """``[expert (+ shared), batch, pos, d_model]`` float64: each expert's weighted write from the MoE input
    ``x [batch, pos, d_model]`` (the normed stream), token by token, from the weights alone (gated SiLU experts,
    or GPT-OSS's clamped unit with biases; the router's top k of its softmax, with the router's bias where it
    has one, renormalised where the family renormalises)."""
    cfg, mlp = model.cfg, model.blocks[layer].mlp
    x = x.detach().double()
    logits = x @ mlp.W_router.double()  # [batch, pos, expert]
    if getattr(mlp, "b_router", None) is not None:
        logits = logits + mlp.b_router.double()
    top = logits.softmax(-1).topk(cfg.experts_per_token, dim=-1)
    w = top.values / top.values.sum(-1, keepdim=True) if cfg.expert_weights == "softmax_topk" else top.values
    writes = torch.zeros(cfg.n_experts + (cfg.d_shared_expert is not None), *x.shape, dtype=torch.float64)

    def bias(name: str, e: int) -> torch.Tensor | float:
        b = getattr(mlp, name, None)
        return 0.0 if b is None else b[e].double()

    def unit(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        if cfg.glu_clamp is None:
            return F.silu(gate) * up
        c = cfg.glu_clamp  # GPT-OSS: x * sigmoid(1.702 x) of the gate clamped above, times the clamped up + 1
        gate = gate.clamp(max=c)
        return gate * torch.sigmoid(1.702 * gate) * (up.clamp(-c, c) + 1)

    with torch.no_grad():
        for b in range(x.shape[0]):
            for p in range(x.shape[1]):
                for e, weight in zip(top.indices[b, p].tolist(), w[b, p], strict=True):
                    gate = x[b, p] @ mlp.W_gate[e].double() + bias("b_gate", e)
                    up = x[b, p] @ mlp.W_in[e].double() + bias("b_in", e)
                    out = unit(gate, up) @ mlp.W_out[e].double() + bias("b_out", e)
                    writes[e, b, p] = weight * out
        if cfg.d_shared_expert is not None:
            s = mlp.shared_expert
            h = F.silu(x @ s.W_gate.double()) * (x @ s.W_in.double())
            writes[-1] = torch.sigmoid(x @ mlp.W_shared_gate.double()) * (h @ s.W_out.double())
    return writes
