"""Tiny random transcoders (interp's own classes), for the attribution-graph tests, and models to put them on.

``kind``: ``per-layer`` (each layer's features write its own MLP output), ``skip`` (the same plus a linear
skip connection) or ``clt`` (cross-layer: features of layer ``l`` write every output from ``l`` on). Encoder
biases are negative, so about a third of the features are active at a position.
"""

from __future__ import annotations

import torch

import interp
from interp.sae.transcoder import CrossLayerTranscoder, TranscoderSet

SITE = "ln2.hook_normalized"


def tiny_transcoders(
    cfg, d_transcoder: int = 24, kind: str = "per-layer", seed: int = 0, input_site: str = SITE
):
    """Random transcoders for a model of config ``cfg`` (see the module docstring for ``kind``)."""
    g = torch.Generator().manual_seed(seed)
    n, d, f = cfg.n_layers, cfg.d_model, d_transcoder
    w_enc = torch.randn(n, f, d, generator=g) / d**0.5
    b_enc = -0.4 - 0.2 * torch.rand(n, f, generator=g)
    b_dec = 0.1 * torch.randn(n, d, generator=g)
    if kind == "clt":
        w_dec = [torch.randn(f, n - layer, d, generator=g) / f**0.5 for layer in range(n)]
        return CrossLayerTranscoder(w_enc, w_dec, b_enc, b_dec, input_site=input_site)
    w_dec = torch.randn(n, f, d, generator=g) / f**0.5
    w_skip = 0.3 * torch.randn(n, d, d, generator=g) / d**0.5 if kind == "skip" else None
    return TranscoderSet(w_enc, w_dec, b_enc, b_dec, W_skip=w_skip, input_site=input_site)


def from_circuit_tracer(tensors: dict, kind: str, input_site: str, gains=None):
    """The transcoders of a golden file (weights named as circuit-tracer holds them, ``tc.W_enc.0``...).

    ``gains [n_layers, d_model]``: the norm gain circuit-tracer's input hook applies after the hook this one
    reads (its ``mlp.hook_in`` is interp's ``ln2.hook_normalized`` times the gain), folded into the encoder and
    the skip connection.
    """
    if kind == "clt":
        w_enc, b_enc, b_dec = tensors["tc.W_enc"], tensors["tc.b_enc"], tensors["tc.b_dec"]
        w_dec = [tensors[f"tc.W_dec.{i}"] for i in range(len(w_enc))]
        fold = w_enc if gains is None else w_enc * gains[:, None, :]
        return CrossLayerTranscoder(fold, w_dec, b_enc, b_dec, input_site=input_site)
    n = sum(1 for k in tensors if k.startswith("tc.W_enc."))

    def stack(name):
        return torch.stack([tensors[f"tc.{name}.{i}"] for i in range(n)])

    w_enc, w_skip = stack("W_enc"), stack("W_skip") if kind == "skip" else None
    if gains is not None:
        w_enc = w_enc * gains[:, None, :]
        w_skip = None if w_skip is None else w_skip * gains[:, None, :]
    return TranscoderSet(
        w_enc, stack("W_dec"), stack("b_enc"), stack("b_dec"), W_skip=w_skip, input_site=input_site
    )


def input_site(model) -> str:
    """Where an MLP transcoder reads: the MLP's norm output, or the stream where the MLP has no norm before it
    (OLMo 2 normalises the MLP's output instead)."""
    return "ln2.hook_normalized" if "blocks.0.ln2.hook_normalized" in model.hook_dict else "hook_resid_mid"


def family_model(name: str) -> interp.HookedTransformer:
    """A tiny random model of a family interp loads: ``gpt2`` or a name of ``tests.load.families.FAMILIES``."""
    if name == "gpt2":
        from tests.hf_models import gpt2

        torch.manual_seed(0)
        hf = gpt2("eager")
        from tests.load.families import embolden

        embolden(hf)
    else:
        from tests.load.families import build

        hf = build(name, vocab=97)
    return interp.from_hf(hf.eval()).eval()
