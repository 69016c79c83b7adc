"""Scores as ``transformers`` computes them: each attention layer's query and key states, captured.

An attention function registered with ``transformers.AttentionInterface`` receives every layer's query and
key states (after the q/k norm and rotary) and its ``scaling``; it records them and hands the call on to the
family's own eager attention, so the model runs unchanged. The score of head ``h`` from query ``q`` to key
``k`` is then ``query[h, q] . key[h // group, k] * scaling``, before any soft-cap: the reference the QK
attribution tests compare against.
"""

from __future__ import annotations

import sys

import pytest
import torch

transformers = pytest.importorskip("transformers")

CAPTURE = "interp_qk_capture"
_RECORD: list[tuple[torch.Tensor, torch.Tensor, float]] = []


def _capture(module, query, key, value, attention_mask, scaling=None, **kwargs):
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    _RECORD.append((query.detach(), key.detach(), float(scale)))
    eager = sys.modules[type(module).__module__].eager_attention_forward
    return eager(module, query, key, value, attention_mask, scaling=scaling, **kwargs)


transformers.AttentionInterface.register(CAPTURE, _capture)
# The layers get the additive float masks eager attention expects.
transformers.masking_utils.AttentionMaskInterface.register(CAPTURE, transformers.masking_utils.eager_mask)


def reference_scores(reference: torch.nn.Module, ids: torch.Tensor) -> list[torch.Tensor]:
    """Per layer, ``[head, query, key]`` pre-cap scores of ``reference`` on ``ids [1, pos]``."""
    reference.config._attn_implementation = CAPTURE
    _RECORD.clear()
    with torch.no_grad():
        reference(input_ids=ids)
    scores = []
    for query, key, scale in _RECORD:  # query [1, head, q, e], key [1, kv_head, k, e]
        group = query.shape[1] // key.shape[1]
        key = key.repeat_interleave(group, dim=1)
        scores.append((query[0] @ key[0].transpose(-1, -2)) * scale)  # [head, query, key]
    _RECORD.clear()
    return scores


def embolden_gpt2_bert(name: str, vocab: int) -> torch.nn.Module:
    """GPT-2 (LayerNorm with biases, learned positions) or BERT (post-norm, bidirectional), weights widened."""
    from tests.load.families import build

    layers = {"n_layer": 3} if name == "gpt2" else {"num_hidden_layers": 3}
    return build(name, vocab, None, **layers)
