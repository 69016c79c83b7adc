"""Lorsa: Lorsa layers by model layer, as a :class:`~interp.dictionary.SparseDictionary`.

Each layer's features are its heads: they read the attention block's input (``input_hook(L)``, by default
``blocks.L.ln1.hook_normalized``, the normalised stream the model's attention reads) and write its output
(``blocks.L.hook_attn_out``). What sets them apart from a transcoder's features is that a head's activation at
a query reads every earlier position through its QK pattern, so inputs are whole sequences ``[batch, pos,
d_model]`` (:attr:`reads_sequences`), never a flat list of tokens; ``valid [batch, pos]`` marks real tokens in
a padded batch.

The protocol's linear pieces hold with the pattern fixed: ``encoder(L, f)`` is head ``f``'s value read
``W_V[f]`` (its pre-activation at a query is that read at each key, weighted by the pattern, plus ``b_V[f]``),
``decoder(L, f)`` its output direction ``W_O[f]``. What a graph needs beyond the protocol is here too:
:meth:`Lorsa.pattern` and :meth:`Lorsa.queries_keys` for a prompt, and :meth:`Lorsa.qk_head`, the QK head a
feature's pattern comes from.

Spliced into a model (:func:`interp.sae.spliced`, ``model.saes``), each layer's hook points are the SAE ones
under the output hook (``blocks.L.hook_attn_out.hook_sae_acts_post`` ...) and four of its own, listed after
the input hook in the forward order: ``hook_lorsa_q``, ``hook_lorsa_k`` (``[batch, pos, qk_head, d_qk_head]``,
after the q/k norm and rotary), ``hook_lorsa_v`` (``[batch, pos, head]``) and ``hook_lorsa_pattern`` (``[batch,
qk_head, query, key]``), formed only when something hooks it. A pattern held at cached values is a hook there
returning them. The splice watches the model's calls for padding (:mod:`.sequence`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import nn

from hooks import HookPoint
from interp.sae.latents import Code, Latents, Run
from interp.sae.lorsa.layer import LorsaLayer
from interp.sae.lorsa.sequence import ForwardTokens
from interp.sae.module import SAE_HOOKS

LORSA_HOOKS = ("hook_lorsa_q", "hook_lorsa_k", "hook_lorsa_v", "hook_lorsa_pattern")
"""A spliced layer's own hook points, beyond the SAE ones (see the module docstring)."""


