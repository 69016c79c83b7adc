"""The replacement model: transcoders spliced in place of the MLPs, through the model's own hooks.

``with model.transcoders(tc):`` reads each layer's input at ``tc.input_hook(L)`` (pinned last there, so it
sees every edit made at that hook, as the MLP does) and replaces ``tc.output_hook(L)`` (pinned first, so other
functions there see and may edit the replacement) with the sum of every source layer's decoder write, ``b_dec``
and the skip term. Features are computed from each layer's own input when the forward reaches it, so the
features of a cross-layer transcoder at layer ``L`` see the replacement's outputs of the layers before.

The hook points are the SAE hooks, listed under the model's names at the output hook of the features' layer
``HOOK = tc.output_hook(L)``: ``HOOK.hook_sae_input`` (the input hook's tensor), ``HOOK.hook_sae_acts_pre``,
``HOOK.hook_sae_acts_post`` (the features of layer ``L``; they come right after the input hook in the forward
order, since that is when they are computed), and after ``HOOK``: ``HOOK.hook_sae_recons`` (the whole
reconstruction written at ``L``: every source's decoders, ``b_dec`` and skip), ``HOOK.hook_sae_error`` (with
``error=True``) and ``HOOK.hook_sae_output``.

With ``error=True`` the output is the model's MLP output whenever nothing edits a transcoder hook, bit for
bit, and otherwise ``recons + error``, with ``error = mlp_out - recons_clean`` computed from unedited features;
the value is formed by the SAE splice's :func:`~interp.sae.splice.with_error`, so that gradients reach the error
node.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from hooks import HookPoint
from interp.dictionary import check_fits, sources
from interp.sae.module import SAE_HOOKS
from interp.sae.splice import with_error
from interp.sae.transcoder.base import Transcoder

_INPUT_SIDE = ("hook_sae_input", "hook_sae_acts_pre", "hook_sae_acts_post")
_OUTPUT_SIDE = ("hook_sae_recons", "hook_sae_error", "hook_sae_output")


@contextlib.contextmanager
def spliced_transcoders(model: Any, tc: Transcoder, *, error: bool = False) -> Iterator[Any]:
    """Splice ``tc`` into ``model`` for the ``with`` block (see the module docstring).

    Args:
        model: a :class:`~interp.HookedTransformer` (or any :class:`hooks.HookedModule` with the hooks).
        tc: a :class:`TranscoderSet` or :class:`CrossLayerTranscoder`.
        error: add each layer's reconstruction error back, so outputs are unchanged unless edited.

    Raises:
        TypeError: ``tc`` is not a transcoder. UnknownHookError, ValueError: from
        :func:`interp.dictionary.check_fits`, before anything is attached.
    """
    if not isinstance(tc, Transcoder):
        raise TypeError(
            f"expected a TranscoderSet or CrossLayerTranscoder, got {type(tc).__name__} (splice SAEs with "
            "model.saes)"
        )
    check_fits(model, tc)
    names = [h for h in SAE_HOOKS if h != "hook_sae_error" or error]
    points = {layer: {h: HookPoint() for h in names} for layer in tc.layers}
    run = _Replacement(tc, points, error)
    with contextlib.ExitStack() as stack:
        for layer in tc.layers:
            out, inp = tc.output_hook(layer), tc.input_hook(layer)
            side = {f"{out}.{h}": points[layer][h] for h in _INPUT_SIDE}
            stack.enter_context(model.mounted(side, inp))
            side = {f"{out}.{h}": points[layer][h] for h in _OUTPUT_SIDE if h in points[layer]}
            stack.enter_context(model.mounted(side, out))
            stack.enter_context(model.hooks([(inp, run.reader(layer))], order="last"))
            stack.enter_context(model.hooks([(out, run.writer(layer))], order="first"))
        yield model


class _Replacement:
    """The per-forward state of a splice: each layer's input and features, from its input hook to its outputs."""

    def __init__(self, tc: Transcoder, points: dict[int, dict[str, HookPoint]], error: bool) -> None:
        self.tc, self.points, self.error = tc, points, error
        self.all_points = [p for layer in points.values() for p in layer.values()]
        self.state: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        self.last_use = {s: max(tc.output_layers(s)) for s in tc.layers}

    def idle(self) -> bool:
        """With the error term and nothing attached to a transcoder hook, outputs are the model's own."""
        return self.error and not any(p.active for p in self.all_points)

    def reader(self, layer: int):
        tc, p = self.tc, self.points[layer]

        def read(x: torch.Tensor, hook: HookPoint) -> None:
            if self.idle():
                return None
            x_in = x.to(tc.b_enc.device)
            sae_in = p["hook_sae_input"](x_in)
            pre = p["hook_sae_acts_pre"](tc.pre_acts(sae_in, layer))
            acts = p["hook_sae_acts_post"](tc.activate(pre, layer))
            edited = any(p[h].active for h in _INPUT_SIDE)
            clean = tc.encode(x_in, layer)[1] if self.error and edited else acts
            self.state[layer] = (x_in, sae_in, acts, clean)
            return None

        return read

    def writer(self, layer: int):
        tc, p = self.tc, self.points[layer]

        def write(actual: torch.Tensor, hook: HookPoint) -> torch.Tensor | None:
            if self.idle():
                return None
            feeding = sources(tc, layer)
            missing = [s for s in feeding if s not in self.state]
            if missing:
                raise RuntimeError(
                    f"the transcoder inputs of layers {missing} ({tc.input_hook(missing[0])!r}) were not computed "
                    f"before {hook.name!r} in this forward pass"
                )
            x_in, sae_in, _, _ = self.state[layer]
            raw = _output(tc, {s: self.state[s][2] for s in feeding}, layer, sae_in)
            recons = p["hook_sae_recons"](raw)
            if not self.error:
                out = recons
            else:
                edited = any(self.points[s][h].active for s in feeding for h in _INPUT_SIDE)
                clean = _output(tc, {s: self.state[s][3] for s in feeding}, layer, x_in) if edited else raw
                out = with_error(actual, recons, clean, p["hook_sae_error"])
            for s in feeding:
                if self.last_use[s] == layer:
                    del self.state[s]
            return p["hook_sae_output"](out).to(actual.device, actual.dtype)

        return write


def _output(tc: Transcoder, acts: dict[int, torch.Tensor], layer: int, x: torch.Tensor) -> torch.Tensor:
    out = tc.decode(acts, layer)
    skip = tc.skip(x, layer)
    return out if skip is None else out + skip
