"""CrossLayerTranscoder: features read one layer's input and write the outputs of that layer and every later one.

A feature of layer ``i`` has one encoder row and ``n_layers - i`` decoder rows, slice ``j`` writing to layer
``i + j`` (Ameisen et al. 2025, "Circuit Tracing"; circuit-tracer's layout). The output at layer ``L`` sums
the writes of every layer up to ``L``. Decoders are either parameters or read on demand from files
(``decoder_reader``), so a CLT too large for memory still gives the rows an attribution graph needs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from interp.sae.transcoder.base import Transcoder

DecoderReader = Callable[[int, torch.Tensor | None], torch.Tensor]
"""``(layer, features or None) -> [n_features, n_layers - layer, d_model]``: decoder rows read on demand."""


class CrossLayerTranscoder(Transcoder):
    """A cross-layer transcoder over every layer of a model.

    Args:
        W_enc: ``[n_layers, d_transcoder, d_model]``.
        W_dec: per source layer ``i`` a tensor ``[d_transcoder, n_layers - i, d_model]``; ``None`` with
            ``decoder_reader``.
        b_enc: ``[n_layers, d_transcoder]``.
        b_dec: ``[n_layers, d_model]``, added once per output layer.
        threshold: ``[n_layers, d_transcoder]`` for ``jumprelu``.
        W_skip: ``[n_layers, d_model, d_model]`` (out, in): layer ``L``'s output adds ``x_L @ W_skip[L].T``.
        activation, k: as for :class:`TranscoderSet`.
        decoder_reader: reads decoder rows lazily instead of holding ``W_dec``.
        input_site, output_site: hook names inside a block.
        metadata: what the files recorded (format, TransformerLens hook names), kept for saving.

    >>> n, f, d = 3, 8, 4
    >>> clt = CrossLayerTranscoder(torch.randn(n, f, d), [torch.randn(f, n - i, d) for i in range(n)],
    ...                            torch.zeros(n, f), torch.zeros(n, d))
    >>> clt.output_layers(1), clt.decoder(1, torch.tensor([0, 5])).shape
    ([1, 2], torch.Size([2, 2, 4]))
    """

    def __init__(
        self,
        W_enc: torch.Tensor,
        W_dec: Sequence[torch.Tensor] | None,
        b_enc: torch.Tensor,
        b_dec: torch.Tensor,
        *,
        threshold: torch.Tensor | None = None,
        W_skip: torch.Tensor | None = None,
        activation: str = "relu",
        k: int | None = None,
        decoder_reader: DecoderReader | None = None,
        input_site: str = "ln2.hook_normalized",
        output_site: str = "hook_mlp_out",
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if W_enc.ndim != 3:
            raise ValueError(
                f"W_enc has shape {tuple(W_enc.shape)}; expected [n_layers, d_transcoder, d_model]"
            )
        self.n_layers, self.d_transcoder, self.d_model = W_enc.shape
        n, d_tc, d = W_enc.shape
        self.layers = list(range(n))
        tensors = dict(W_enc=W_enc, b_enc=b_enc, b_dec=b_dec, threshold=threshold, W_skip=W_skip)
        self._set_common(tensors, activation, k, (input_site, output_site), metadata)
        if (W_dec is None) == (decoder_reader is None):
            raise ValueError(
                "pass exactly one of W_dec (the decoders) and decoder_reader (to read them lazily)"
            )
        self.decoder_reader = decoder_reader
        self.W_dec = None if W_dec is None else nn.ParameterList(_decoders(W_dec, n, d_tc, d))

    @property
    def lazy(self) -> bool:
        """Whether decoder rows are read from files on demand."""
        return self.W_dec is None

    def output_layers(self, layer: int) -> list[int]:
        self.check_layer(layer)
        return list(range(layer, self.n_layers))

    def pre_acts(self, x: torch.Tensor, layer: int) -> torch.Tensor:
        self.check_layer(layer)
        self._check_width(x, self.d_model, f"the input at layer {layer}", "d_model")
        return x.to(self.W_enc.dtype) @ self.W_enc[layer].T + self.b_enc[layer]  # [..., d_transcoder]

    def threshold(self, layer: int) -> torch.Tensor | None:
        self.check_layer(layer)
        return None if self.thresholds is None else self.thresholds[layer]

    def encoder(self, layer: int, features: torch.Tensor) -> torch.Tensor:
        self.check_layer(layer)
        w = self.W_enc[layer]  # [d_transcoder, d_model]
        return w[features.to(w.device)]  # [n_features, d_model]

    def decoder(self, layer: int, features: torch.Tensor | None = None) -> torch.Tensor:
        self.check_layer(layer)
        if self.W_dec is None:
            rows = self.decoder_reader(layer, None if features is None else features.cpu())
            return rows.to(self.b_dec.device, self.b_dec.dtype)  # [n_features, n_out, d_model]
        w = self.W_dec[layer]  # [d_transcoder, n_layers - layer, d_model]
        return w if features is None else w[features.to(w.device)]

    def decoder_bias(self, out_layer: int) -> torch.Tensor:
        return self.b_dec[out_layer]

    def skip(self, x: torch.Tensor, layer: int) -> torch.Tensor | None:
        if self.W_skip is None:
            return None
        self.check_layer(layer)
        self._check_width(x, self.d_model, f"the input at layer {layer}", "d_model")
        return x.to(self.W_skip.dtype) @ self.W_skip[layer].T  # [..., d_model]


def _decoders(W_dec: Sequence[torch.Tensor], n: int, d_tc: int, d: int) -> list[nn.Parameter]:
    if len(W_dec) != n:
        raise ValueError(f"W_dec has {len(W_dec)} tensors; expected one per layer, {n}")
    out = []
    for i, w in enumerate(W_dec):
        if tuple(w.shape) != (d_tc, n - i, d):
            raise ValueError(
                f"W_dec[{i}] has shape {tuple(w.shape)}; expected [{d_tc}, {n - i}, {d}] "
                "(d_transcoder, n_layers - layer, d_model)"
            )
        out.append(nn.Parameter(w.detach().clone()))
    return out
