"""The nodes of an attribution graph and the vectors they read and write, from one frozen forward pass.

Active features are those with a non-zero activation at a position after the first (the first holds a special
token and, as in circuit-tracer, nothing is attributed there), listed layer-major, then by position, then by
feature. Each has an *encoder vector* (the gradient of its pre-activation with respect to its input hook: its
encoder row, since pre-activations are affine in the input) and a *decoder vector* per layer it writes
(activation times decoder row). An error node is what the transcoder's reconstruction (decoder
writes, ``b_dec`` and skip) misses of the output hook; a token node is the token's embedding at ``hook_embed``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from interp.circuits.features.frozen import FrozenRun
from interp.dictionary import SparseDictionary


@dataclass
class Sources:
    """Active features and the vectors of every source node.

    Attributes:
        features: ``[n_active, 3]`` (layer, position, feature), layer-major.
        activations: ``[n_active]``.
        encoders: ``[n_active, d_model]``: d pre-activation / d input.
        decoders: layer -> (the global index of that layer's first feature, and ``[n, n_out, d_model]``
            activation times decoder rows of its features, one slice per ``output_layers(layer)``).
        runs: layer -> ``(position, start, end)`` for each position with active features: a layer's features
            are listed position by position, so those at one position are the global indices ``start:end``.
        errors: ``[n_layers, pos, d_model]`` (zero at position 0).
        tokens: ``[pos, d_model]`` token embeddings.
    """

    features: torch.Tensor
    activations: torch.Tensor
    encoders: torch.Tensor
    decoders: dict[int, tuple[int, torch.Tensor]]
    runs: dict[int, list[tuple[int, int, int]]]
    errors: torch.Tensor
    tokens: torch.Tensor


def find_sources(run: FrozenRun, transcoders: SparseDictionary, n_layers: int) -> Sources:
    """Active features, their encoder and decoder vectors, the error and token vectors of ``run``."""
    found, values, acts_of, encoders, decoders, runs = [], [], {}, [], {}, {}
    start = 0
    for layer in transcoders.layers:
        x = run.inputs[layer][0].detach()  # [pos, d_model]
        with torch.no_grad():
            acts = transcoders.encode(x, layer)[1].clone()  # [pos, d_transcoder]
        acts[0] = 0
        acts_of[layer] = acts
        where = acts.nonzero()  # [n, 2] (position, feature), position-major
        pos, feat = where[:, 0], where[:, 1]
        encoders.append(transcoders.encoder(layer, feat).detach().to(x.device))
        value = acts[pos, feat].detach().float()
        dec = transcoders.decoder(layer, feat).detach().float() * value[:, None, None]  # [n, n_out, d_model]
        decoders[layer] = (start, dec)
        where, counts = torch.unique_consecutive(pos, return_counts=True)
        ends = (start + counts.cumsum(0)).tolist()
        runs[layer] = [
            (p, end - c, end) for p, end, c in zip(where.tolist(), ends, counts.tolist(), strict=True)
        ]
        found.append(torch.stack([torch.full_like(pos, layer), pos, feat], 1))
        values.append(value)
        start += len(pos)
    features = torch.cat(found).cpu()
    activations = torch.cat(values)
    errors = _errors(run, transcoders, acts_of, n_layers)
    return Sources(
        features=features,
        activations=activations.cpu(),
        encoders=torch.cat(encoders).float(),
        decoders=decoders,
        runs=runs,
        errors=errors,
        tokens=run.embed[0].detach().float(),
    )


def _errors(run: FrozenRun, transcoders: SparseDictionary, acts_of: dict, n_layers: int) -> torch.Tensor:
    first = run.outputs[min(run.outputs)]
    errors = torch.zeros(n_layers, first.shape[1], first.shape[2], dtype=torch.float32, device=first.device)
    with torch.no_grad():
        for layer, leaf in run.outputs.items():
            recon = transcoders.decode(acts_of, layer).detach().float()  # [pos, d_model]
            out = leaf[0].float()  # the leaf holds the output less the skip write
            errors[layer] = out - recon
    errors[:, 0] = 0
    return errors
