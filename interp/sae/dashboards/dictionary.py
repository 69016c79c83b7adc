"""What the dashboards read of a dictionary: any :class:`~interp.dictionary.SparseDictionary`, one code path.

An SAE, a per-layer transcoder set (with or without skip), a cross-layer transcoder: the pass reads each
through the interface they share (``layers``, ``n_features``, ``input_hook``, ``encode``, ``decoder``,
``output_layers``, ``output_hook``); a bare :class:`~interp.sae.SAE` is read as an :class:`~interp.sae.SAESet`.
Features are numbered as circuit-tracer numbers them: a layer (an SAE's is the block of the hook it reads) and
an index in it, paired into ``featureIndex`` by the Cantor pairing.

The logits a feature moves are read from the decoder row into the *last* layer it writes: an SAE's or a
per-layer transcoder's only row, a cross-layer transcoder's row into the model's last layer (see
``docs/dashboards.md`` for why), and only where that row lies in the residual stream's space.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from interp.dictionary import SparseDictionary
from interp.sae.sae_set import as_dictionary  # noqa: F401 (the package's name for it)

PROBED = 64
"""Features per layer whose encoder and decoder rows go into a dictionary's fingerprint."""

_STREAM_SPACE = (
    "hook_resid_pre",
    "hook_resid_mid",
    "hook_resid_post",
    "hook_attn_out",
    "hook_mlp_out",
    "hook_normalized",
    "hook_embed",
    "hook_pos_embed",
    "hook_in",
)
"""Hooks whose tensors are vectors of the residual stream's space (``[..., d_model]``), so a decoder row written
there can be read by the unembedding; a row written to ``hook_z`` or an MLP's hidden layer cannot."""


def cantor(layer: int, feature: int) -> int:
    """The ``featureIndex`` circuit-tracer gives feature ``feature`` of ``layer`` (its graph nodes' ``feature``)."""
    return (layer + feature) * (layer + feature + 1) // 2 + feature


def kind(dictionary: SparseDictionary) -> str:
    """``"cross-layer transcoder"`` (a layer writes several), ``"sae"`` (every layer writes the hook it reads) or
    ``"transcoders"`` (each layer writes another hook), told from the interface alone."""
    layers = list(dictionary.layers)
    if any(len(dictionary.output_layers(layer)) > 1 for layer in layers):
        return "cross-layer transcoder"
    if all(dictionary.input_hook(layer) == dictionary.output_hook(layer) for layer in layers):
        return "sae"
    return "transcoders"


def output_hook(dictionary: SparseDictionary, layer: int) -> str:
    """The hook written by the row :func:`logit_rows` reads: at the last layer the features of ``layer`` write."""
    return dictionary.output_hook(dictionary.output_layers(layer)[-1])


def logit_rows(dictionary: SparseDictionary, layer: int, features: torch.Tensor) -> torch.Tensor | None:
    """``[n, d]``: what one unit of each of ``features`` writes into the last layer it writes; ``None`` where
    that write is not a vector of the residual stream (an SAE at ``hook_z``) or is not fixed (an SAE that
    normalises each input has no decoder row apart from its input)."""
    if output_hook(dictionary, layer).rsplit(".", 1)[-1] not in _STREAM_SPACE:
        return None
    rows = _rows(dictionary.decoder, layer, features)
    return None if rows is None else rows[:, -1]  # [n, d_model]


def device_of(dictionary: SparseDictionary, model: Any = None) -> torch.device:
    """Where the dictionary computes: its decoder's (or encoder's) device, or else the model's."""
    layer, first = dictionary.layers[0], torch.zeros(1, dtype=torch.long)
    for read in (dictionary.decoder, dictionary.encoder):
        rows = _rows(read, layer, first)
        if rows is not None:
            return rows.device
    return torch.device(getattr(model, "device", "cpu"))


def fingerprint(dictionary: SparseDictionary) -> str:
    """sha256 of what the dashboards depend on: the layers, hooks and widths, and the encoder and decoder rows
    of each layer's first :data:`PROBED` features (where the dictionary has fixed rows; a skip term is not
    read)."""
    layers = list(dictionary.layers)
    shape = {
        str(layer): [
            dictionary.n_features(layer),
            dictionary.input_hook(layer),
            [dictionary.output_hook(out) for out in dictionary.output_layers(layer)],
        ]
        for layer in layers
    }
    h = hashlib.sha256(json.dumps([kind(dictionary), dictionary.d_in, dictionary.d_out, shape]).encode())
    for layer in layers:
        first = torch.arange(min(PROBED, dictionary.n_features(layer)))
        for read in (dictionary.encoder, dictionary.decoder):
            rows = _rows(read, layer, first)
            if rows is not None:
                h.update(rows.detach().float().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def _rows(read: Any, layer: int, features: torch.Tensor) -> torch.Tensor | None:
    """``read(layer, features)`` (an encoder's or decoder's rows), or ``None`` for a dictionary without fixed
    rows (:class:`~interp.sae.SAESet` raises ``ValueError`` for an SAE that normalises its input)."""
    try:
        with torch.no_grad():
            return read(layer, features)
    except ValueError:
        return None


def load_dictionary(path: str | Path, model: Any) -> SparseDictionary:
    """Read the SAE or transcoders at ``path`` for ``model`` (on its device and dtype) and check they fit it
    (:func:`interp.sae.formats.load_dictionary`)."""
    from interp.sae.formats import load_dictionary as load

    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"--dictionary {path} does not exist; give an SAE or transcoder folder")
    return load(path, model=model, device=model.device, dtype=model.dtype)