class Lorsa(nn.Module):
    """Lorsa layers at some model layers.

    Args:
        layers: model layer -> :class:`LorsaLayer` (all of one ``d_model``).
        metadata: what the files recorded (format, the hook names they used), kept for saving.

    >>> from interp.sae.lorsa.config import LorsaConfig
    >>> lorsa = Lorsa({2: LorsaLayer(LorsaConfig(d_model=8, n_heads=6, n_qk_heads=2, d_qk_head=4, k=2))})
    >>> lorsa.input_hook(2), lorsa.output_hook(2), lorsa.n_features(2), lorsa.qk_head(2, torch.tensor([0, 5]))
    ('blocks.2.ln1.hook_normalized', 'blocks.2.hook_attn_out', 6, tensor([0, 1]))
    """

    reads_sequences = True
    """Inputs are ``[batch, pos, d_model]`` sequences: a head attends over earlier positions."""

    def __init__(self, layers: Mapping[int, LorsaLayer], *, metadata: dict[str, Any] | None = None) -> None:
        super().__init__()
        if not layers:
            raise ValueError("a Lorsa needs at least one layer")
        widths = {layer.cfg.d_model for layer in layers.values()}
        if len(widths) > 1:
            raise ValueError(
                f"the Lorsa layers read streams of different widths {sorted(widths)}; give one model's"
            )
        for key, layer in layers.items():
            if isinstance(key, bool) or not isinstance(key, int) or key < 0:
                raise ValueError(f"Lorsa layers are keyed by model layer (an int >= 0), got {key!r}")
            if not isinstance(layer, LorsaLayer):
                raise TypeError(f"layer {key} is a {type(layer).__name__}; expected a LorsaLayer")
        self.layers = sorted(layers)
        self.by_layer = nn.ModuleDict({str(key): layers[key] for key in self.layers})
        self.metadata = dict(metadata or {})
        self.forward_tokens = ForwardTokens()

    def at(self, layers: list[int]) -> Lorsa:
        """The Lorsa of ``layers`` alone (the same layer modules, not copies): Lorsa in place of attention at
        chosen layers only."""
        return Lorsa({layer: self.layer(layer) for layer in layers}, metadata=self.metadata)

    # -- the SparseDictionary protocol ----------------------------------------------------------------------

    @property
    def d_in(self) -> int:
        """Width of the input hook: ``d_model``."""
        return self.layer(self.layers[0]).cfg.d_model

    @property
    def d_out(self) -> int:
        """Width of the output hook: ``d_model``."""
        return self.d_in

    @property
    def device(self) -> torch.device:
        """Where the weights are."""
        return self.layer(self.layers[0]).W_O.device

    def layer(self, layer: int) -> LorsaLayer:
        """The :class:`LorsaLayer` at model layer ``layer``."""
        self.check_layer(layer)
        return self.by_layer[str(layer)]

    def n_features(self, layer: int) -> int:
        """Heads at ``layer``."""
        return self.layer(layer).cfg.n_heads

    def input_hook(self, layer: int) -> str:
        """The hook the heads of ``layer`` read, e.g. ``blocks.3.ln1.hook_normalized``."""
        return f"blocks.{layer}.{self.layer(layer).cfg.input_site}"

    def output_layers(self, layer: int) -> list[int]:
        """``[layer]``: a Lorsa layer writes its own attention output."""
        self.check_layer(layer)
        return [layer]

    def output_hook(self, out_layer: int) -> str:
        """The hook written at ``out_layer``, e.g. ``blocks.3.hook_attn_out``."""
        return f"blocks.{out_layer}.{self.layer(out_layer).cfg.output_site}"

    def encode(
        self, x: torch.Tensor, layer: int, valid: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(pre, acts)``, both ``[batch, pos, n_heads]``: each head's value mixture ``z`` and its activation.

        Args:
            x: the input hook's tensor ``[batch, pos, d_model]``, whole sequences.
            valid: ``[batch, pos]`` True at real tokens (``None``: all real).
        """
        x, valid = self._checked(x, valid, layer)
        return self.layer(layer).encode(x, valid)

    def encoder(self, layer: int, features: torch.Tensor) -> torch.Tensor:
        """``[n, d_model]``: each head's value read ``W_V[f]``, the derivative of its pre-activation at a query
        by the input at a key, per unit of that key's pattern weight."""
        w = self.layer(layer).W_V
        return w[features.to(w.device)]

    def decoder(self, layer: int, features: torch.Tensor | None = None) -> torch.Tensor:
        """``[n, 1, d_model]``: each head's output direction ``W_O[f]``."""
        w = self.layer(layer).W_O
        if features is not None:
            w = w[features.to(w.device)]
        return w[:, None, :]

    def decoder_bias(self, out_layer: int) -> torch.Tensor:
        """``[d_model]``: ``b_O``, added once to the output."""
        return self.layer(out_layer).b_O

    def skip(self, x: torch.Tensor, out_layer: int) -> None:
        """A Lorsa has no skip term."""
        self.check_layer(out_layer)
        return None

    def decode(self, acts: Mapping[int, torch.Tensor], out_layer: int) -> torch.Tensor:
        """The output ``[..., d_model]`` at ``out_layer`` from that layer's activations ``[..., n_heads]``."""
        if out_layer not in acts:
            raise KeyError(
                f"decoding layer {out_layer} needs its own activations; given layers {sorted(acts)}"
            )
        layer = self.layer(out_layer)
        a = acts[out_layer]
        if a.shape[-1] != layer.cfg.n_heads:
            raise ValueError(
                f"the activations of layer {out_layer} have last dimension {a.shape[-1]} (shape {tuple(a.shape)}); "
                f"the layer has n_heads={layer.cfg.n_heads}"
            )
        return layer.decode(a)

    def reconstruct(
        self, inputs: Mapping[int, torch.Tensor], valid: torch.Tensor | None = None
    ) -> dict[int, torch.Tensor]:
        """``{layer: [batch, pos, d_model]}``: each given layer's attention output from its input sequences."""
        if not inputs:
            raise ValueError("reconstruct needs the input of at least one layer")
        bad = sorted(set(inputs) - set(self.layers))
        if bad:
            raise KeyError(f"layers {bad} have no Lorsa; this one has layers {self.layers}")
        return {
            layer: self.decode({layer: self.encode(x, layer, valid)[1]}, layer) for layer, x in inputs.items()
        }

    # -- what graphs read beyond the protocol ----------------------------------------------------------------

    def qk_head(self, layer: int, features: torch.Tensor) -> torch.Tensor:
        """The QK head whose pattern each of ``features`` (a LongTensor of heads) mixes its values by."""
        return features // self.layer(layer).cfg.group_size

    def queries_keys(
        self, x: torch.Tensor, layer: int, valid: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``q``, ``k`` ``[batch, pos, qk_head, d_qk_head]`` of ``layer`` (after the q/k norm and rotary)."""
        x, valid = self._checked(x, valid, layer)
        return self.layer(layer).queries_keys(x, valid)

    def pattern(self, x: torch.Tensor, layer: int, valid: torch.Tensor | None = None) -> torch.Tensor:
        """``[batch, qk_head, query, key]``: the attention of each QK head of ``layer`` on these sequences."""
        x, valid = self._checked(x, valid, layer)
        return self.layer(layer).pattern(x, valid)

    # -- what a splice calls (interp.sae.splice) ----------------------------------------------------------------

    def hook_points(self, layer: int) -> dict[str, HookPoint]:
        """New hook points for ``layer``, one set per splice: the SAE ones with Lorsa's own after the input."""
        self.check_layer(layer)
        names = [*SAE_HOOKS[:1], *LORSA_HOOKS, *SAE_HOOKS[1:]]
        return {name: HookPoint() for name in names}

    @contextlib.contextmanager
    def spliced_into(self, model: Any) -> Iterator[None]:
        """While spliced: the real tokens of each of ``model``'s forward calls (:mod:`.sequence`)."""
        with self.forward_tokens.watching(model):
            yield

    def hooked_encode(self, x: torch.Tensor, layer: int, points: dict[str, HookPoint], run: Run) -> Code:
        """The heads of ``layer`` from the input hook's tensor, through ``points`` (past them unless
        ``run.hooked``); the pattern is formed only when something listens at ``hook_lorsa_pattern``."""
        module = self.layer(layer)
        x_in, valid = self._checked(x.to(self.device), self.forward_tokens.of(x), layer)
        sae_in = run(points["hook_sae_input"], x_in)

        def tap(name: str, tensor: torch.Tensor) -> torch.Tensor:
            return run(points[f"hook_lorsa_{name}"], tensor)

        z = module.pre_acts(sae_in, valid, tap=tap, explicit=run.listens(points["hook_lorsa_pattern"]))
        pre = run(points["hook_sae_acts_pre"], z)
        return Code(Latents(dense=run(points["hook_sae_acts_post"], module.activate(pre))), None)

    def hooked_decode(
        self, codes: Mapping[int, Code], out_layer: int, points: dict[str, HookPoint], run: Run
    ) -> torch.Tensor:
        """The output at ``out_layer`` through ``points``' ``hook_sae_recons``."""
        acts = codes[out_layer].latents.to_dense(self.n_features(out_layer))
        return run(points["hook_sae_recons"], self.decode({out_layer: acts}, out_layer))

    # -- checks -----------------------------------------------------------------------------------------------

    def check_layer(self, layer: int) -> None:
        """Raise when ``layer`` has no Lorsa."""
        if isinstance(layer, bool) or not isinstance(layer, int):
            raise TypeError(f"layer must be an int, got {type(layer).__name__} {layer!r}")
        if str(layer) not in self.by_layer:
            raise KeyError(f"the Lorsa has no heads at layer {layer}; its layers are {self.layers}")

    def _checked(
        self, x: torch.Tensor, valid: torch.Tensor | None, layer: int
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        d = self.layer(layer).cfg.d_model
        if x.ndim != 3 or x.shape[-1] != d:
            raise ValueError(
                f"a Lorsa reads whole sequences [batch, pos, d_model={d}]; got shape {tuple(x.shape)} (a flat list "
                "of tokens has no earlier positions to attend to: keep the batch and position axes)"
            )
        if valid is not None:
            if tuple(valid.shape) != tuple(x.shape[:2]):
                raise ValueError(
                    f"valid has shape {tuple(valid.shape)}; it must be [batch, pos] = {tuple(x.shape[:2])}"
                )
            valid = valid.to(x.device).bool()
            if bool(valid.all()):
                valid = None
        return x, valid

    def extra_repr(self) -> str:
        return f"layers={self.layers}, d_model={self.d_in}"
