"""Tiny random models shared by the analysis tests: GPT-2-, Llama- (GQA, rotary), BERT-, Gemma-2-, OLMo-2- and
GPT-NeoX-like."""

from __future__ import annotations

import torch

from interp import HookedTransformer, TransformerConfig

BASE = dict(n_layers=2, d_model=32, n_heads=4, d_vocab=50, n_ctx=16, seed=0)

CONFIGS = {
    "gpt2": TransformerConfig(**BASE),
    "llama": TransformerConfig(
        **BASE,
        n_kv_heads=2,
        norm="rmsnorm",
        positional="rotary",
        mlp="gated",
        act="silu",
        attn_bias=False,
        mlp_bias=False,
    ),
    "bert": TransformerConfig(**BASE, norm_placement="post", embed_norm=True, causal=False),
    # What the newer families add: sandwich norms, soft-caps and a window (Gemma 2); norms on the sublayer
    # outputs only and q/k norms (OLMo 2); parallel attention and MLP with partial rotary (GPT-NeoX).
    "gemma2": TransformerConfig(
        **BASE,
        n_kv_heads=2,
        norm="rmsnorm",
        norm_placement="sandwich",
        norm_offset=1.0,
        positional="rotary",
        mlp="gated",
        act="gelu_tanh",
        attn_bias=False,
        mlp_bias=False,
        attn_softcap=5.0,
        logit_softcap=3.0,
        sliding_window=3,
        layer_types=("sliding", "full"),
        embed_scale=2.0,
    ),
    "olmo2": TransformerConfig(
        **BASE, norm="rmsnorm", norm_placement="output", qk_norm="full", positional="rotary", mlp="gated"
    ),
    "neox": TransformerConfig(**BASE, positional="rotary", rotary_dim=4, parallel_attn_mlp=True),
}


def build(kind: str, **changes) -> HookedTransformer:
    """A random model whose weights are large enough (std 0.3) that attention is far from uniform."""
    model = HookedTransformer(CONFIGS[kind].replace(**changes) if changes else CONFIGS[kind])
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "w":
                param.copy_(1 + 0.1 * torch.randn(param.shape, generator=generator))
            else:
                param.copy_(0.3 * torch.randn(param.shape, generator=generator))
    return model.eval()


def tokens(batch: int = 2, n: int = 8, seed: int = 0, d_vocab: int = 50) -> torch.Tensor:
    return torch.randint(0, d_vocab, (batch, n), generator=torch.Generator().manual_seed(seed))
