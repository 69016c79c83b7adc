"""What a dashboards run is, for a rerun to compare: the model, the dictionary, the data and the settings.

The identity is written to ``run.json`` before the pass (:mod:`interp.resumable`); a rerun with the same
identity continues the folder, any other is refused naming what differs. The dictionary is known by its kind,
layers, widths and a fingerprint of the rows the dashboards depend on, so another dictionary of the same shape
(another seed, another checkpoint) is told apart without hashing every weight.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from typing import Any

import torch

from interp.dictionary import SparseDictionary
from interp.sae.dashboards.collector import Settings
from interp.sae.dashboards.folder import FORMAT
from interp.sae.dashboards.reading import Reading, fixed_rows

PROBED = 64
"""Features per layer whose encoder and decoder rows go into a dictionary's fingerprint."""


def kind(dictionary: SparseDictionary) -> str:
    """``"cross-layer transcoder"`` (a layer writes several), ``"sae"`` (every layer writes the hook it reads) or
    ``"transcoders"`` (each layer writes another hook), told from the interface alone."""
    layers = list(dictionary.layers)
    if any(len(dictionary.output_layers(layer)) > 1 for layer in layers):
        return "cross-layer transcoder"
    if all(dictionary.input_hook(layer) == dictionary.output_hook(layer) for layer in layers):
        return "sae"
    return "transcoders"


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
            rows = fixed_rows(read, layer, first)
            if rows is not None:
                h.update(rows.detach().float().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def run_identity(
    model: Any,
    reading: Reading,
    source: Any,
    *,
    scan: str,
    settings: Settings,
    max_tokens: int | None,
) -> dict[str, Any]:
    """The identity of a run (its ``run.json``): the fields and their values as they have always been written,
    so a folder begun by an earlier version continues."""
    from interp.store.meta import model_fingerprint

    view = reading.dictionary
    return {
        "format": FORMAT,
        "scan": scan,
        "model": {"name": getattr(model.cfg, "name", None), "fingerprint": model_fingerprint(model)},
        "dictionary": {
            "kind": kind(view),
            "layers": reading.layers,
            "widths": [reading.widths[layer] for layer in reading.layers],
            "fingerprint": fingerprint(view),
        },
        "data": source.identity(),
        "settings": asdict(settings),
        "features": {str(k): v.tolist() for k, v in reading.chosen.items()} or "all",
        "max_tokens": max_tokens,
        "skip_first": source.skip_first,
    }
