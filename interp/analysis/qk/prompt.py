"""One prompt for QK attribution: its ids, mask, token strings, positions, and the checks on positions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from interp.analysis.checks import check_index
from interp.tokens import Tokens


@dataclass(frozen=True)
class Prompt:
    """A single prompt.

    Attributes:
        ids: ``[1, pos]`` token ids on the model's device.
        mask: ``[1, pos]`` attention mask, or ``None`` when every token is real.
        tokens: the token strings (``#id`` without a tokenizer; ``""`` at padding).
        positions: ``[pos]`` the positions the model counts (real tokens only, as with padding it does).
        text: the text, when the prompt came from text.
        offsets: ``[pos, 2]`` each token's character range of ``text`` (``(0, 0)`` for special tokens and
            padding), when the prompt came from text.
    """

    ids: torch.Tensor
    mask: torch.Tensor | None
    tokens: list[str]
    positions: torch.Tensor
    text: str | None = None
    offsets: torch.Tensor | None = None

    def check_position(self, pos: int, what: str) -> int:
        """A checked position (negatives count from the end) that is not padding."""
        n = self.ids.shape[1]
        pos = check_index(pos, n, what, f"a prompt of {n} tokens")
        if self.mask is not None and not bool(self.mask[0, pos]):
            real = self.mask[0].nonzero().flatten().tolist()
            raise ValueError(
                f"{what} position {pos} is padding; choose a real token, positions {real[0]}..{real[-1]}"
            )
        return pos

    def check_visible(self, model: nn.Module, layer: int, query: int, key: int) -> None:
        """The key must be one the query can see in ``layer``: not later (causal), not outside the window."""
        cfg = model.cfg
        if cfg.causal and key > query:
            raise ValueError(
                f"key {key} comes after query {query}; in this causal model a query sees keys 0..{query}"
            )
        window = cfg.window(layer)
        distance = int(self.positions[query] - self.positions[key])
        if window is not None and abs(distance) >= window:
            raise ValueError(
                f"key {key} is {distance} tokens before query {query}, outside layer {layer}'s sliding window "
                f"of {window} keys; choose a key within {window - 1} tokens of the query or a full layer"
            )

    def rotary(self, model: nn.Module, layer: int, pos: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(cos, sin) [rotary_dim]`` of ``layer`` at ``pos`` in float32, or ``None`` without rotary."""
        if model.rotary is None:
            return None
        tables = model.rotary(self.positions[None].to(model.device), torch.float32)
        cos, sin = tables[model.cfg.layer_types[layer]]  # [1, pos, 1, rotary_dim] each
        return cos[0, pos, 0], sin[0, pos, 0]


def as_prompt(model: nn.Module, tokens: Any) -> Prompt:
    """Text, a one-row :class:`~interp.tokens.Tokens` or ids ``[pos]`` / ``[1, pos]`` as a :class:`Prompt`."""
    if isinstance(tokens, Prompt):
        return tokens
    text = offsets = None
    if isinstance(tokens, str):
        tokens = model.to_tokens(tokens)
    if isinstance(tokens, Tokens):
        if tokens.ids.shape[0] != 1:
            raise ValueError(
                f"qk attribution takes one prompt; got a batch of {tokens.ids.shape[0]}, pass one row"
            )
        text, offsets = tokens.texts[0], tokens.offsets[0]
        ids, mask = tokens.ids, tokens.mask
    elif isinstance(tokens, torch.Tensor) and not tokens.is_floating_point():
        ids = tokens[None] if tokens.ndim == 1 else tokens
        if ids.ndim != 2 or ids.shape[0] != 1:
            raise ValueError(f"token ids must be [pos] or [1, pos], got shape {tuple(tokens.shape)}")
        mask = None
    else:
        raise TypeError(
            f"tokens must be text, a one-row Tokens or integer ids [pos], got {type(tokens).__name__}"
        )
    ids = ids.to(model.device)
    if mask is not None and bool(mask.all()):
        mask = None
    if mask is not None:
        mask = mask.to(model.device)
        positions = (mask[0].long().cumsum(-1) - 1).clamp(min=0)
    else:
        positions = torch.arange(ids.shape[1], device=ids.device)
    return Prompt(ids, mask, _token_strings(model, ids[0], mask), positions, text, offsets)


def _token_strings(model: nn.Module, ids: torch.Tensor, mask: torch.Tensor | None) -> list[str]:
    tokenizer = getattr(model, "tokenizer", None)
    strings = tokenizer.to_str_tokens(ids.cpu()) if tokenizer is not None else [f"#{i}" for i in ids.tolist()]
    if mask is not None:
        strings = [s if m else "" for s, m in zip(strings, mask[0].tolist(), strict=True)]
    return strings
