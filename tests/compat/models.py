"""The compat tests' models: the golden GPT-2-shaped checkpoint (with its word-level tokenizer) and tiny
interp configs built in the test."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch
from safetensors.torch import load_file

import interp.compat.transformer_lens as transformer_lens
from interp import HookedTransformer
from tests.analysis.models import CONFIGS

GOLDEN = Path(__file__).parent / "golden"
CHECKPOINT = str(GOLDEN / "tiny_gpt2")


def golden() -> dict[str, torch.Tensor]:
    return load_file(GOLDEN / "golden.safetensors")


def golden_labels() -> dict[str, list[str]]:
    return json.loads((GOLDEN / "labels.json").read_text())


def gqa_model(**overrides) -> HookedTransformer:
    """The analysis tests' Llama-style config (RMSNorm, rotary, 4 query heads on 2 key/value heads, d_model 32)
    with tied embeddings and random norm gains, so that folding has something to fold."""
    cfg = dataclasses.replace(CONFIGS["llama"], **{"tie_embeddings": True, "seed": 3, **overrides})
    model = HookedTransformer(cfg)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(".w"):
                param.add_(0.3 * torch.randn(param.shape, generator=torch.Generator().manual_seed(len(name))))
    return model.eval()


def tl_model(process: bool = True) -> transformer_lens.HookedTransformer:
    if process:
        return transformer_lens.HookedTransformer.from_pretrained(CHECKPOINT)
    return transformer_lens.HookedTransformer.from_pretrained_no_processing(CHECKPOINT)
