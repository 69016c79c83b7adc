"""Several conditions of one batch in one forward pass: copies stacked along the batch axis.

Patching many slots, patching many feature sets, patching many edges and steering at many scales all run the
same inputs under different edits. Running each edit as its own forward pass leaves a GPU mostly idle, so the
batch is repeated once per condition (copy ``k`` is rows ``[k * batch, (k + 1) * batch)``), a hook sees the
activation unflattened to ``[copy, batch, ...]`` and edits each copy its own way, and the output is split back
into one part per copy. :class:`Conditions` does the stacking, unflattening and splitting for any forward;
:func:`run_conditions` runs a model with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

CopyHook = Callable[[torch.Tensor, Any], torch.Tensor]
"""``fn(acts [copy, batch, ...], hook) -> [copy, batch, ...]``: a hook that sees the copies apart."""


@dataclass(frozen=True)
class Conditions:
    """``copies`` copies of a batch of ``batch`` rows, stacked along the batch axis, copy-major.

    >>> stack = Conditions(copies=3, batch=2)
    >>> stack.repeat(torch.tensor([[1, 2], [3, 4]]))[:, 0].tolist()
    [1, 3, 1, 3, 1, 3]
    >>> [part.tolist() for part in stack.split(torch.arange(6))]
    [[0, 1], [2, 3], [4, 5]]
    """

    copies: int
    batch: int

    def repeat(self, x: torch.Tensor | None) -> torch.Tensor | None:
        """``[batch, ...] -> [copies * batch, ...]`` (``None`` stays ``None``)."""
        if x is None:
            return None
        return x.repeat(self.copies, *([1] * (x.ndim - 1)))  # [copy * batch, ...]

    def hook(self, fn: CopyHook) -> Callable[[torch.Tensor, Any], torch.Tensor]:
        """A forward hook on the stacked batch that calls ``fn`` with the copies apart."""

        def per_copy(act: torch.Tensor, hook: Any) -> torch.Tensor:
            out = fn(act.unflatten(0, (self.copies, self.batch)), hook)  # [copy, batch, ...]
            return out.flatten(0, 1)  # [copy * batch, ...]

        return per_copy

    def split(self, out: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``[copies * batch, ...]`` -> one ``[batch, ...]`` part per copy."""
        return out.split(self.batch)


def run_conditions(
    model: Any,
    tokens: torch.Tensor | Sequence[torch.Tensor],
    hooks: Sequence[tuple[str, CopyHook]],
    *,
    copies: int | None = None,
    attention_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, ...]:
    """The logits of each condition, from one forward pass over the stacked copies.

    Args:
        model: a :class:`~interp.HookedTransformer`.
        tokens: ``[batch, pos]`` run ``copies`` times, or one ``[batch, pos]`` tensor per copy.
        hooks: ``(name, fn)`` pairs; ``fn`` sees ``[copy, batch, ...]`` (see :data:`CopyHook`).
        copies: how many copies of a single ``tokens`` tensor (not given with a list).
        attention_mask: ``[batch, pos]``, the same for every copy.

    Returns:
        One ``[batch, pos, d_vocab]`` logits tensor per copy.
    """
    if isinstance(tokens, torch.Tensor):
        if copies is None or copies < 1:
            raise ValueError(
                f"copies={copies!r}; give the number of conditions (>= 1) to run a tensor of tokens"
            )
        stack = Conditions(copies, tokens.shape[0])
        ids = stack.repeat(tokens)
    else:
        if copies is not None and copies != len(tokens):
            raise ValueError(
                f"copies={copies} but {len(tokens)} token tensors were given; give one or the other"
            )
        stack = Conditions(len(tokens), tokens[0].shape[0])
        ids = torch.cat(list(tokens))  # [copy * batch, pos]
    mask = None if attention_mask is None else stack.repeat(attention_mask.reshape(stack.batch, -1))
    logits = model.run_with_hooks(ids, mask, fwd_hooks=[(name, stack.hook(fn)) for name, fn in hooks])
    return stack.split(logits)
