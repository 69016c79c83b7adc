"""HookedModule: names every HookPoint by its module path and runs the model with hooks or a cache.

Every function attached for a call is removed in a ``finally``, so hooks never outlive the call that added
them, also when the forward raises. Backward functions are captured on the graph when the forward runs, so a
``loss.backward()`` after ``run_with_hooks`` has returned still reaches them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

import torch
from torch import nn

from hooks.cache import ActivationCache
from hooks.names import NamesFilter, UnknownHookError, layer_of, resolve_names, unknown_hook_message
from hooks.point import HookFn, HookPoint

HookSpec = Sequence[tuple[NamesFilter, HookFn]]
Order = Literal["first", "normal", "last"]
ORDERS = ("first", "normal", "last")


class HookedModule(nn.Module):
    """Mixin for modules whose submodules include :class:`HookPoint` s.

    Call :meth:`setup_hooks` at the end of ``__init__``; it names each point by its path.
    """

    hook_dict: dict[str, HookPoint]
    cache_n_layers: int | None = None

    def setup_hooks(self) -> None:
        """Name every HookPoint below this module by its module path and index them."""
        self.hook_dict = {}
        for path, module in self.named_modules():
            if isinstance(module, HookPoint):
                module.name = path
                module.layer = layer_of(path)
                self.hook_dict[path] = module

    def hook_names(self) -> list[str]:
        """Every hook name, in the order the forward pass reaches them."""
        return list(self.hook_dict)

    def resolve(self, names_filter: NamesFilter) -> list[str]:
        """The hook names a filter selects; raises on an unknown name or an empty match."""
        return resolve_names(names_filter, list(self.hook_dict))

    @contextlib.contextmanager
    def hooks(
        self, fwd_hooks: HookSpec = (), bwd_hooks: HookSpec = (), *, order: Order = "normal"
    ) -> Iterator[HookedModule]:
        """Attach hooks for the duration of a ``with`` block.

        Args:
            fwd_hooks: ``(names_filter, fn)`` pairs; ``fn(activation, hook)`` returns ``None`` or a tensor of
                the same shape, dtype and device that replaces the activation.
            bwd_hooks: the same for gradients of the named activations.
            order: where the functions run among those at each point. ``"normal"`` functions run in the
                order they were attached; ``"first"`` ones before them all (a splice that replaces an
                activation, so other functions see and may edit the replacement); ``"last"`` ones after them
                all, also after normal functions attached later (a reader that must see every edit, such as
                a transcoder reading its input).
        """
        if order not in ORDERS:
            raise ValueError(f"order={order!r}; expected one of {list(ORDERS)}")
        added: list[tuple[HookPoint, list[HookFn], HookFn]] = []
        try:
            for spec, attr in ((fwd_hooks, "fwd_fns"), (bwd_hooks, "bwd_fns")):
                for names_filter, fn in _pairs(spec, attr[:3] + "_hooks"):
                    if not callable(fn):
                        raise TypeError(f"hook for {names_filter!r} is {fn!r}, which is not callable")
                    for name in self.resolve(names_filter):
                        point = self.hook_dict[name]
                        fns = getattr(point, attr)
                        _insert(point, fns, fn, order)
                        added.append((point, fns, fn))
            yield self
        finally:
            for point, fns, fn in reversed(added):
                _remove(point, fns, fn)

    @contextlib.contextmanager
    def mounted(self, points: Mapping[str, HookPoint], after: str) -> Iterator[HookedModule]:
        """List extra hook points (a spliced module's, e.g. an SAE's) under this model's names, for a block.

        The points are inserted into :attr:`hook_dict` right after ``after``, in the order given, and named by
        their keys, so ``run_with_cache``, ``hooks`` and name checking see them as the model's own. On exit
        (also on error) :attr:`hook_dict` and the points' names are restored exactly.

        Args:
            points: full hook name -> HookPoint; none of the names may exist yet.
            after: an existing hook name; the new names follow it in the forward order.
        """
        if after not in self.hook_dict:
            raise UnknownHookError(unknown_hook_message(after, self.hook_dict))
        taken = [name for name in points if name in self.hook_dict]
        if taken:
            raise ValueError(f"cannot mount {taken[0]!r}: the model already has a hook of that name")
        before = list(self.hook_dict.items())
        names = [(point, point.name, point.layer) for point in points.values()]
        merged: list[tuple[str, HookPoint]] = []
        for name, point in before:
            merged.append((name, point))
            if name == after:
                merged.extend(points.items())
        try:
            for name, point in points.items():
                point.name, point.layer = name, layer_of(name)
            self.hook_dict.clear()
            self.hook_dict.update(merged)
            yield self
        finally:
            self.hook_dict.clear()
            self.hook_dict.update(before)
            for point, name, layer in names:
                point.name, point.layer = name, layer

    def run_with_hooks(
        self, *args: Any, fwd_hooks: HookSpec = (), bwd_hooks: HookSpec = (), **kwargs: Any
    ) -> Any:
        """Run the forward pass with hooks attached for this call only."""
        with self.hooks(fwd_hooks, bwd_hooks):
            return self(*args, **kwargs)

    def run_with_cache(
        self,
        *args: Any,
        names_filter: NamesFilter = None,
        device: str | torch.device | None = None,
        fwd_hooks: HookSpec = (),
        **kwargs: Any,
    ) -> tuple[Any, ActivationCache]:
        """Run the forward pass and capture activations.

        Args:
            names_filter: which hooks to capture (``None``: all; a name, glob, list or predicate).
            device: where to move captured tensors as they are captured (e.g. ``"cpu"`` off a GPU).
            fwd_hooks: extra hooks applied in the same call (an edit and a cache at once); a hook that edits
                an activation runs before the cache sees it.

        Returns:
            ``(output, cache)``; the cache holds detached tensors, exactly the ones named.
        """
        store: dict[str, torch.Tensor] = {}
        save = _saver(store, device)
        with self.hooks([*fwd_hooks, (self.resolve(names_filter), save)]):
            out = self(*args, **kwargs)
        ordered = {name: store[name] for name in self.hook_dict if name in store}
        return out, ActivationCache(ordered, n_layers=self.cache_n_layers)


def _pairs(spec: Any, argument: str) -> list[tuple[NamesFilter, HookFn]]:
    """``spec`` as a list of ``(names_filter, fn)`` pairs, or a TypeError that shows the expected form."""
    form = f"{argument} takes a list of (names_filter, fn) pairs, such as [('blocks.0.attn.hook_z', fn)]"
    if isinstance(spec, tuple) and len(spec) == 2 and callable(spec[1]) and not callable(spec[0]):
        raise TypeError(f"{form}; got a single pair: wrap it in a list, [({spec[0]!r}, fn)]")
    if isinstance(spec, (str, bytes, Mapping)) or not isinstance(spec, Iterable):
        raise TypeError(f"{form}; got {type(spec).__name__} {spec!r}")
    pairs = list(spec)
    for index, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"{form}; entry {index} is {pair!r}")
    return [tuple(pair) for pair in pairs]


def _saver(store: dict[str, torch.Tensor], device: str | torch.device | None) -> HookFn:
    def save(x: torch.Tensor, hook: HookPoint) -> None:
        t = x.detach()
        if device is not None:
            t = t.to(device)
        if t.untyped_storage().nbytes() > t.nbytes:  # a view would pin its whole base tensor
            t = t.clone()
        store[hook.name] = t

    return save


def _insert(point: HookPoint, fns: list[HookFn], fn: HookFn, order: Order) -> None:
    """Put ``fn`` into ``fns`` where ``order`` says: at the front, at the end, or before the trailing
    functions pinned ``"last"``."""
    if order == "first":
        fns.insert(0, fn)
    elif order == "last":
        fns.append(fn)
    else:
        i = len(fns)
        while i > 0 and point.pinned.get(id(fns[i - 1])) == "last":
            i -= 1
        fns.insert(i, fn)
    if order != "normal":
        point.pinned[id(fn)] = order


def _remove(point: HookPoint, fns: list[HookFn], fn: HookFn) -> None:
    """Remove the last occurrence of ``fn`` from ``fns`` (and its pin once no occurrence is left)."""
    for i in range(len(fns) - 1, -1, -1):
        if fns[i] is fn:
            del fns[i]
            break
    if not any(f is fn for f in (*point.fwd_fns, *point.bwd_fns)):
        point.pinned.pop(id(fn), None)
