"""``transformer_lens.patching``: TransformerLens's activation patching functions, by their names.

Each ``get_act_patch_*`` function is :func:`~interp.compat.transformer_lens.activation_patch.generic_activation_patch`
with a setter, an activation and index axes fixed, as in TransformerLens, returning a tensor shaped by the axes
(``[layer, pos]``, ``[layer, pos, head]``, ``[layer, head]``...); the ``*_every`` functions stack several
(``[3 or 5, layer, ...]``), padding key/value-head rows with zeros to ``n_heads`` in grouped-query models. The
runs are interp's batched ones (see :mod:`interp.compat.transformer_lens.activation_patch`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import einops
import torch

from interp.compat.transformer_lens.activation_patch import (
    AXES,
    PatchSetter,
    generic_activation_patch,
    layer_head_dest_src_pos_pattern_patch_setter,
    layer_head_pattern_patch_setter,
    layer_head_pos_pattern_patch_setter,
    layer_head_vector_patch_setter,
    layer_pos_head_vector_patch_setter,
    layer_pos_patch_setter,
    make_df_from_ranges,
)

__all__ = [
    "AXES",
    "generic_activation_patch",
    "layer_head_dest_src_pos_pattern_patch_setter",
    "layer_head_pattern_patch_setter",
    "layer_head_pos_pattern_patch_setter",
    "layer_head_vector_patch_setter",
    "layer_pos_head_vector_patch_setter",
    "layer_pos_patch_setter",
    "make_df_from_ranges",
]


def _named(setter: PatchSetter, activation: str, axes: tuple[str, ...], doc: str) -> Callable[..., Any]:
    """``generic_activation_patch`` with the setter, activation and axes fixed, under its own docstring."""
    fn = partial(
        generic_activation_patch, patch_setter=setter, activation_name=activation, index_axis_names=axes
    )
    fn.__doc__ = (
        f"Patch {doc}; returns ``[{', '.join(axes)}]``.\n\n"
        "Arguments: ``(model, corrupted_tokens, clean_cache, patching_metric)`` as for "
        ":func:`generic_activation_patch`."
    )
    return fn


_LP, _LPH, _LH = ("layer", "pos"), ("layer", "pos", "head"), ("layer", "head")
get_act_patch_resid_pre = _named(
    layer_pos_patch_setter, "resid_pre", _LP, "the stream entering each block, by position"
)
get_act_patch_resid_mid = _named(
    layer_pos_patch_setter, "resid_mid", _LP, "the stream between sublayers, by position"
)
get_act_patch_attn_out = _named(layer_pos_patch_setter, "attn_out", _LP, "each attention output, by position")
get_act_patch_mlp_out = _named(layer_pos_patch_setter, "mlp_out", _LP, "each MLP output, by position")
get_act_patch_attn_head_out_by_pos = _named(
    layer_pos_head_vector_patch_setter, "z", _LPH, "each head's output (z), by position"
)
get_act_patch_attn_head_q_by_pos = _named(
    layer_pos_head_vector_patch_setter, "q", _LPH, "each head's queries, by position"
)
get_act_patch_attn_head_k_by_pos = _named(
    layer_pos_head_vector_patch_setter, "k", _LPH, "each key/value head's keys, by position"
)
get_act_patch_attn_head_v_by_pos = _named(
    layer_pos_head_vector_patch_setter, "v", _LPH, "each key/value head's values, by position"
)
get_act_patch_attn_head_pattern_by_pos = _named(
    layer_head_pos_pattern_patch_setter,
    "pattern",
    ("layer", "head_index", "dest_pos"),
    "each head's pattern, by query",
)
get_act_patch_attn_head_pattern_dest_src_pos = _named(
    layer_head_dest_src_pos_pattern_patch_setter,
    "pattern",
    ("layer", "head_index", "dest_pos", "src_pos"),
    "each (query, key) entry of each head's pattern",
)
get_act_patch_attn_head_out_all_pos = _named(
    layer_head_vector_patch_setter, "z", _LH, "each head's output (z) at every position"
)
get_act_patch_attn_head_q_all_pos = _named(
    layer_head_vector_patch_setter, "q", _LH, "each head's queries at every position"
)
get_act_patch_attn_head_k_all_pos = _named(
    layer_head_vector_patch_setter, "k", _LH, "each key/value head's keys at every position"
)
get_act_patch_attn_head_v_all_pos = _named(
    layer_head_vector_patch_setter, "v", _LH, "each key/value head's values at every position"
)
get_act_patch_attn_head_pattern_all_pos = _named(
    layer_head_pattern_patch_setter, "pattern", ("layer", "head_index"), "each head's whole pattern"
)


def _pad_heads(results: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Key/value-head results padded with zeros on the last axis to ``n_heads`` (grouped-query models)."""
    return torch.nn.functional.pad(results, (0, n_heads - results.shape[-1]))


def get_act_patch_attn_head_all_pos_every(model, corrupted_tokens, clean_cache, metric) -> torch.Tensor:
    """Output, query, key, value and pattern of every head, each at every position: ``[5, layer, head]``."""
    args = (model, corrupted_tokens, clean_cache, metric)
    out = get_act_patch_attn_head_out_all_pos(*args)
    n_heads = out.shape[-1]
    return torch.stack(
        [
            out,
            get_act_patch_attn_head_q_all_pos(*args),
            _pad_heads(get_act_patch_attn_head_k_all_pos(*args), n_heads),
            _pad_heads(get_act_patch_attn_head_v_all_pos(*args), n_heads),
            get_act_patch_attn_head_pattern_all_pos(*args),
        ]
    )


def get_act_patch_attn_head_by_pos_every(model, corrupted_tokens, clean_cache, metric) -> torch.Tensor:
    """Output, query, key, value and pattern (by query) of every head, by position: ``[5, layer, pos, head]``."""
    args = (model, corrupted_tokens, clean_cache, metric)
    out = get_act_patch_attn_head_out_by_pos(*args)
    n_heads = out.shape[-1]
    pattern = get_act_patch_attn_head_pattern_by_pos(*args)  # [layer, head, pos]
    return torch.stack(
        [
            out,
            get_act_patch_attn_head_q_by_pos(*args),
            _pad_heads(get_act_patch_attn_head_k_by_pos(*args), n_heads),
            _pad_heads(get_act_patch_attn_head_v_by_pos(*args), n_heads),
            einops.rearrange(pattern, "layer head pos -> layer pos head"),
        ]
    )


def get_act_patch_block_every(model, corrupted_tokens, clean_cache, metric) -> torch.Tensor:
    """The stream entering each block, each attention output and each MLP output, by position: ``[3, layer,
    pos]``."""
    args = (model, corrupted_tokens, clean_cache, metric)
    return torch.stack(
        [get_act_patch_resid_pre(*args), get_act_patch_attn_out(*args), get_act_patch_mlp_out(*args)]
    )
