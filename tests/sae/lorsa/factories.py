"""Random Lorsas of the sizes the tests use, drawn from a seed."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from interp.sae.lorsa import Lorsa, LorsaConfig, LorsaLayer


def random_lorsa(
    layers: Sequence[int] = (0,),
    *,
    d_model: int = 8,
    n_heads: int = 6,
    n_qk_heads: int = 2,
    d_qk_head: int = 4,
    seed: int = 0,
    **settings,
) -> Lorsa:
    """A Lorsa at ``layers`` with unit-scale reads, gains near one, small biases and positive thresholds."""
    gen = torch.Generator().manual_seed(seed)
    settings.setdefault("k", 2 if settings.get("activation", "topk") in ("topk", "batchtopk") else None)
    by_layer = {}
    for layer in layers:
        cfg = LorsaConfig(
            d_model=d_model, n_heads=n_heads, n_qk_heads=n_qk_heads, d_qk_head=d_qk_head, **settings
        )
        module = LorsaLayer(cfg)
        with torch.no_grad():
            for name, p in module.named_parameters():
                noise = torch.randn(p.shape, generator=gen)
                if name in ("q_norm", "k_norm"):
                    p.copy_(1 + 0.2 * noise)
                elif name == "threshold":
                    p.copy_(0.3 + 0.1 * noise.abs())
                elif name.startswith("b_"):
                    p.copy_(0.1 * noise)
                else:
                    p.copy_(noise / math.sqrt(d_model) * 2)
        by_layer[layer] = module
    return Lorsa(by_layer)
