"""A dictionary's features on one prompt: every feature's activation at each layer, and a feature's activation
split over the positions attention read it from.

:func:`feature_activations` runs the prompt once, capturing only the hooks the dictionary reads and stopping
after the last block it needs, and encodes each layer's input: what a feature dashboard, an activation search
or a steering request reads of a prompt.

:func:`direct_feature_attribution` is for a dictionary that reads an attention layer's value mixture
(``blocks.L.attn.hook_z``, the heads' outputs before the output projection). There the mixture at the query
position ``t`` is ``sum_s pattern[h, t, s] * v[s, h]`` for each head ``h``, so the part of a feature's
encoder pre-activation read from ``z[t]`` splits exactly over the key positions ``s``:
``dfa[s] = sum_h pattern[h, t, s] * (v[s, h] . w[h])`` with ``w`` the feature's encoder row cut into heads.
The terms add up to ``w . z[t]``: the pre-activation less its bias. Neuronpedia calls this direct feature
attribution (DFA) and shows it for its attention SAEs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from hooks.names import layer_of
from interp.dictionary import SparseDictionary


def feature_activations(
    model: Any,
    dictionary: SparseDictionary,
    tokens: torch.Tensor,
    layers: Sequence[int] | None = None,
) -> dict[int, torch.Tensor]:
    """Every feature's activation at each of ``layers`` (default: all the dictionary's) for one prompt.

    Args:
        model: a :class:`~interp.HookedTransformer` the dictionary fits.
        dictionary: any :class:`~interp.dictionary.SparseDictionary` (SAEs, transcoders, CLTs).
        tokens: the prompt's ids ``[pos]``.
        layers: the layers to encode.

    Returns:
        ``{layer: [pos, n_features(layer)]}`` float32 activations, on the model's device.
    """
    layers = list(dictionary.layers) if layers is None else list(layers)
    unknown = [layer for layer in layers if layer not in dictionary.layers]
    if unknown:
        raise ValueError(
            f"the dictionary has no features at layer(s) {unknown}; its layers are {list(dictionary.layers)}"
        )
    if tokens.ndim != 1:
        raise ValueError(f"tokens are one prompt's ids [pos], got shape {list(tokens.shape)}")
    hooks = {dictionary.input_hook(layer) for layer in layers}
    blocks = [layer_of(name) for name in hooks]
    stop = None if any(b is None for b in blocks) else max(blocks) + 1
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens[None], names_filter=sorted(hooks), stop_at_layer=stop)
        return {
            layer: dictionary.encode(cache[dictionary.input_hook(layer)][0], layer)[1].float()
            for layer in layers
        }


def direct_feature_attribution(
    model: Any, dictionary: SparseDictionary, tokens: torch.Tensor, layer: int, feature: int, position: int
) -> torch.Tensor:
    """Feature ``feature`` of ``layer`` at ``position``, its pre-activation less the bias split over the key
    positions its attention layer read (see the module docstring).

    Args:
        model: the model; the dictionary's input at ``layer`` must be ``blocks.L.attn.hook_z``.
        tokens: the prompt's ids ``[pos]``.
        position: the query position whose activation is split.

    Returns:
        ``[pos]`` float32: the share read from each position (zero after ``position``).
    """
    hook = dictionary.input_hook(layer)
    block = layer_of(hook)
    if block is None or hook != f"blocks.{block}.attn.hook_z":
        raise ValueError(
            f"direct feature attribution splits an attention layer's output; layer {layer} of the dictionary "
            f"reads {hook!r}, not blocks.L.attn.hook_z"
        )
    if not 0 <= feature < dictionary.n_features(layer):
        raise ValueError(
            f"feature {feature} is out of range: layer {layer} has {dictionary.n_features(layer)}"
        )
    if not 0 <= position < len(tokens):
        raise ValueError(f"position {position} is outside the prompt of {len(tokens)} tokens")
    cfg = model.cfg
    v_name, pattern_name = f"blocks.{block}.attn.hook_v", f"blocks.{block}.attn.hook_pattern"
    with torch.no_grad():
        _, cache = model.run_with_cache(
            tokens[None], names_filter=[v_name, pattern_name], stop_at_layer=block + 1
        )
        v = cache[v_name][0].float()  # [pos, kv_head, d_head]
        v = v.repeat_interleave(cfg.n_heads // v.shape[1], dim=1)  # [pos, head, d_head]
        pattern = cache[pattern_name][0, :, position].float()  # [head, key]
        w = (
            dictionary.encoder(layer, torch.tensor([feature]))[0].float().view(cfg.n_heads, -1)
        )  # [head, d_head]
        per_head = torch.einsum("she,he->sh", v, w.to(v.device))  # [key, head]
        return torch.einsum("hs,sh->s", pattern, per_head)  # [key]
