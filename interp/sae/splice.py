"""Splicing: a sparse dictionary runs in place of the activations it writes, through the model's own hooks.

One function for every dictionary (:class:`~interp.dictionary.SparseDictionary`): ``model.saes([...])``,
``model.transcoders(tc)`` and :func:`spliced` are the same. For each layer ``L`` of a dictionary, with
``HOOK = output_hook(L)``:

- at ``input_hook(L)`` (a function pinned last there, so it sees every edit made at that hook, as the model's
  own layer does) the features of ``L`` are computed, through ``HOOK.hook_sae_input``, ``HOOK.hook_sae_acts_pre``
  and ``HOOK.hook_sae_acts_post``, which are listed right after the input hook in the forward order;
- at ``output_hook(out)`` (a function pinned first, so other functions there see and may edit the replacement)
  the activation is replaced by the sum of every source layer's write, the decoder bias and the skip term:
  ``HOOK.hook_sae_recons``, ``HOOK.hook_sae_error`` (with the error term) and ``HOOK.hook_sae_output``.

An SAE is the case ``input_hook(L) == output_hook(L)``: its features are computed at the output hook from the
activation the model computed (before other functions there see it), and its six hook points, its own
(``sae.hook_sae_acts_post`` ...), are listed after the hook. A transcoder set writes each layer's output from
that layer's features; a cross-layer transcoder's output at ``L`` sums the writes of every layer up to ``L``,
features being computed from each layer's own input when the forward reaches it (so they see the replacement's
outputs of the layers before). Because the splice is hooks, it composes with every other hook and acts on the
positions a forward computes (with a KV cache, the new ones: right for dictionaries that act position by
position).

With ``use_error_term=True`` the output is ``recons + error`` where ``error = x - recons_clean`` is computed from
unedited features, and is itself a hook point that can be cached, patched and differentiated (:func:`with_error`):
when nothing is edited the model's output is bit for bit what it is without the dictionary, while its gradient
is that of ``recons + error'``. With the error term and nothing attached to a layer's hook points, that layer
computes nothing at all. The clean output is computed a second time only when a hook changed a tensor on the
way (:class:`~interp.sae.latents.Run` tells), or while autograd records and a feature is observed (so that a
gradient reaching a feature does not flow back out through the error term). A TopK SAE's code is decoded from
its k active latents unless a hook reads the dense one (:mod:`interp.sae.latents`).

What a dictionary provides beyond the protocol, to be spliced (:class:`~interp.sae.SAESet` and the transcoders
do): ``device``; ``hook_points(layer)``; ``hooked_encode(x, layer, points, run)``, the code of an input through
the input and latent points; ``hooked_decode(codes, out_layer, points, run)``, the output of the sources'
codes through ``hook_sae_recons``. (Where a hook switches a layer to its explicit path, such as a norm's
``hook_normalized`` read by a transcoder, the output is the bits of that path, equal to the fused one to float
tolerance.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from hooks import HookPoint
from interp.dictionary import SparseDictionary, check_fits, sources, written_layers
from interp.sae.latents import Code, Run
from interp.sae.module import SAE_HOOKS
from interp.sae.sae_set import as_dictionary

_INPUT_SIDE = ("hook_sae_input", "hook_sae_acts_pre", "hook_sae_acts_post")
_OUTPUT_SIDE = ("hook_sae_recons", "hook_sae_error", "hook_sae_output")
_SPLICED = ("hook_points", "hooked_encode", "hooked_decode", "device")
"""What a dictionary needs beyond :class:`~interp.dictionary.SparseDictionary` to be spliced."""


def with_error(
    actual: torch.Tensor, recons: torch.Tensor, clean: torch.Tensor, error_point: HookPoint
) -> torch.Tensor:
    """The splice's output with its error term: ``recons + error'``, where ``error = actual - clean`` passes
    through ``error_point`` (``HOOK.hook_sae_error``) and ``error'`` is what comes out.

    The value is formed as ``actual + (recons - clean) + (error' - error)`` with the detached terms carrying no
    gradient: when nothing is edited it is ``actual`` bit for bit, and its gradient is that of ``recons +
    error'``, so the error node receives the output's gradient.

    Args:
        actual: the activation the model computed at the hook replaced.
        recons: the dictionary's output, through its hooks (what edits to features change).
        clean: the output from unedited features (``recons`` itself when no hook changed a tensor).
        error_point: the hook point of the error node.
    """
    target = actual.to(recons.device, recons.dtype)
    error = target - clean
    edited = error_point(error)
    return target.detach() + (recons - clean.detach()) + (edited - error.detach())


def as_spliceable(dictionary: Any) -> SparseDictionary:
    """``dictionary`` as a dictionary a splice reads (:func:`~interp.sae.sae_set.as_dictionary`: an SAE as an
    SAESet of one).

    Raises:
        TypeError: not a sparse dictionary, or one without what a splice needs (``hooked_encode`` ...).
    """
    try:
        dictionary = as_dictionary(dictionary)
    except TypeError:
        raise TypeError(
            "expected an SAE, a list of SAEs or a sparse dictionary (an interp.sae.SAESet, TranscoderSet or "
            f"CrossLayerTranscoder), got {type(dictionary).__name__}"
        ) from None
    lacking = [name for name in _SPLICED if not hasattr(dictionary, name)]
    if lacking:
        raise TypeError(
            f"the {type(dictionary).__name__} is a sparse dictionary but cannot be spliced: it lacks "
            f"{', '.join(lacking)} (see interp.sae.splice)"
        )
    return dictionary


def dictionaries(given: Any) -> list[SparseDictionary]:
    """What was given to splice or evaluate, as a list of dictionaries: one dictionary (an SAE is one), or a
    list of them, each spliced (or evaluated) as a whole.

    Raises:
        TypeError: an empty list, or something that is not a dictionary.
    """
    listed = list(given) if isinstance(given, (list, tuple)) else [given]
    if not listed:
        raise TypeError(f"expected an SAE or a sparse dictionary, or a list of them; got {given!r}")
    return [as_spliceable(d) for d in listed]


@contextlib.contextmanager
def spliced(model: Any, dictionary: Any, *, use_error_term: bool = False) -> Iterator[Any]:
    """Splice ``dictionary`` into ``model`` for the ``with`` block (see the module docstring).

    Args:
        model: a :class:`hooks.HookedModule` (a HookedTransformer, or a model from ``hooks.attach``).
        dictionary: an SAE, a :class:`~interp.sae.SAESet`, a :class:`~interp.sae.TranscoderSet`, a
            :class:`~interp.sae.CrossLayerTranscoder`, or a list of these (no two replacing the same hook).
        use_error_term: add the reconstruction error back, so outputs are unchanged unless something is edited.

    Raises:
        TypeError: not a dictionary. UnknownHookError: a hook the model lacks (with the closest names).
        ValueError: widths differ, a layer past the model's, an input read after the output it feeds, or two
        dictionaries replacing the same hook; all before anything is attached.
    """
    listed = dictionaries(dictionary)
    writers: dict[str, int] = {}
    for i, d in enumerate(listed):
        check_fits(model, d)
        for out in written_layers(d):
            hook = d.output_hook(out)
            if hook in writers:
                who = (
                    f"dictionaries {writers[hook]} and {i}"
                    if writers[hook] != i
                    else f"two layers of dictionary {i}"
                )
                raise ValueError(
                    f"{who} both replace {hook!r}; splice one dictionary per hook (or chain them at different "
                    "hooks)"
                )
            writers[hook] = i
    with contextlib.ExitStack() as stack:
        for d in listed:
            _Splice(d, use_error_term).attach(model, stack)
        yield model


class _Splice:
    """One dictionary spliced: its hook points by layer, and the features of each layer of the forward under
    way, from the input hook that computes them to the last output they write."""

    def __init__(self, d: Any, error: bool) -> None:
        self.d, self.error = d, error
        self.points = {layer: d.hook_points(layer) for layer in d.layers}
        self.outputs = written_layers(d)
        self.feeding = {out: sources(d, out) for out in self.outputs}
        self.last_use = {layer: max(d.output_layers(layer)) for layer in d.layers}
        self.autoencoder = {layer: d.input_hook(layer) == d.output_hook(layer) for layer in d.layers}
        self.state: dict[int, tuple[torch.Tensor, Code, Run]] = {}
        self.clean: dict[int, Code] = {}
        self.internal = {
            out: [self.points[s][h] for s in self.feeding[out] for h in _INPUT_SIDE]
            + [self.points[out]["hook_sae_recons"]]
            for out in self.outputs
        }
        self.watched = {
            out: self.internal[out] + [self.points[out][h] for h in ("hook_sae_error", "hook_sae_output")]
            for out in self.outputs
        }

    def attach(self, model: Any, stack: contextlib.ExitStack) -> None:
        """Mount the hook points and add the reading and writing functions, for as long as ``stack`` lasts."""
        d = self.d
        names = [h for h in SAE_HOOKS if h != "hook_sae_error" or self.error]
        for layer in d.layers:
            out, points = d.output_hook(layer), self.points[layer]
            if self.autoencoder[layer]:
                stack.enter_context(model.mounted({f"{out}.{h}": points[h] for h in names}, out))
                continue
            side = {f"{out}.{h}": points[h] for h in _INPUT_SIDE}
            stack.enter_context(model.mounted(side, d.input_hook(layer)))
            side = {f"{out}.{h}": points[h] for h in _OUTPUT_SIDE if h in names}
            stack.enter_context(model.mounted(side, out))
        for out in self.outputs:
            stack.enter_context(model.hooks([(d.output_hook(out), self.writer(out))], order="first"))
        for layer in d.layers:
            if not self.autoencoder[layer]:
                # See every edit made at the input hook, as the model's own layer does.
                stack.enter_context(model.hooks([(d.input_hook(layer), self.reader(layer))], order="last"))

    def idle(self, out: int) -> bool:
        """With the error term and nothing attached to the hook points ``out`` depends on, its output is the
        model's own: nothing needs computing."""
        return self.error and not any(p.active for p in self.watched[out])

    def _read(self, layer: int, x: torch.Tensor) -> None:
        run = Run(hooked=True)
        self.state[layer] = (x, self.d.hooked_encode(x, layer, self.points[layer], run), run)
        self.clean.pop(layer, None)

    def _clean(self, layer: int) -> Code:
        """The features of ``layer`` from its input past every hook point, decoded as the hooked pass was."""
        if layer not in self.clean:
            x, _, run = self.state[layer]
            unhooked = Run(hooked=False, dense=run.dense)
            self.clean[layer] = self.d.hooked_encode(x, layer, self.points[layer], unhooked)
        return self.clean[layer]

    def reader(self, layer: int):
        def read(x: torch.Tensor, hook: HookPoint) -> None:
            if all(self.idle(out) for out in self.d.output_layers(layer)):
                return None
            self._read(layer, x)
            return None

        return read

    def writer(self, out: int):
        d, points = self.d, self.points[out]

        def write(actual: torch.Tensor, hook: HookPoint) -> torch.Tensor | None:
            if self.idle(out):
                return None  # nothing reads or edits the features: the output is the activation itself
            if self.autoencoder.get(out):
                self._read(out, actual)
            feeding = self.feeding[out]
            missing = [s for s in feeding if s not in self.state]
            if missing:
                raise RuntimeError(
                    f"the dictionary's input of layers {missing} ({d.input_hook(missing[0])!r}) was not computed "
                    f"before {hook.name!r} in this forward pass; a dictionary must read a hook that comes before "
                    "the one it writes"
                )
            run = Run(hooked=True)
            recons = d.hooked_decode({s: self.state[s][1] for s in feeding}, out, points, run)
            if not self.error:
                result = recons
            else:
                clean = recons
                edited = run.edited or any(self.state[s][2].edited for s in feeding)
                if edited or (recons.requires_grad and any(p.active for p in self.internal[out])):
                    clean = d.hooked_decode(
                        {s: self._clean(s) for s in feeding}, out, points, Run(hooked=False)
                    )
                result = with_error(actual, recons, clean, points["hook_sae_error"])
            for s in feeding:
                if self.last_use[s] == out:
                    del self.state[s]
                    self.clean.pop(s, None)
            return points["hook_sae_output"](result).to(actual.device, actual.dtype)

        return write


def spliced_transcoders(model: Any, tc: Any, *, error: bool = False) -> contextlib.AbstractContextManager:
    """``spliced(model, tc, use_error_term=error)``: the name earlier versions gave the splice of transcoders,
    kept so that code calling it still runs (``model.transcoders(tc)`` is the same too).

    .. deprecated:: use :func:`spliced` (or ``model.transcoders``), which splices every kind of dictionary.
    """
    import warnings

    warnings.warn(
        "interp.sae.spliced_transcoders is interp.sae.spliced now (every dictionary splices through it): call "
        "spliced(model, tc, use_error_term=error) or model.transcoders(tc, error=error)",
        DeprecationWarning,
        stacklevel=2,
    )
    return spliced(model, tc, use_error_term=error)
