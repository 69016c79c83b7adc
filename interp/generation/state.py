"""What a hook knows about the generation it runs in: ``hook.step`` and ``hook.generation``.

A hook is called once per forward pass, and a generation makes many: with the KV cache the first pass runs the
prompt and every later one runs only the newest token; without it every pass runs the whole sequence so far.
A hook that acts differently on prompt and generated tokens, or on some steps only, needs to know which pass
it is in and what its positions are. Before each pass the generation loop sets, on every hook point that has a
function attached, ``hook.step`` (the pass, from 0) and ``hook.generation`` (a :class:`GenerationStep`); after
the generation both are ``None`` again. Points with nothing attached are never touched, so unhooked
generation pays nothing for this.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch

from hooks import HookPoint


@dataclass(frozen=True, eq=False)
class GenerationStep:
    """One forward pass of a generation, as hooks see it.

    Attributes:
        step: the pass: 0 runs the prompt and predicts the first new token; pass ``s`` predicts new token
            ``s`` (counting from 0). With ``return_cache=True`` one more pass over the whole sequence follows,
            with ``step`` equal to the number of new tokens.
        start: the column of the sequence where this pass's positions begin: 0 for a pass over the whole
            sequence, the newest column for a cached step.
        mask: BoolTensor ``[batch, pos]``, the real tokens of this pass's positions.
        prompt_lengths: LongTensor ``[batch]``, real prompt tokens of each row.
        cached: whether earlier positions come from the KV cache (the pass runs only its new positions);
            ``False`` for a pass over the whole sequence (the prompt, or every step without the cache).
    """

    step: int
    start: int
    mask: torch.Tensor
    prompt_lengths: torch.Tensor
    cached: bool
    _full_mask: torch.Tensor  # [batch, start + pos]: the real tokens of every column up to this pass's end

    @cached_property
    def positions(self) -> torch.Tensor:
        """LongTensor ``[batch, pos]``: each real token's position in its own row (the position the model
        uses, counting real tokens from 0); -1 at padding."""
        counts = self._full_mask.long().cumsum(dim=-1)[:, self.start :] - 1  # [batch, pos]
        return counts.masked_fill(~self.mask, -1)

    @cached_property
    def generated(self) -> torch.Tensor:
        """BoolTensor ``[batch, pos]``: True at generated tokens (never at the prompt or at padding)."""
        return self.mask & (self.positions >= self.prompt_lengths[:, None])

    def position_mask(self, indices: list[int]) -> torch.Tensor:
        """BoolTensor ``[batch, pos]``: True where a real token's position in its row is one of ``indices``;
        negative indices count back from the end of the row's prompt (-1: its last prompt token)."""
        wanted = torch.tensor(indices, device=self.mask.device)  # [n]
        per_row = torch.where(wanted < 0, self.prompt_lengths[:, None] + wanted, wanted)  # [batch, n]
        return (self.positions[:, :, None] == per_row[:, None, :]).any(dim=-1) & self.mask


def active_points(model) -> list[HookPoint]:
    """The hook points of ``model`` with a function attached now."""
    return [point for point in model.hook_dict.values() if point.active]


def set_step(points: list[HookPoint], state: GenerationStep | None) -> None:
    """Tell ``points`` which pass is running (``None``: generation is over)."""
    step = None if state is None else state.step
    for point in points:
        point.step = step
        point.generation = state
