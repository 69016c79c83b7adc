"""The prompt of a generation as one left-padded batch: text, a token batch, or token ids.

Whatever was given becomes ``ids [batch, prompt]`` and ``mask [batch, prompt]`` on the model's device, padded
on the left: new tokens are then appended in one column for every row, and the padding stays contiguous, which
sliding-window masks rely on. Ragged lists of ids are padded here; a tensor may come with its own mask, padded
on either side. Every problem is reported before anything runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from interp.tokens import Tokens


@dataclass(frozen=True)
class Prompt:
    """A padded prompt batch.

    Attributes:
        ids: LongTensor ``[batch, prompt]``.
        mask: BoolTensor ``[batch, prompt]``, True at real tokens.
        lengths: LongTensor ``[batch]``, real tokens per row.
    """

    ids: torch.Tensor
    mask: torch.Tensor
    lengths: torch.Tensor

    @property
    def batch(self) -> int:
        return self.ids.shape[0]

    @property
    def width(self) -> int:
        return self.ids.shape[1]


def make_prompt(
    model: Any,
    prompt: Any,
    *,
    attention_mask: torch.Tensor | None,
    prepend_bos: bool | None,
) -> Prompt:
    """Turn ``prompt`` (a string, strings, a :class:`~interp.tokens.Tokens`, a tensor or lists of ids) into a
    left-padded :class:`Prompt` for ``model``."""
    if isinstance(prompt, (str, Tokens)) or _is_text_list(prompt):
        if attention_mask is not None:
            raise ValueError("pass attention_mask with token ids, not with text (text makes its own mask)")
        if not isinstance(prompt, Tokens):
            prompt = model.to_tokens(prompt, prepend_bos=prepend_bos, padding_side="left")
        ids, mask = prompt.ids, prompt.mask.bool()
    else:
        if prepend_bos is not None:
            raise ValueError("prepend_bos applies to text; token ids are used as given")
        ids, mask = _ids_and_mask(model, prompt, attention_mask)
    ids, mask = ids.to(model.device), mask.to(model.device)
    lengths = mask.sum(dim=-1)
    empty = (lengths == 0).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"prompt row {empty[0]} has no real tokens; every row needs at least one")
    if not _contiguous(mask):
        raise ValueError(
            "the attention mask must mark one run of real tokens per row, padded on one side only"
        )
    order = mask.int().argsort(dim=-1, stable=True)  # [batch, prompt]: padding first, then the tokens
    return Prompt(ids.gather(1, order), mask.gather(1, order), lengths)


def _is_text_list(prompt: Any) -> bool:
    return isinstance(prompt, (list, tuple)) and bool(prompt) and all(isinstance(p, str) for p in prompt)


def _ids_and_mask(
    model: Any, prompt: Any, attention_mask: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    if isinstance(prompt, torch.Tensor):
        if prompt.dtype not in (torch.int64, torch.int32) or prompt.ndim not in (1, 2) or prompt.numel() == 0:
            raise ValueError(
                f"a prompt tensor must hold token ids, [pos] or [batch, pos], got dtype {prompt.dtype} and "
                f"shape {tuple(prompt.shape)}"
            )
        ids = prompt.long() if prompt.ndim == 2 else prompt.long()[None]
        if attention_mask is None:
            return ids, torch.ones_like(ids, dtype=torch.bool)
        mask = attention_mask if attention_mask.ndim == 2 else attention_mask[None]
        if tuple(mask.shape) != tuple(ids.shape):
            raise ValueError(
                f"attention_mask has shape {tuple(mask.shape)}; it must match the prompt, {tuple(ids.shape)}"
            )
        if not ((mask == 0) | (mask == 1)).all():
            raise ValueError("attention_mask must hold only 0 (padding) and 1 (real token)")
        return ids, mask.bool()
    if attention_mask is not None:
        raise ValueError("attention_mask goes with a tensor of ids; lists of ids are padded here")
    rows = _id_rows(prompt)
    width = max(len(r) for r in rows)
    pad = getattr(model.tokenizer, "pad_id", 0) if model.tokenizer is not None else 0
    ids = torch.full((len(rows), width), pad, dtype=torch.long)  # [batch, pos]
    mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for b, row in enumerate(rows):
        ids[b, width - len(row) :] = torch.tensor(row, dtype=torch.long)
        mask[b, width - len(row) :] = True
    return ids, mask


def _id_rows(prompt: Any) -> list[list[int]]:
    if isinstance(prompt, Sequence) and prompt and all(_is_id(t) for t in prompt):
        return [list(prompt)]
    if (
        isinstance(prompt, Sequence)
        and prompt
        and all(isinstance(r, Sequence) and r and all(_is_id(t) for t in r) for r in prompt)
    ):
        return [list(r) for r in prompt]
    raise TypeError(
        "the prompt must be a string, a list of strings, model.to_tokens(...) output, a tensor of token ids "
        f"or (lists of) int ids, got {type(prompt).__name__}: {str(prompt)[:80]}"
    )


def _is_id(token: Any) -> bool:
    return isinstance(token, int) and not isinstance(token, bool)


def _contiguous(mask: torch.Tensor) -> bool:
    """Whether each row's real tokens form one run touching an edge (left or right padding)."""
    starts = (mask[:, 1:] & ~mask[:, :-1]).sum(dim=-1)  # a padding -> real transition
    ends = (~mask[:, 1:] & mask[:, :-1]).sum(dim=-1)  # a real -> padding transition
    left = (ends == 0) & (starts <= 1)
    right = (starts == 0) & (ends <= 1)
    return bool((left | right).all())


def to_right_padding(tokens: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Move each row's real tokens to the left edge, padding after them (the layout ``padding_side="right"``)."""
    order = (~mask).int().argsort(dim=-1, stable=True)  # [batch, pos]: the tokens first, then padding
    return tokens.gather(1, order), mask.gather(1, order)


__all__ = ["Prompt", "make_prompt", "to_right_padding"]
