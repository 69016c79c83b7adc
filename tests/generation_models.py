"""Tiny models for the generation tests: random weights, a byte-level BPE tokenizer trained in the test."""

from __future__ import annotations

import functools

from interp import HookedTransformer, TransformerConfig
from interp.tokens import Tokenizer
from tests.load.builders import byte_level_bpe

PROMPTS = ["The cat sat on the mat", "Numbers like", "The animal didn't cross the street because"]


@functools.cache
def _backend():
    return byte_level_bpe()


def tokenizer(n_ctx: int = 96) -> Tokenizer:
    """Byte-level BPE; id 0 ``<|endoftext|>`` (EOS), id 1 ``<|pad|>``."""
    return Tokenizer(_backend(), eos_id=0, pad_id=1, n_ctx=n_ctx, name="tiny-bpe")


def tiny_lm(n_ctx: int = 96, seed: int = 0, **overrides) -> HookedTransformer:
    """A two-layer Llama-style model (rotary, grouped-query attention) with a tokenizer attached."""
    vocab = _backend().get_vocab_size()
    kwargs = dict(
        n_layers=2,
        d_model=48,
        n_heads=4,
        n_kv_heads=2,
        d_mlp=96,
        d_vocab=vocab,
        n_ctx=n_ctx,
        norm="rmsnorm",
        positional="rotary",
        mlp="gated",
        act="silu",
        attn_bias=False,
        mlp_bias=False,
        seed=seed,
    )
    kwargs.update(overrides)
    model = HookedTransformer(TransformerConfig(**kwargs))
    # Larger weights than the default init, so that greedy choices are far from ties and steering matters.
    for name, param in model.named_parameters():
        if param.ndim >= 2 and "W_E" not in name:
            param.data.mul_(4.0)
    model.tokenizer = tokenizer(n_ctx)
    return model.eval()
