"""Hook points for any ``nn.Module``, by module path, and per-head attention through attention specs.

``attach(model)`` gives every submodule two hook points, ``<path>.hook_in`` and ``<path>.hook_out`` (the
root: ``hook_in``/``hook_out``), with the same ``hooks()``, ``run_with_hooks`` and ``run_with_cache`` as the
built-in model, names checked the same way. The model itself is left alone until something is hooked: torch
forward (pre-)hooks are registered on a submodule only while a function is attached to one of its points, and
removed in the ``finally`` of the call that attached it, so an idle attachment costs nothing.

Attention modules described by an :class:`~hooks.attention_spec.AttentionSpec` (given by path pattern, or
found in the table of :mod:`hooks.hf_specs`) have their ``forward`` replaced, for as long as the attachment
lasts, by a checked recomputation exposing ``hook_q`` ... ``hook_result``. ``detach()`` (or leaving the
``with`` block) restores every module exactly: the original ``forward``, no torch hooks, the same state dict.

What ``hook_in`` and ``hook_out`` see:
    ``hook_in`` is the first tensor among a module's positional arguments, else among its keyword arguments
    (for ``attn(x, mask)`` that is ``x``). ``hook_out`` is the output if it is a tensor, else the first tensor
    in an output tuple or list, or the first tensor value of an output mapping (a ``ModelOutput``). Returning
    a tensor from the hook replaces exactly that element. A hooked module called without such a tensor raises.
"""

from __future__ import annotations

import contextlib
import re
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from torch import nn

from hooks.attention_recompute import SpecForward, Switch
from hooks.attention_spec import AttentionSpec
from hooks.cache import ActivationCache
from hooks.module import HookedModule, HookSpec
from hooks.names import NamesFilter, layer_of
from hooks.point import HookPoint
from hooks.spec_match import SpecSource, find_specs

_GLOB_CHARS = re.compile(r"[*?\[]")
_REPLACED: weakref.WeakSet[nn.Module] = weakref.WeakSet()  # attention modules whose forward is ours now


class HookNotFiredError(RuntimeError):
    """A hook that was asked for by name did not run, or a hooked module gave it nothing to see."""


def attach(
    module: nn.Module,
    attention: Mapping[str, SpecSource] | None = None,
    *,
    builtin_specs: bool = True,
) -> Attachment:
    """Give ``module`` named hook points; use as a context manager or keep it and call ``detach()``.

    Args:
        module: any module.
        attention: module path pattern -> spec, or ``fn(submodule) -> spec | None``. In a pattern ``*``
            stays within one path segment (``"layers.*.attn"``) and ``**`` spans any number of segments
            (``"**.attn"``); see :mod:`hooks.spec_match`. A pattern that matches no module raises, and so does
            a spec that does not fit a module its pattern matches (a missing part, widths that do not split
            into its heads), when attaching.
        builtin_specs: also use the built-in specs for known attention classes (``transformers`` GPT-2,
            BERT and the decoder families of :mod:`hooks.hf_specs`) where no pattern applies.

    >>> model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    >>> with attach(model) as hooked:
    ...     out, cache = hooked.run_with_cache(torch.ones(1, 4), names_filter="1.hook_out")
    >>> cache["1.hook_out"].shape
    torch.Size([1, 4])
    """
    return Attachment(module, dict(attention or {}), builtin_specs)


