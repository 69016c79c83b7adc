"""Random transcoders, and the replacement model run by hand, for the transcoder tests."""

from __future__ import annotations

import torch

from interp.dictionary import sources
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


def replacement_hooks(tc, edit=None) -> list:
    """Hooks that run the replacement model by hand: at each input hook, the input is kept; at each output hook,
    the output is the reconstruction from the inputs seen (``edit(layer, acts)`` changing each source's
    activations first, if given)."""
    inputs: dict[int, torch.Tensor] = {}

    def read(layer):
        def fn(x, hook):
            inputs[layer] = x.detach().clone()

        return fn

    def write(layer):
        def fn(x, hook):
            acts = {s: tc.encode(inputs[s], s)[1] for s in sources(tc, layer)}
            if edit is not None:
                acts = {s: edit(s, a) for s, a in acts.items()}
            out = tc.decode(acts, layer)
            skip = tc.skip(inputs[layer], layer)
            return out if skip is None else out + skip

        return fn

    hooks = []
    for layer in tc.layers:
        hooks += [(tc.input_hook(layer), read(layer)), (tc.output_hook(layer), write(layer))]
    return hooks
