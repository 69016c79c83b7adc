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
from hooks.names import UnknownHookError, unknown_hook_message
from interp.sae.module import SAE, SAE_HOOKS

_INTERNAL = ("hook_sae_input", "hook_sae_acts_pre", "hook_sae_acts_post", "hook_sae_recons")


def hook_width(model: Any, name: str) -> int | None:
    """The last-axis width of a hook of a :class:`~interp.HookedTransformer` (flattened heads for ``hook_z``),
    or ``None`` when it cannot be told from the config."""
    cfg = getattr(model, "cfg", None)
    if cfg is None or not hasattr(cfg, "d_model"):
        return None
    leaf = name.rsplit(".", 1)[-1]
    d_head = getattr(cfg, "d_head", None) or cfg.d_model // cfg.n_heads
    if leaf in ("hook_resid_pre", "hook_resid_mid", "hook_resid_post", "hook_attn_out", "hook_mlp_out"):
        return cfg.d_model
    if leaf in ("hook_embed", "hook_pos_embed", "hook_normalized") or name == "unembed.hook_in":
        return cfg.d_model
    if leaf in ("hook_pre", "hook_post", "hook_pre_linear") and ".mlp." in name:
        return getattr(cfg, "d_mlp", None)
    if leaf == "hook_z":
        return cfg.n_heads * d_head
    return None


def check_sae_fits(model: Any, sae: SAE) -> None:
    """Raise before any forward when ``sae`` names a hook the model lacks or reads a different width."""
    for what, name, width in (
        ("hook_name", sae.cfg.hook_name, sae.d_in),
        ("hook_name_out", sae.hook_name_out, sae.d_out),
    ):
        if name is None:
            raise ValueError(
                f"the SAE has no {what}: its files do not say which hook it reads; load it with "
                f"interp.sae.load(path, {what}='blocks.L.hook_resid_post') or similar"
            )
        if name not in model.hook_dict:
            raise UnknownHookError(f"the SAE's {what}: " + unknown_hook_message(name, model.hook_dict))
        have = hook_width(model, name)
        if have is not None and have != width:
            raise ValueError(
                f"the SAE reads {name!r} with {'d_in' if what == 'hook_name' else 'd_out'}={width}, but that "
                f"hook of this model has width {have}; use an SAE trained on this model"
            )


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
        check_sae_fits(model, sae)
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
            target = actual.to(device, recons.dtype)
            error = target - clean
            edited = sae.hook_sae_error(error)
            # The value is target + 0 + 0 when nothing is edited; the detached terms carry no gradient, so
            # the gradient is that of recons + edited: at the error node, and through it to the target.
            out = target.detach() + (recons - clean.detach()) + (edited - error.detach())
        return sae.hook_sae_output(out).to(actual.device, actual.dtype)

    return replace, read
