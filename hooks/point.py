"""HookPoint: an identity module that user functions attach to.

A HookPoint sits on every activation worth naming. With nothing attached it returns its input untouched and
costs one Python call: it skips ``nn.Module``'s call machinery, which would cost more than the identity itself
at each of the hundreds of points a forward pass (or each step of a generation) goes through. Hook functions
are kept in plain lists on the point rather than in torch's module hook dicts: the point can then say cheaply
whether anything is listening (``active``), which is how attention decides between the fused kernel and the
explicit computation, and every replacement can be checked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.nn.modules import module as _torch_module

HookFn = Callable[[torch.Tensor, "HookPoint"], Any]


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
        """Whether calling the point returns its input without running anything: no function of its own and
        no torch module hook. A caller may then skip forming a tensor that only the point would read."""
        return not (
            self.fwd_fns
            or self.bwd_fns
            or self._forward_hooks
            or self._forward_pre_hooks
            or self._backward_hooks
            or self._backward_pre_hooks
            or _torch_module._global_forward_hooks
            or _torch_module._global_forward_pre_hooks
            or _torch_module._global_backward_hooks
            or _torch_module._global_backward_pre_hooks
        )

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        # The test of `idle`, written out: a property call here would cost more than the identity itself.
        if (
            self.fwd_fns
            or self.bwd_fns
            or self._forward_hooks
            or self._forward_pre_hooks
            or self._backward_hooks
            or self._backward_pre_hooks
            or _torch_module._global_forward_hooks
            or _torch_module._global_forward_pre_hooks
            or _torch_module._global_backward_hooks
            or _torch_module._global_backward_pre_hooks
        ):
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
