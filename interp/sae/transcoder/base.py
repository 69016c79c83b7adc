"""What every transcoder is: per layer, the hook it reads, the hooks it writes, features, decoders, skip.

A transcoder reads one hook of a layer (``input_hook``, for MLP transcoders the MLP's input) and writes the
output hook (``output_hook``, the MLP's output) of that layer, or, for a cross-layer transcoder, of that layer
and every later one (``output_layers``): it is a :class:`~interp.dictionary.SparseDictionary`.
:class:`Transcoder` holds what both kinds share, written once over the methods a kind provides
(``output_layers``, ``pre_acts``, ``encoder``, ``threshold``, ``decoder``, ``decoder_bias``, ``skip``); a
per-layer set (:class:`~interp.sae.transcoder.TranscoderSet`) and a cross-layer transcoder
(:class:`~interp.sae.transcoder.CrossLayerTranscoder`) differ only in which source layers write to an output
layer and how their decoders are stored.

Conventions (circuit-tracer's, so files map without transposes): encoder rows ``W_enc [d_transcoder,
d_model]``, decoder rows ``W_dec [d_transcoder, d_model]`` (a CLT: ``[d_transcoder, n_out, d_model]``), and the
skip connection ``W_skip [d_model_out, d_model_in]`` adding ``x @ W_skip.T``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from hooks import HookPoint
from interp.dictionary import sources, written_layers
from interp.sae.activation import activate, check_activation
from interp.sae.latents import Code, Latents, Run
from interp.sae.module import SAE_HOOKS
from interp.sae.transcoder.layer_tensors import layer_parameter


class Transcoder(nn.Module):
    """The interface shared by :class:`TranscoderSet` and :class:`CrossLayerTranscoder`.

    Attributes:
        n_layers: layers of the model the transcoder was made for.
        d_model: width of the stream read and written.
        d_transcoder: features per layer.
        layers: the model layers that have features, sorted.
        activation: ``relu``, ``jumprelu``, ``topk`` or ``batchtopk`` (see :mod:`interp.sae.activation`).
        k: features per token for ``topk`` and ``batchtopk``; else ``None``.
        input_site, output_site: the hook names inside a block, e.g. ``ln2.hook_normalized`` and
            ``hook_mlp_out``; ``input_hook(layer)`` is ``blocks.{layer}.{input_site}``.
        metadata: what the files recorded (``format``, the TransformerLens hook names), kept for saving.
    """

    n_layers: int
    d_model: int
    d_transcoder: int
    layers: list[int]
    activation: str
    k: int | None
    input_site: str
    output_site: str
    metadata: dict

    rectify = False
    """TopK and JumpReLU keep values as they are, without a ReLU, as circuit-tracer does
    (:mod:`interp.sae.activation`)."""

    # -- what a kind provides -----------------------------------------------------------------------------

    def output_layers(self, layer: int) -> list[int]:
        """The layers whose output hook features of ``layer`` write to."""
        raise NotImplementedError

    def pre_acts(self, x: torch.Tensor, layer: int) -> torch.Tensor:
        """Encoder pre-activations ``[..., d_transcoder]`` of inputs ``[..., d_model]`` at ``layer``."""
        raise NotImplementedError

    def encoder(self, layer: int, features: torch.Tensor) -> torch.Tensor:
        """Encoder rows ``[n_features, d_model]`` of ``features`` (a LongTensor) of ``layer``: the derivative of
        each feature's pre-activation with respect to the input (``pre_acts`` is affine)."""
        raise NotImplementedError

    def threshold(self, layer: int) -> torch.Tensor | None:
        """The JumpReLU threshold ``[d_transcoder]`` of ``layer``, or ``None``."""
        raise NotImplementedError

    def decoder(self, layer: int, features: torch.Tensor | None = None) -> torch.Tensor:
        """Decoder rows ``[n_features, n_out, d_model]`` of ``features`` (a LongTensor; ``None``: all) of
        ``layer``, one slice per layer of ``output_layers(layer)``."""
        raise NotImplementedError

    def decoder_bias(self, out_layer: int) -> torch.Tensor:
        """The bias ``b_dec [d_model]`` added once to the output at ``out_layer``."""
        raise NotImplementedError

    def skip(self, x: torch.Tensor, layer: int) -> torch.Tensor | None:
        """The skip connection's write ``x @ W_skip.T`` into ``layer``'s output, or ``None`` without one."""
        raise NotImplementedError

    # -- shared -------------------------------------------------------------------------------------------

    def _set_common(
        self,
        tensors: dict[str, Any],
        activation: str,
        k: int | None,
        sites: tuple[str, str],
        metadata: dict[str, Any] | None,
    ) -> None:
        """Check and store what both kinds hold per layer (encoder, biases, threshold, skip) and settings."""
        d_tc, d = self.d_transcoder, self.d_model
        self.W_enc = layer_parameter("W_enc", tensors["W_enc"], self.layers, (d_tc, d))
        self.b_enc = layer_parameter("b_enc", tensors["b_enc"], self.layers, (d_tc,))
        self.b_dec = layer_parameter("b_dec", tensors["b_dec"], self.layers, (d,))
        self.thresholds = layer_parameter("threshold", tensors["threshold"], self.layers, (d_tc,))
        self.W_skip = layer_parameter("W_skip", tensors["W_skip"], self.layers, (d, d))
        check_activation(activation, k, tensors["threshold"] is not None)
        self.activation, self.k = activation, k
        self.input_site, self.output_site = sites
        self.metadata = dict(metadata or {})

    @property
    def d_in(self) -> int:
        """Width of the input hook: ``d_model``."""
        return self.d_model

    @property
    def d_out(self) -> int:
        """Width of the output hook: ``d_model``."""
        return self.d_model

    def n_features(self, layer: int) -> int:
        """Features of ``layer``: ``d_transcoder``."""
        self.check_layer(layer)
        return self.d_transcoder

    def activation_of(self, layer: int) -> str:
        """The activation the features of ``layer`` run (the same at every layer)."""
        self.check_layer(layer)
        return self.activation

    @property
    def has_skip(self) -> bool:
        """Whether the transcoder has a linear skip connection."""
        return getattr(self, "W_skip", None) is not None

    def input_hook(self, layer: int) -> str:
        """The interp hook the features of ``layer`` read, e.g. ``blocks.3.ln2.hook_normalized``."""
        self.check_layer(layer)
        return f"blocks.{layer}.{self.input_site}"

    def output_hook(self, layer: int) -> str:
        """The interp hook written at ``layer``, e.g. ``blocks.3.hook_mlp_out``."""
        self.check_layer(layer, writes=True)
        return f"blocks.{layer}.{self.output_site}"

    def encode(self, x: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(pre, acts)``, both ``[..., d_transcoder]``, for inputs ``x [..., d_model]`` at ``layer``."""
        pre = self.pre_acts(x, layer)
        return pre, self.activate(pre, layer)

    def activate(self, pre: torch.Tensor, layer: int) -> torch.Tensor:
        """The activations ``[..., d_transcoder]`` of pre-activations ``pre`` of ``layer``."""
        return activate(pre, self.activation, rectify=self.rectify, k=self.k, threshold=self.threshold(layer))

    def decode(self, acts: Mapping[int, torch.Tensor], out_layer: int) -> torch.Tensor:
        """The output ``[..., d_model]`` at ``out_layer``: every source layer's decoder write plus ``b_dec``
        (no skip term; :meth:`reconstruct` adds it).

        Args:
            acts: source layer -> activations ``[..., d_transcoder]``; must hold every layer of
                ``interp.dictionary.sources(self, out_layer)`` (other layers are not read).
            out_layer: the layer whose output is decoded.
        """
        self.check_layer(out_layer, writes=True)
        feeding = sources(self, out_layer)
        missing = [s for s in feeding if s not in acts]
        if missing:
            raise KeyError(
                f"decoding layer {out_layer} needs the activations of layers {feeding}; missing {missing}"
            )
        out = None
        for s in feeding:
            a = acts[s]
            self._check_width(a, self.d_transcoder, f"the activations of layer {s}", "d_transcoder")
            w = self.decoder(s)[:, self.output_layers(s).index(out_layer)]  # [d_transcoder, d_model]
            write = a.to(w.dtype) @ w  # [..., d_model]
            out = write if out is None else out + write
        return out + self.decoder_bias(out_layer)

    def reconstruct(self, inputs: Mapping[int, torch.Tensor]) -> dict[int, torch.Tensor]:
        """Outputs ``{layer: [..., d_model]}`` (decode plus skip) at every layer that ``inputs`` feed.

        Args:
            inputs: layer -> the input hook's tensor ``[..., d_model]``. A per-layer set decodes each given
                layer; a cross-layer transcoder needs the inputs of every transcoder layer up to the highest
                given (each output reads all earlier layers).
        """
        bad = sorted(set(inputs) - set(self.layers))
        if bad:
            raise KeyError(f"layers {bad} have no transcoder; this one has features at layers {self.layers}")
        if not inputs:
            raise ValueError("reconstruct needs the input of at least one layer")
        acts = {layer: self.encode(x, layer)[1] for layer, x in inputs.items()}
        outs: dict[int, torch.Tensor] = {}
        for out_layer in sorted(inputs):
            out = self.decode(acts, out_layer)
            skip = self.skip(inputs[out_layer], out_layer)
            outs[out_layer] = out if skip is None else out + skip
        return outs

    # -- what a splice needs (interp.sae.splice) -----------------------------------------------------------

    @property
    def device(self) -> torch.device:
        """Where the encoder's parameters are (the device a splice and an evaluation compute on)."""
        return self.b_enc.device

    def hook_points(self, layer: int) -> dict[str, HookPoint]:
        """New hook points for the features of ``layer`` (``hook_sae_input`` ... ``hook_sae_output``), one set per
        splice."""
        self.check_layer(layer)
        return {name: HookPoint() for name in SAE_HOOKS}

    def hooked_encode(self, x: torch.Tensor, layer: int, points: dict[str, HookPoint], run: Run) -> Code:
        """The features of ``layer`` from its input hook's tensor, through ``points``' input and latent hook
        points (past them unless ``run.hooked``); the code's context is the input the skip term reads."""
        x_in = x.to(self.device)
        sae_in = run(points["hook_sae_input"], x_in)
        pre = run(points["hook_sae_acts_pre"], self.pre_acts(sae_in, layer))
        acts = run(points["hook_sae_acts_post"], self.activate(pre, layer))
        return Code(Latents(dense=acts), sae_in)

    def hooked_decode(
        self, codes: Mapping[int, Code], out_layer: int, points: dict[str, HookPoint], run: Run
    ) -> torch.Tensor:
        """The output at ``out_layer`` (every source layer's write, ``b_dec`` and the skip term of that layer's
        input) through ``points``' ``hook_sae_recons``; ``codes`` holds every layer of ``sources(self,
        out_layer)``."""
        acts = {s: code.latents.to_dense(self.d_transcoder) for s, code in codes.items()}
        out = self.decode(acts, out_layer)
        skip = self.skip(codes[out_layer].context, out_layer)
        return run(points["hook_sae_recons"], out if skip is None else out + skip)

    def check_layer(self, layer: int, *, writes: bool = False) -> None:
        """Raise when ``layer`` has no features (or, ``writes``, no output this transcoder writes)."""
        if isinstance(layer, bool) or not isinstance(layer, int):
            raise TypeError(f"layer must be an int, got {type(layer).__name__} {layer!r}")
        ok = layer in (written_layers(self) if writes else self.layers)
        if not ok:
            what = "writes no output at" if writes else "has no features at"
            raise KeyError(f"the transcoder {what} layer {layer}; its layers are {self.layers}")

    def _check_width(self, x: torch.Tensor, width: int, what: str, name: str) -> None:
        if x.shape[-1] != width:
            raise ValueError(
                f"{what} has last dimension {x.shape[-1]} (shape {tuple(x.shape)}); the transcoder expects "
                f"{name}={width}"
            )

    def extra_repr(self) -> str:
        k = f", k={self.k}" if self.k is not None else ""
        return (
            f"{self.activation}{k}, layers={self.layers}, d_model={self.d_model}, "
            f"d_transcoder={self.d_transcoder}, {self.input_site!r} -> {self.output_site!r}"
        )
