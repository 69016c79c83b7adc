"""The compat tests' models: the golden GPT-2-shaped checkpoint (with its word-level tokenizer) and tiny
interp configs built in the test."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file

import interp.compat.transformer_lens as transformer_lens
from interp import HookedTransformer, TransformerConfig

GOLDEN = Path(__file__).parent / "golden"
CHECKPOINT = str(GOLDEN / "tiny_gpt2")


def golden() -> dict[str, torch.Tensor]:
    return load_file(GOLDEN / "golden.safetensors")


def golden_labels() -> dict[str, list[str]]:
    return json.loads((GOLDEN / "labels.json").read_text())


def gqa_model(**overrides) -> HookedTransformer:
    """Two Llama-style layers: RMSNorm, rotary, grouped-query attention (4 query heads, 2 key/value heads)."""
    kwargs = dict(
        n_layers=2,
        d_model=16,
        n_heads=4,
        n_kv_heads=2,
        d_vocab=40,
        n_ctx=12,
        norm="rmsnorm",
        positional="rotary",
        mlp="gated",
        act="silu",
        attn_bias=False,
        mlp_bias=False,
        tie_embeddings=True,
        seed=3,
    )
    kwargs.update(overrides)
    model = HookedTransformer(TransformerConfig(**kwargs))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(".w"):
                param.add_(0.3 * torch.randn(param.shape, generator=torch.Generator().manual_seed(len(name))))
    return model.eval()


def tl_model(process: bool = True) -> transformer_lens.HookedTransformer:
    if process:
        return transformer_lens.HookedTransformer.from_pretrained(CHECKPOINT)
    return transformer_lens.HookedTransformer.from_pretrained_no_processing(CHECKPOINT)
