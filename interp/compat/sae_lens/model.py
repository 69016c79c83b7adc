"""``sae_lens.HookedSAETransformer``: the TransformerLens face with SAELens's ways of splicing SAEs.

SAELens attaches an SAE by putting it in place of the hook point it reads; its hook points then appear under
that name (``blocks.7.hook_resid_pre.hook_sae_acts_post``...). interp splices the same way through hooks
(``model.saes``, :mod:`interp.sae.splice`), with the same names, so this class only keeps the record SAELens
keeps: which SAE is attached where and with which ``use_error_term``. ``add_sae`` attaches until
``reset_saes``; ``saes(...)`` attaches for a ``with`` block and then restores what was attached before;
``run_with_saes``, ``run_with_cache_with_saes`` and ``run_with_hooks_with_saes`` run one call with SAEs;
``generate`` runs with whatever is attached. Every attached SAE is one ``model.saes([sae], use_error_term=...)``
block held open, reopened in order whenever the set changes.

As in SAELens, the cache of a run with SAEs has the SAE's hook points under the hook it replaces, and not that
hook itself (its value is the SAE's ``hook_sae_output``). Unlike SAELens, attaching an SAE at a hook the model
lacks raises instead of logging a warning and attaching nothing, and interp's models have no
``blocks.L.mlp.hook_in`` (SAELens adds one to TransformerLens's MLPs; ``blocks.L.ln2.hook_normalized`` is the
MLP's input here).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from interp.compat.sae_lens.sae import SAE
from interp.compat.transformer_lens.model import HookedTransformer

_ATTACHED = "_sae_lens_attached"
_STACK = "_sae_lens_splices"


class HookedSAETransformer(HookedTransformer):
    """The face's ``HookedTransformer`` with SAELens's SAE methods (see the module docstring)."""

    @property
    def acts_to_saes(self) -> dict[str, SAE]:
        """Hook name the SAE reads -> the SAE attached there."""
        return {name: sae for name, (sae, _) in self._attached().items()}

    def _attached(self) -> dict[str, tuple[SAE, bool]]:
        return self.__dict__.setdefault(_ATTACHED, {})

    def _resplice(self) -> None:
        """Close every open splice and open one per attached SAE, in the order they were attached."""
        stack = self.__dict__.pop(_STACK, None)
        if stack is not None:
            stack.close()
        stack = contextlib.ExitStack()
        try:
            for sae, use_error_term in self._attached().values():
                stack.enter_context(super().saes([sae], use_error_term=use_error_term))
        except BaseException:
            stack.close()
            raise
        self.__dict__[_STACK] = stack

    def add_sae(
        self, sae: Any, use_error_term: bool | None = None, exclude_special_tokens: Any = False
    ) -> None:
        """Attach ``sae`` at ``sae.cfg.metadata.hook_name`` until :meth:`reset_saes` (replacing an SAE there).

        Args:
            sae: a SAELens-face :class:`~interp.compat.sae_lens.SAE` (an interp SAE is given the face).
            use_error_term: add the SAE's error back so the model's output is unchanged unless a latent is
                edited; ``None`` takes ``sae.use_error_term``.
        """
        if exclude_special_tokens:
            raise ValueError(
                "exclude_special_tokens is not supported by interp's splice; pass False and, to leave special "
                "tokens untouched, patch their positions back with a hook on HOOK.hook_sae_output"
            )
        if not isinstance(sae, SAE):
            sae = SAE.from_interp(sae)
        name = sae.cfg.metadata.hook_name or sae.cfg.hook_name
        flag = sae.use_error_term if use_error_term is None else bool(use_error_term)
        attached = self._attached()
        previous = attached.get(name)
        attached.pop(name, None)
        attached[name] = (sae, flag)
        try:
            self._resplice()
        except BaseException:
            attached.pop(name)
            if previous is not None:
                attached[name] = previous
            self._resplice()
            raise

    def reset_saes(self, act_names: str | Sequence[str] | None = None) -> None:
        """Detach the SAEs at ``act_names`` (all with ``None``)."""
        attached = self._attached()
        names = (
            list(attached)
            if act_names is None
            else [act_names]
            if isinstance(act_names, str)
            else list(act_names)
        )
        missing = [name for name in names if name not in attached]
        if missing:
            raise ValueError(f"no SAE is attached at {missing}; attached: {list(attached) or 'none'}")
        for name in names:
            del attached[name]
        self._resplice()

    @contextlib.contextmanager
    def saes(
        self,
        saes: Any = (),
        reset_saes_end: bool = True,
        use_error_term: bool | None = None,
        exclude_special_tokens: Any = False,
    ) -> Iterator[HookedSAETransformer]:
        """Attach ``saes`` for a ``with`` block; on leaving it, what was attached before is attached again
        (unless ``reset_saes_end=False``, which leaves these attached)."""
        before = dict(self._attached())
        try:
            for sae in [saes] if isinstance(saes, SAE) or hasattr(saes, "cfg") else list(saes):
                self.add_sae(
                    sae, use_error_term=use_error_term, exclude_special_tokens=exclude_special_tokens
                )
            yield self
        finally:
            if reset_saes_end:
                self.__dict__[_ATTACHED] = before
                self._resplice()

    def run_with_saes(
        self,
        *model_args: Any,
        saes: Any = (),
        reset_saes_end: bool = True,
        use_error_term: bool | None = None,
        exclude_special_tokens: Any = False,
        **kwargs: Any,
    ) -> Any:
        """The forward pass with ``saes`` attached for this call."""
        with self.saes(saes, reset_saes_end, use_error_term, exclude_special_tokens):
            return self(*model_args, **kwargs)

    def run_with_cache_with_saes(
        self,
        *model_args: Any,
        saes: Any = (),
        reset_saes_end: bool = True,
        use_error_term: bool | None = None,
        exclude_special_tokens: Any = False,
        **kwargs: Any,
    ) -> tuple[Any, Any]:
        """``run_with_cache`` with ``saes`` attached for this call; the cache holds their hook points."""
        with self.saes(saes, reset_saes_end, use_error_term, exclude_special_tokens):
            return self.run_with_cache(*model_args, **kwargs)

    def run_with_hooks_with_saes(
        self,
        *model_args: Any,
        saes: Any = (),
        reset_saes_end: bool = True,
        use_error_term: bool | None = None,
        exclude_special_tokens: Any = False,
        fwd_hooks: Any = (),
        bwd_hooks: Any = (),
        **kwargs: Any,
    ) -> Any:
        """``run_with_hooks`` with ``saes`` attached for this call."""
        with self.saes(saes, reset_saes_end, use_error_term, exclude_special_tokens):
            return self.run_with_hooks(*model_args, fwd_hooks=fwd_hooks, bwd_hooks=bwd_hooks, **kwargs)

    def run_with_cache(self, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        """The face's ``run_with_cache``; with SAEs attached and no ``names_filter``, the hooks they replace are
        left out of the cache, as in SAELens (their SAE's ``hook_sae_output`` holds the same value)."""
        out, cache = super().run_with_cache(*args, **kwargs)
        replaced = {sae.hook_name_out for sae, _ in self._attached().values()}
        if not replaced or kwargs.get("names_filter") is not None:
            return out, cache
        kept = {name: value for name, value in cache.items() if name not in replaced}
        if isinstance(cache, dict):
            return out, kept
        return out, type(cache)(kept, self, has_batch_dim=cache.has_batch_dim)
