"""HookPoint: an identity module that user functions attach to.

A HookPoint sits on every activation worth naming. With nothing attached it returns its input untouched and
costs one Python call: it skips ``nn.Module``'s call machinery, which would cost more than the identity itself
at each of the hundreds of points a forward pass (or each step of a generation) goes through. Hook functions
are kept in plain lists on the point rather than in torch's module hook dicts: the point can then say cheaply
whether anything is listening (``active``), which is how attention decides between the fused kernel and the
explicit computation, and every replacement can be checked.

Whether calling a point would run anything at all (:func:`listening`) is one question with one answer: its own
functions, torch's module hooks registered on it, or torch's global module hooks. The containers that hold those
are gathered once per point (:func:`listeners`; they are mutated in place as hooks come and go, never replaced),
so the test is ``any()`` over them, cheap enough for the identity path, and a module that owns many points (the
routed experts of a mixture-of-experts layer) gathers theirs once and asks the same question of all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn
from torch.nn.modules import module as _torch_module

HookFn = Callable[[torch.Tensor, "HookPoint"], Any]

GLOBAL_HOOKS: tuple[dict, ...] = (
    _torch_module._global_forward_hooks,
    _torch_module._global_forward_pre_hooks,
    _torch_module._global_backward_hooks,
    _torch_module._global_backward_pre_hooks,
)
"""torch's global module hooks (``register_module_forward_hook``...): set, they run at every module call. torch
mutates these dicts in place and never rebinds them."""


class HookEditError(RuntimeError):
    """A hook returned something that cannot replace the activation it was given."""


class HookPoint(nn.Module):
    """An identity module carrying forward and backward hook functions.

    Attributes:
        name: the module path, e.g. ``blocks.3.attn.hook_pattern``; set by :class:`HookedModule`.
        layer: the block index parsed from the name, or ``None`` outside blocks.
        step: while a generation loop runs (``interp.generate``), the forward pass it is in (0 for the
            prompt); ``None`` otherwise.
        generation: while a generation loop runs, what it tells hooks about the pass (positions, which
            tokens are generated); ``None`` otherwise.
    """

    step: int | None = None
    generation: Any = None

    def __init__(self) -> None:
        super().__init__()
        self.name: str | None = None
        self.layer: int | None = None
        self.fwd_fns: list[HookFn] = []
        self.bwd_fns: list[HookFn] = []
        self.pinned: dict[int, str] = {}  # id(fn) -> "first" | "last", for functions attached with an order
        self.persistent: list[tuple[str, HookFn, bool]] = []  # what add_hook attached: (dir, fn, permanent)
        self._listeners = listeners([self])

    def add_hook(
        self, fn: HookFn, dir: str = "fwd", is_permanent: bool = False, prepend: bool = False
    ) -> None:
        """Attach ``fn`` until :meth:`remove_hooks` (a persistent hook; prefer ``model.hooks(...)``, which cleans
        up by itself). ``is_permanent`` hooks survive ``remove_hooks`` unless ``including_permanent``."""
        if dir not in ("fwd", "bwd"):
            raise ValueError(f"dir={dir!r}; expected 'fwd' or 'bwd'")
        if not callable(fn):
            raise TypeError(f"hook for {self.name!r} is {fn!r}, which is not callable")
        fns = self.fwd_fns if dir == "fwd" else self.bwd_fns
        fns.insert(0 if prepend else len(fns), fn)
        self.persistent.append((dir, fn, is_permanent))

    def remove_hooks(self, dir: str = "fwd", including_permanent: bool = False) -> None:
        """Remove the hooks :meth:`add_hook` attached in direction ``dir`` (``"fwd"``, ``"bwd"`` or ``"both"``)."""
        if dir not in ("fwd", "bwd", "both"):
            raise ValueError(f"dir={dir!r}; expected 'fwd', 'bwd' or 'both'")
        kept = []
        for entry in self.persistent:
            hook_dir, fn, permanent = entry
            if dir in (hook_dir, "both") and (including_permanent or not permanent):
                fns = self.fwd_fns if hook_dir == "fwd" else self.bwd_fns
                for i in range(len(fns) - 1, -1, -1):
                    if fns[i] is fn:
                        del fns[i]
                        break
            else:
                kept.append(entry)
        self.persistent = kept

    @property
    def active(self) -> bool:
        """Whether any forward or backward function is attached."""
        return bool(self.fwd_fns or self.bwd_fns)

    @property
    def idle(self) -> bool:
        """Whether calling the point returns its input without running anything (not :func:`listening`). A
        caller may then skip forming a tensor that only the point would read."""
        return not listening(self._listeners)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        # listening(self._listeners), written out: a function call here would cost more than the identity.
        if any(self._listeners) or any(GLOBAL_HOOKS):
            return super().__call__(x)
        return x  # nothing listens: the identity, without nn.Module.__call__

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for fn in self.fwd_fns:
            out = fn(x, self)
            if out is not None:
                x = self._checked(out, x, fn)
        if self.bwd_fns and x.requires_grad:
            fns = tuple(self.bwd_fns)  # the functions attached now, even if backward runs after the call
            x = x.view_as(x)  # a fresh node, so the gradient hook sees only this activation's gradient
            x.register_hook(lambda grad: self._run_bwd(grad, fns))
        return x

    def _run_bwd(self, grad: torch.Tensor, fns: tuple[HookFn, ...]) -> torch.Tensor:
        for fn in fns:
            out = fn(grad, self)
            if out is not None:
                grad = self._checked(out, grad, fn)
        return grad

    def _checked(self, out: Any, like: torch.Tensor, fn: HookFn) -> torch.Tensor:
        fn_name = getattr(fn, "__name__", repr(fn))
        if not isinstance(out, torch.Tensor):
            raise HookEditError(
                f"hook {fn_name!r} on {self.name!r} returned {type(out).__name__}; "
                "return a tensor to replace the activation, or None to leave it"
            )
        for what, got, want in (
            ("shape", tuple(out.shape), tuple(like.shape)),
            ("dtype", out.dtype, like.dtype),
        ):
            if got != want:
                raise HookEditError(
                    f"hook {fn_name!r} on {self.name!r} returned a tensor with {what} {got}; "
                    f"the activation has {what} {want}"
                )
        # On a model spread over devices a hook may compute its replacement anywhere (a patch cached on the
        # CPU, a direction on the first GPU): it is moved to where the activation lives.
        return out if out.device == like.device else out.to(like.device)

    def extra_repr(self) -> str:
        return f"name={self.name!r}"


def listeners(points: Iterable[HookPoint]) -> tuple[list | dict, ...]:
    """The containers whose contents make calling any of ``points`` run something of the point's own: its
    functions and torch's module hooks registered on it (the global ones are :data:`GLOBAL_HOOKS`). They are
    the points' own lists and dicts, mutated in place, so a tuple gathered once stays true; pass it to
    :func:`listening`."""
    return tuple(
        container
        for point in points
        for container in (
            point.fwd_fns,
            point.bwd_fns,
            point._forward_hooks,
            point._forward_pre_hooks,
            point._backward_hooks,
            point._backward_pre_hooks,
        )
    )


def listening(gathered: tuple[list | dict, ...]) -> bool:
    """Whether calling any of the points whose :func:`listeners` were ``gathered`` would run a function: one
    attached to it (``model.hooks``, ``add_hook``), a torch module hook registered on it, or a global module
    hook.

    >>> point = HookPoint()
    >>> gathered = listeners([point])
    >>> listening(gathered), point.idle
    (False, True)
    >>> handle = point.register_forward_hook(lambda module, args, out: None)
    >>> listening(gathered), point.idle
    (True, False)
    >>> handle.remove()
    """
    return any(gathered) or any(GLOBAL_HOOKS)
