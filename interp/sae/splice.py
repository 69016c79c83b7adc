"""Splicing: an SAE runs as the replacement of the activation it was trained on, through the model's hooks.

``with model.saes([sae]):`` adds one hook function at ``sae.hook_name`` that replaces the activation with the
SAE's output, and lists the SAE's hook points under the model's names (``HOOK.hook_sae_input``, ...,
``HOOK.hook_sae_output``), so ``run_with_cache``, ``run_with_hooks``, ``patch``, ``attribution_patch`` and a
generation loop see them like any other hook. Because the splice is a hook, it composes with every other hook
and acts on exactly the positions a forward computes (with a KV cache, the new ones: right for dictionaries
that act position by position).

The splice runs first at its hook: other functions at ``HOOK`` see (and may edit) the SAE's output, which is
what the rest of the model reads; ``HOOK.hook_sae_input`` is the activation the model computed. A transcoder
reads its input at ``hook_name`` after every other function there, and replaces ``hook_name_out``.

With ``use_error_term=True`` the output is ``recons + error`` where ``error = x - recons_clean`` is computed
without the SAE's hooks, and is itself a hook point (``HOOK.hook_sae_error``) that can be cached, patched and
differentiated. The sum's value is formed as ``x + (recons - recons_clean) + (error' - error)``, so when nothing
is edited the model's output is bit for bit what it is without the SAE, while its gradient is that of
``recons + error'``: the error node receives the output's gradient, and gradients through the splice are the
model's own. The clean reconstruction is not computed a second time when no hook inside the SAE changed a
tensor (:class:`~interp.sae.latents.Run` tells), except while autograd records and a latent is observed.
(A transcoder observes its input hook; where a hook switches a layer to its explicit path, such as a norm's
``hook_normalized``, the output is the bits of that path, equal to the fused one to float tolerance.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from hooks import HookPoint
from interp.dictionary import check_fits
from interp.sae.module import SAE, SAE_HOOKS
from interp.sae.sae_set import SAESet

_INTERNAL = ("hook_sae_input", "hook_sae_acts_pre", "hook_sae_acts_post", "hook_sae_recons")


def with_error(
    actual: torch.Tensor, recons: torch.Tensor, clean: torch.Tensor, error_point: HookPoint
) -> torch.Tensor:
    """The splice's output with its error term: ``recons + error'``, where ``error = actual - clean`` passes
    through ``error_point`` (``HOOK.hook_sae_error``) and ``error'`` is what comes out.

    The value is formed as ``actual + (recons - clean) + (error' - error)`` with the detached terms carrying no
    gradient: when nothing is edited it is ``actual`` bit for bit, and its gradient is that of ``recons +
    error'``, so the error node receives the output's gradient. Used by both splices (SAEs here, transcoders
    in :mod:`interp.sae.transcoder.splice`).

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


@contextlib.contextmanager
def spliced(model: Any, saes: SAE | Sequence[SAE], *, use_error_term: bool = False) -> Iterator[Any]:
    """Splice ``saes`` into ``model`` for the ``with`` block (see the module docstring).

    Args:
        model: a :class:`hooks.HookedModule` (a HookedTransformer, or a model from ``hooks.attach``).
        saes: one SAE or several, at different hooks.
        use_error_term: add the reconstruction error back, so outputs are unchanged unless something is edited.

    Raises:
        UnknownHookError: an SAE names a hook the model lacks. ValueError: widths differ, or two SAEs
        replace the same hook.
    """
    saes = [saes] if isinstance(saes, SAE) else list(saes)
    if not saes or not all(isinstance(s, SAE) for s in saes):
        raise TypeError(f"saes must be an SAE or a list of SAEs, got {saes!r}")
    seen: dict[str, int] = {}
    for i, sae in enumerate(saes):
        check_fits(model, SAESet(sae))
        target = sae.hook_name_out
        if target in seen:
            raise ValueError(
                f"SAEs {seen[target]} and {i} both replace {target!r}; splice one SAE per hook (or chain them "
                "at different hooks)"
            )
        seen[target] = i
    with contextlib.ExitStack() as stack:
        for sae in saes:
            target = sae.hook_name_out
            names = [h for h in SAE_HOOKS if h != "hook_sae_error" or use_error_term]
            stack.enter_context(model.mounted({f"{target}.{h}": getattr(sae, h) for h in names}, target))
            replace, read = _splice_fns(sae, use_error_term)
            stack.enter_context(model.hooks([(target, replace)], order="first"))
            if read is not None:
                # See every edit made at the input hook, as the model's own layer does.
                stack.enter_context(model.hooks([(sae.cfg.hook_name, read)], order="last"))
        yield model


def _observed(points: Sequence[HookPoint]) -> bool:
    return any(p.active for p in points)


def _splice_fns(sae: SAE, use_error_term: bool):
    """The replacing function at the output hook and, for a transcoder, the function reading its input."""
    internal = [getattr(sae, h) for h in _INTERNAL]
    watched = [*internal, sae.hook_sae_error, sae.hook_sae_output]
    box: dict[str, torch.Tensor] = {}
    read = None
    if sae.cfg.transcoder:

        def read(x: torch.Tensor, hook: HookPoint) -> None:
            box["x"] = x

    def replace(actual: torch.Tensor, hook: HookPoint) -> torch.Tensor | None:
        if sae.cfg.transcoder:
            if "x" not in box:
                raise RuntimeError(
                    f"the transcoder's input {sae.cfg.hook_name!r} was not computed before {hook.name!r} in "
                    "this forward pass; a transcoder must read a hook that comes before the one it writes"
                )
            x = box.pop("x")
        else:
            x = actual
        if use_error_term and not _observed(watched):
            return None  # nothing reads or edits the SAE: the output is the activation itself
        device = sae.device
        x_in = x.to(device)
        recons, run = sae.output(x_in)
        if not use_error_term:
            out = recons
        else:
            # Unless a hook changed a tensor inside the SAE, the hooked output is the clean one. It is computed
            # apart while autograd records and a latent is observed, so that a gradient reaching the latent does
            # not flow back out through the error term; decoded as the hooked pass was, it has the same bits.
            clean = recons
            if run.edited or (recons.requires_grad and _observed(internal)):
                clean = sae.output(x_in, hooked=False, dense=run.dense)[0]
            out = with_error(actual, recons, clean, sae.hook_sae_error)
        return sae.hook_sae_output(out).to(actual.device, actual.dtype)

    return replace, read