class Attachment(HookedModule):
    """A live attachment: call it like the model; ``hooks``, ``run_with_hooks``, ``run_with_cache``."""

    def __init__(self, module: nn.Module, attention: dict[str, SpecSource], builtin_specs: bool) -> None:
        super().__init__()
        self.model = module
        self.hook_dict = {}
        self._sites: dict[str, tuple[nn.Module, str]] = {}  # hook_in/out name -> (module, "in" | "out")
        self._handles: dict[str, Any] = {}  # torch hook handles, by point name, while a point is active
        self._replaced: list[tuple[nn.Module, Any]] = []  # (attention module, its __dict__ forward or None)
        self._spec_paths: list[str] = []
        self._muted = Switch()  # on while an attention spec is checked: module hooks stay silent
        self._detached = False
        specs = find_specs(module, attention, builtin_specs)
        try:
            self._add_points(module, "", specs, set())
        except BaseException:
            self.detach()
            raise

    def _add_points(
        self, module: nn.Module, path: str, specs: dict[str, AttentionSpec], seen: set[int]
    ) -> None:
        """Points in the order a forward pass usually reaches them: a module's ``hook_in``, its children's
        points, its attention points, its ``hook_out``."""
        if id(module) in seen or isinstance(module, HookPoint):
            return
        seen.add(id(module))
        # Containers such as ModuleList are never called, so they get no points.
        called = type(module).forward is not nn.Module.forward
        if called:
            self._add_site(_join(path, "hook_in"), module, "in")
        for name, child in module.named_children():
            self._add_points(child, _join(path, name), specs, seen)
        if path in specs:
            self._replace_forward(path, module, specs[path])
        if called:
            self._add_site(_join(path, "hook_out"), module, "out")

    def _add_site(self, name: str, module: nn.Module, where: str) -> None:
        self._sites[name] = (module, where)
        self.hook_dict[name] = _new_point(name)

    def _replace_forward(self, path: str, module: nn.Module, spec: AttentionSpec) -> None:
        if module in _REPLACED:
            raise RuntimeError(
                f"{path or 'the root module'} ({type(module).__name__}) already has an attention spec "
                "attached by another attach(); detach that one first"
            )
        points = {n: _new_point(_join(path, n)) for n in spec.point_names()}
        for point in points.values():
            self.hook_dict[point.name] = point
        previous = module.__dict__.get("forward")
        module.__dict__["forward"] = SpecForward(module, path, spec, points, module.forward, self._muted)
        self._replaced.append((module, previous))
        self._spec_paths.append(path)
        _REPLACED.add(module)

    # Lifecycle ----------------------------------------------------------------------------------------------

    def detach(self) -> None:
        """Remove every torch hook and restore every replaced ``forward``; safe to call twice."""
        try:
            for handle in self._handles.values():
                handle.remove()
        finally:
            self._handles.clear()
            for module, previous in reversed(self._replaced):
                if previous is None:
                    module.__dict__.pop("forward", None)
                else:
                    module.__dict__["forward"] = previous
                _REPLACED.discard(module)
            self._replaced.clear()
            self._detached = True

    def __enter__(self) -> Attachment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.detach()

    def _alive(self) -> None:
        if self._detached:
            raise RuntimeError("this attachment was detached; call hooks.attach(model) again")

    # Running ------------------------------------------------------------------------------------------------

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        self._alive()
        return self.model(*args, **kwargs)

    @contextlib.contextmanager
    def hooks(self, fwd_hooks: HookSpec = (), bwd_hooks: HookSpec = ()) -> Iterator[Attachment]:
        """Attach hook functions for a ``with`` block (see :meth:`HookedModule.hooks`)."""
        self._alive()
        try:
            with super().hooks(fwd_hooks, bwd_hooks):
                self._sync()
                yield self
        finally:
            self._sync()

    def run_with_cache(
        self,
        *args: Any,
        names_filter: NamesFilter = None,
        device: str | torch.device | None = None,
        fwd_hooks: HookSpec = (),
        **kwargs: Any,
    ) -> tuple[Any, ActivationCache]:
        """Run and capture activations (see :meth:`HookedModule.run_with_cache`).

        A hook named exactly (not by a glob, a predicate or ``None``) that did not fire raises
        :class:`HookNotFiredError`: its module was not called by this forward pass.
        """
        out, cache = super().run_with_cache(
            *args, names_filter=names_filter, device=device, fwd_hooks=fwd_hooks, **kwargs
        )
        exact = [names_filter] if isinstance(names_filter, str) else names_filter
        if isinstance(exact, (list, tuple)):
            missing = [
                n for n in exact if isinstance(n, str) and not _GLOB_CHARS.search(n) and n not in cache
            ]
            if missing:
                raise HookNotFiredError(
                    f"{', '.join(repr(n) for n in missing)} did not fire: the module was not called in this "
                    "forward pass" + self._spec_hint(missing)
                )
        if not cache:
            raise HookNotFiredError(f"no hook selected by {names_filter!r} fired in this forward pass")
        return out, cache

    def _spec_hint(self, missing: list[str]) -> str:
        inside = [p for p in self._spec_paths if any(n.startswith(_join(p, "")) for n in missing)]
        if not inside:
            return ""
        return (
            f" ({inside[0]!r} runs from its attention spec, which calls only the parts the spec names; hook "
            f"those, or {inside[0]}.hook_q ... hook_result)"
        )

    def _sync(self) -> None:
        """Register torch hooks on the modules whose points are active, and remove those no longer needed."""
        for name, (module, where) in self._sites.items():
            active = self.hook_dict[name].active
            if active and name not in self._handles:
                point = self.hook_dict[name]
                if where == "in":
                    self._handles[name] = module.register_forward_pre_hook(
                        _pre_hook(point, self._muted), with_kwargs=True
                    )
                else:
                    self._handles[name] = module.register_forward_hook(_post_hook(point, self._muted))
            elif not active and name in self._handles:
                self._handles.pop(name).remove()


def _pre_hook(point: HookPoint, muted: Switch) -> Callable:
    def hook(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        if muted.on:
            return None
        for i, value in enumerate(args):
            if isinstance(value, torch.Tensor):
                new = point(value)
                return None if new is value else ((*args[:i], new, *args[i + 1 :]), kwargs)
        for key, value in kwargs.items():
            if isinstance(value, torch.Tensor):
                new = point(value)
                return None if new is value else (args, {**kwargs, key: new})
        raise HookNotFiredError(
            f"{point.name!r}: {type(module).__name__} was called without a tensor argument"
        )

    return hook


def _post_hook(point: HookPoint, muted: Switch) -> Callable:
    def hook(module: nn.Module, args: tuple, output: Any) -> Any:
        if muted.on:
            return None
        if isinstance(output, torch.Tensor):
            new = point(output)
            return None if new is output else new
        if isinstance(output, (tuple, list)):
            for i, value in enumerate(output):
                if isinstance(value, torch.Tensor):
                    new = point(value)
                    if new is value:
                        return None
                    items = [*output[:i], new, *output[i + 1 :]]
                    if isinstance(output, list):
                        return items
                    return type(output)(*items) if hasattr(output, "_fields") else tuple(items)
        if isinstance(output, Mapping):
            for key, value in output.items():
                if isinstance(value, torch.Tensor):
                    new = point(value)
                    if new is not value:
                        output[key] = new  # a fresh object from this call: edit it in place
                    return None
        raise HookNotFiredError(
            f"{point.name!r}: {type(module).__name__} returned {type(output).__name__}, which holds no tensor"
        )

    return hook


def _new_point(name: str) -> HookPoint:
    point = HookPoint()
    point.name, point.layer = name, layer_of(name)
    return point


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
