"""Tiny models and SAEs with random weights for the SAE tests."""

from __future__ import annotations

import torch

from interp import HookedTransformer, TransformerConfig
from interp.sae import SAE, SAEConfig

D_MODEL = 16


def tiny_model(**changes) -> HookedTransformer:
    cfg = TransformerConfig(
        n_layers=2, d_model=D_MODEL, n_heads=2, d_vocab=40, n_ctx=32, d_mlp=32, seed=0, **changes
    )
    model = HookedTransformer(cfg)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.endswith((".w", ".b")) and "b_" not in name.rsplit(".", 1)[-1]:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.3)
    return model.eval()


def random_sae(hook: str, *, d_in: int = D_MODEL, d_sae: int = 48, seed: int = 0, **fields) -> SAE:
    fields.setdefault("architecture", "topk")
    if fields["architecture"] in ("topk", "batchtopk"):
        fields.setdefault("k", 6)
    sae = SAE(SAEConfig(d_in=d_in, d_sae=d_sae, hook_name=hook, **fields))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in sae.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.4)
        if sae.cfg.has_threshold:
            sae.threshold.abs_()
    return sae


def tokens(batch: int = 3, pos: int = 7, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 40, (batch, pos), generator=torch.Generator().manual_seed(seed))
