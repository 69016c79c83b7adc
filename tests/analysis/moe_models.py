"""Tiny mixture-of-experts models shared by the routing tests: ``transformers`` checkpoints of
``tests/load/families.py`` converted with ``from_hf`` (kept beside them as the reference), and batches with
right padding."""

from __future__ import annotations

import functools

import torch

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
