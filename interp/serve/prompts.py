"""Prompts as the routes tokenize them, checked against the limits before any computation is queued.

Neuronpedia's inference server puts the tokenizer's BOS token first on every activation and steering prompt
that does not start with it (:func:`with_bos`); its ``/tokenize`` and vector activations follow the
checkpoint's own convention (:func:`as_checkpoint`); chat messages go through the checkpoint's chat template
(:func:`chat`). A prompt longer than ``--max-prompt-tokens`` or the model's context is refused with both numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from interp.serve.errors import RequestError


@dataclass(frozen=True)
class Prompt:
    """A tokenized prompt: its ids ``[pos]``, each token as text, which are special tokens, and whether the
    first is a BOS token."""

    ids: torch.Tensor
    tokens: list[str]
    special: list[bool]
    bos: bool


def with_bos(served: Any, text: str, limit: int | None = None) -> Prompt:
    """``text`` with the BOS token first (unless it already starts with it, or the vocabulary has none)."""
    tokenizer = served.model.tokenizer
    bos = tokenizer.bos_id
    starts = bos is not None and text.startswith(tokenizer.backend.id_to_token(bos))
    prepend = True if bos is not None and not starts else False if bos is not None else None
    return _prompt(served, _encode(tokenizer, text, prepend), limit)


def as_checkpoint(
    served: Any, text: str, prepend_bos: bool | None = None, limit: int | None = None
) -> Prompt:
    """``text`` encoded as the checkpoint intends, or with a BOS forced in or out."""
    return _prompt(served, _encode(served.model.tokenizer, text, prepend_bos), limit)


def chat(served: Any, messages: Sequence[Any]) -> Prompt:
    """``messages`` through the checkpoint's chat template, ready for the assistant's turn."""
    tokens = served.model.tokenizer.chat_tokens([{"role": m.role, "content": m.content} for m in messages])
    return _prompt(served, tokens.ids[0].tolist(), None)


def bounded(served: Any, n_tokens: int, limit: int | None = None, what: str = "the prompt") -> None:
    """Refuse ``n_tokens`` over the limit or the model's context."""
    limit = served.limits.max_prompt_tokens if limit is None else limit
    flag = "--max-prompt-tokens" if limit == served.limits.max_prompt_tokens else "--max-graph-tokens"
    if n_tokens > limit:
        raise RequestError(400, f"{what} is {n_tokens} tokens; this server takes at most {limit} ({flag})")
    if n_tokens > served.model.cfg.n_ctx:
        raise RequestError(
            400, f"{what} is {n_tokens} tokens, longer than the model's context of {served.model.cfg.n_ctx}"
        )


def _encode(tokenizer: Any, text: str, prepend_bos: bool | None) -> list[int]:
    if not isinstance(text, str):
        raise RequestError(400, f"a prompt is text, got {type(text).__name__}")
    return tokenizer.to_tokens(text, prepend_bos=prepend_bos).ids[0].tolist()


def _prompt(served: Any, ids: list[int], limit: int | None) -> Prompt:
    bounded(served, len(ids), limit)
    tokenizer = served.model.tokenizer
    special = tokenizer.special_ids
    return Prompt(
        ids=torch.tensor(ids, dtype=torch.long, device=served.model.device),
        tokens=tokenizer.to_str_tokens(ids),
        special=[i in special for i in ids],
        bos=bool(ids) and tokenizer.bos_id is not None and ids[0] == tokenizer.bos_id,
    )
