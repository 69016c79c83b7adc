"""Random transcoders for the transcoder tests."""

from __future__ import annotations

import torch

from interp.sae.transcoder import CrossLayerTranscoder, TranscoderSet


def random_set(
    n_layers: int = 2, d_model: int = 16, d_tc: int = 24, *, seed: int = 0, skip: bool = False, **kw
) -> TranscoderSet:
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=g) * 0.3

    if kw.get("activation") == "jumprelu":
        kw["threshold"] = r(n_layers, d_tc).abs()
    return TranscoderSet(
        r(n_layers, d_tc, d_model),
        r(n_layers, d_tc, d_model),
        r(n_layers, d_tc),
        r(n_layers, d_model),
        W_skip=r(n_layers, d_model, d_model) if skip else None,
        **kw,
    )


def random_clt(
    n_layers: int = 2, d_model: int = 16, d_tc: int = 24, *, seed: int = 0, skip: bool = False, **kw
) -> CrossLayerTranscoder:
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=g) * 0.3

    if kw.get("activation") == "jumprelu":
        kw["threshold"] = r(n_layers, d_tc).abs()
    return CrossLayerTranscoder(
        r(n_layers, d_tc, d_model),
        [r(d_tc, n_layers - i, d_model) for i in range(n_layers)],
        r(n_layers, d_tc),
        r(n_layers, d_model),
        W_skip=r(n_layers, d_model, d_model) if skip else None,
        **kw,
    )
