"""CrossLayerTranscoder: features read one layer's input and write the outputs of that layer and every later one.

A feature of layer ``i`` has one encoder row and ``n_layers - i`` decoder rows, slice ``j`` writing to layer
``i + j`` (Ameisen et al. 2025, "Circuit Tracing"; circuit-tracer's layout). The output at layer ``L`` sums
the writes of every layer up to ``L``. Decoders are either parameters or read on demand from files
(``decoder_reader``), so a CLT too large for memory still gives the rows an attribution graph needs; the rows
read are kept for the next forward in a cache of bounded size (:mod:`.decoder_cache`, ``decoder_cache_bytes``).

Decoding an output layer with activations that need no gradient (under ``torch.no_grad``, as a spliced model
runs for inference and an attribution graph finds its sources) reads only the decoder rows of the features
active at some position: ``acts[..., active] @ rows[active]``, the same sum as the dense product less its zero
terms, for a loaded CLT and a lazy one alike, so the two give the same numbers bit for bit. Activations with a
gradient go through the dense product, since the gradient of an inactive feature's activation (what
attribution patching reads) needs every row.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from interp.dictionary import sources
from interp.sae.transcoder.base import Transcoder
from interp.sae.transcoder.decoder_cache import DEFAULT_MAX_BYTES, DecoderCache

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
        decoder_cache_bytes: the cap on the decoder rows a lazy CLT keeps in memory (default 2 GiB; ``0``
            keeps none); ``clt.decoder_cache.max_bytes`` changes it later.
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
        decoder_cache_bytes: int = DEFAULT_MAX_BYTES,
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
        self._active_of: dict[int, tuple[weakref.ref, int, torch.Tensor]] = {}
        self.decoder_cache = (
            None if decoder_reader is None else DecoderCache(self._read, d_tc, decoder_cache_bytes)
        )

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_active_of": {}}  # weak references do not pickle; the memo is rebuilt

    def _read(self, layer: int, features: torch.Tensor | None) -> torch.Tensor:
        return self.decoder_reader(layer, features).to(self.b_dec.device, self.b_dec.dtype)

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
            rows = self.decoder_cache.rows(layer, None if features is None else features.cpu())
            return rows.to(self.b_dec.device, self.b_dec.dtype)  # [n_features, n_out, d_model]
        w = self.W_dec[layer]  # [d_transcoder, n_layers - layer, d_model]
        return w if features is None else w[features.to(w.device)]

    def decode(self, acts: Mapping[int, torch.Tensor], out_layer: int) -> torch.Tensor:
        """As :meth:`Transcoder.decode`; through the active features' rows alone when no activation needs a
        gradient (see the module docstring)."""
        self.check_layer(out_layer, writes=True)
        feeding = sources(self, out_layer)
        if any(s in acts and acts[s].requires_grad for s in feeding) or any(s not in acts for s in feeding):
            return super().decode(acts, out_layer)  # the dense product (and its error for a missing layer)
        out = None
        for s in feeding:
            a = acts[s]
            self._check_width(a, self.d_transcoder, f"the activations of layer {s}", "d_transcoder")
            active = self._active(s, a)  # [m]
            rows = self._rows(s, out_layer - s, active)  # [m, d_model]
            write = a.index_select(-1, active.to(a.device)).to(rows.dtype) @ rows  # [..., d_model]
            out = write if out is None else out + write
        return out + self.decoder_bias(out_layer)

    def _active(self, layer: int, acts: torch.Tensor) -> torch.Tensor:
        """The features active at some position of ``acts``, remembered while ``acts`` lives unchanged: a
        spliced forward decodes each output layer from the same activations of every earlier layer."""
        known = self._active_of.get(layer)
        if known is not None and known[0]() is acts and known[1] == acts._version:
            return known[2]
        active = acts.reshape(-1, self.d_transcoder).any(0).nonzero()[:, 0]
        self._active_of[layer] = (weakref.ref(acts), acts._version, active)
        return active

    def _rows(self, layer: int, out: int, features: torch.Tensor) -> torch.Tensor:
        """``[n_features, d_model]``: the rows of ``features`` of ``layer`` into output slice ``out``."""
        if self.W_dec is None:
            return self.decoder_cache.rows(layer, features.cpu(), out).to(self.b_dec.device, self.b_dec.dtype)
        w = self.W_dec[layer]
        return w[features.to(w.device), out]

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
