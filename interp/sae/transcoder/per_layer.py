"""TranscoderSet: one transcoder per layer, each reading its layer's input hook and writing that layer's output.

The weights of every layer are stacked into one parameter per tensor (``W_enc [n, d_transcoder, d_model]``
for the ``n`` layers with features), so a set trains as one module and moves between devices at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from interp.sae.transcoder.base import Transcoder
from interp.sae.transcoder.layer_tensors import Tensors, layer_parameter, layers_of


class TranscoderSet(Transcoder):
    """Per-layer transcoders: features of layer ``L`` read ``input_hook(L)`` and write ``output_hook(L)``.

    Args:
        W_enc: ``[n, d_transcoder, d_model]`` stacked over ``layers``, or a dict layer -> ``[d_transcoder,
            d_model]`` (the same for every tensor below).
        W_dec: ``[n, d_transcoder, d_model]``.
        b_enc: ``[n, d_transcoder]``.
        b_dec: ``[n, d_model]``.
        threshold: ``[n, d_transcoder]``, for ``jumprelu``.
        W_skip: ``[n, d_model, d_model]`` (out, in): the skip connection adds ``x @ W_skip.T``.
        activation: ``relu``, ``jumprelu``, ``topk`` or ``batchtopk``.
        k: features per token for ``topk`` and ``batchtopk``.
        layers: the model layers of the stacked rows (default ``0..n-1``).
        n_layers: layers of the model (default ``max(layers) + 1``).
        input_site, output_site: hook names inside a block.
        metadata: what the files recorded (format, TransformerLens hook names), kept for saving.

    >>> tc = TranscoderSet(torch.randn(2, 8, 4), torch.randn(2, 8, 4), torch.zeros(2, 8), torch.zeros(2, 4))
    >>> tc.input_hook(1), tc.output_hook(1), tc.output_layers(1)
    ('blocks.1.ln2.hook_normalized', 'blocks.1.hook_mlp_out', [1])
    >>> tc.encode(torch.randn(3, 4), 0)[1].shape
    torch.Size([3, 8])
    """

    def __init__(
        self,
        W_enc: Tensors,
        W_dec: Tensors,
        b_enc: Tensors,
        b_dec: Tensors,
        *,
        threshold: Tensors | None = None,
        W_skip: Tensors | None = None,
        activation: str = "relu",
        k: int | None = None,
        layers: Sequence[int] | None = None,
        n_layers: int | None = None,
        input_site: str = "ln2.hook_normalized",
        output_site: str = "hook_mlp_out",
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.layers = layers_of(W_enc, layers)
        if not self.layers:
            raise ValueError("a TranscoderSet needs at least one layer")
        first = W_enc[self.layers[0]] if not isinstance(W_enc, torch.Tensor) else W_enc[0]
        if first.ndim != 2:
            raise ValueError(
                f"W_enc of one layer has shape {tuple(first.shape)}; expected [d_transcoder, d_model]"
            )
        self.d_transcoder, self.d_model = first.shape
        self.W_dec = layer_parameter("W_dec", W_dec, self.layers, (self.d_transcoder, self.d_model))
        tensors = dict(W_enc=W_enc, b_enc=b_enc, b_dec=b_dec, threshold=threshold, W_skip=W_skip)
        self._set_common(tensors, activation, k, (input_site, output_site), metadata)
        self.n_layers = max(self.layers) + 1 if n_layers is None else n_layers
        if self.n_layers <= max(self.layers):
            raise ValueError(f"n_layers={n_layers} but the set has features at layer {max(self.layers)}")
        self._row = {layer: i for i, layer in enumerate(self.layers)}

    def output_layers(self, layer: int) -> list[int]:
        self.check_layer(layer)
        return [layer]

    def pre_acts(self, x: torch.Tensor, layer: int) -> torch.Tensor:
        self._check_width(x, self.d_model, f"the input at layer {layer}", "d_model")
        i = self._index(layer)
        return x.to(self.W_enc.dtype) @ self.W_enc[i].T + self.b_enc[i]  # [..., d_transcoder]

    def threshold(self, layer: int) -> torch.Tensor | None:
        return None if self.thresholds is None else self.thresholds[self._index(layer)]

    def encoder(self, layer: int, features: torch.Tensor) -> torch.Tensor:
        w = self.W_enc[self._index(layer)]  # [d_transcoder, d_model]
        return w[features.to(w.device)]  # [n_features, d_model]

    def decoder(self, layer: int, features: torch.Tensor | None = None) -> torch.Tensor:
        w = self.W_dec[self._index(layer)]  # [d_transcoder, d_model]
        if features is not None:
            w = w[features.to(w.device)]
        return w[:, None, :]  # [n_features, 1, d_model]

    def decoder_bias(self, out_layer: int) -> torch.Tensor:
        return self.b_dec[self._index(out_layer)]

    def skip(self, x: torch.Tensor, layer: int) -> torch.Tensor | None:
        if self.W_skip is None:
            return None
        self._check_width(x, self.d_model, f"the input at layer {layer}", "d_model")
        return x.to(self.W_skip.dtype) @ self.W_skip[self._index(layer)].T  # [..., d_model]

    def _index(self, layer: int) -> int:
        self.check_layer(layer)
        return self._row[layer]
