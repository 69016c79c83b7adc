"""The stream entering a layer at one position, split into the writes that make it up.

This is the per-position split QK attribution starts from: :func:`~interp.analysis.decompose.decompose_stream`
(embeddings, each earlier head's write, the output biases, each earlier MLP's write; norms after a sublayer or
after the add linearised with their cached scales) at one position of one prompt, with each head's write split
by the key it read (``L3H4@"tired"``: what head 3.4 carried from "tired" to ``p``) and, with transcoders, each
MLP's write split into its features' decoder writes, the decoder bias, the skip term and the error.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from hooks import ActivationCache
from interp.analysis.decompose import decompose_names, decompose_stream
from interp.analysis.node import Node


def stream_names(model: nn.Module, layer: int, *, by_source: bool = True) -> list[str]:
    """The hooks :func:`stream_parts` reads for the stream entering ``layer``."""
    return decompose_names(model, layer, heads=_heads(by_source))


def stream_parts(
    model: nn.Module,
    cache: ActivationCache,
    layer: int,
    pos: int,
    tokens: list[str],
    *,
    by_source: bool = True,
    transcoders: Any = None,
) -> tuple[list[Node], torch.Tensor]:
    """``blocks.{layer}.hook_resid_pre`` at ``pos`` (batch row 0) as nodes and ``[n, d_model]`` parts.

    The parts are float32 and sum to the stream. ``tokens`` are the token strings the labels show.
    """
    return decompose_stream(
        model, cache, layer, position=pos, heads=_heads(by_source), transcoders=transcoders, tokens=tokens
    )


def _heads(by_source: bool) -> str:
    """Heads split by the key they read, or one part per head (from ``hook_z``)."""
    return "source" if by_source else "z"
