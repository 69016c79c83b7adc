"""What an attribution graph explains: its logit targets, each a direction at the unembedding's input.

A target is a label, a vector ``[d_model]`` read at ``unembed.hook_in`` of the last position, a weight (the
probability it gets in pruning and scores) and, for a token, its id. As circuit-tracer does, a token's vector is
its de-meaned unembedding column ``W_U[:, t] - W_U.mean(1)``, so the target is the token's logit minus the mean
logit before any soft-cap; a custom direction (a logit difference such as ``she`` - ``he``) is given whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Target:
    """One logit target.

    Args:
        label: how the target is shown (the token's text, or a name such as ``"she-he"``).
        vector: ``[d_model]`` direction at ``unembed.hook_in``.
        weight: the target's share in influence (its probability, for a token).
        token: the vocabulary id, or ``None`` for a custom direction.
    """

    label: str
    vector: torch.Tensor
    weight: float
    token: int | None = None

    @classmethod
    def difference(cls, model: Any, a: str | int, b: str | int, *, weight: float = 1.0) -> Target:
        """The logit difference ``a - b`` (tokens given as single-token text or ids) as one target."""
        ia, ib = (token_id(model, t) for t in (a, b))
        w_u = model.unembed.weight.detach()  # [d_model, d_vocab]
        label = f"{_text(model, ia)}-{_text(model, ib)}"
        return cls(label, (w_u[:, ia] - w_u[:, ib]).float(), float(weight))


def token_id(model: Any, token: str | int) -> int:
    """The id of a single-token text (no special tokens added) or of an id; raises naming the token otherwise."""
    if isinstance(token, bool):
        raise TypeError(f"a target token is text or an id, got {token!r}")
    if isinstance(token, int):
        if not 0 <= token < model.cfg.d_vocab:
            raise ValueError(f"target token id {token} is outside the vocabulary [0, {model.cfg.d_vocab})")
        return token
    ids = model._need_tokenizer().to_tokens(token, prepend_bos=False).ids[0].tolist()
    if len(ids) != 1:
        raise ValueError(f"target {token!r} is {len(ids)} tokens {ids}; a target must be exactly one token")
    return int(ids[0])


def check_targets(model: Any, targets: Sequence[str | int | Target] | str | int | Target) -> None:
    """Raise one line for a target that is not a single token, a valid id, or a :class:`Target`."""
    for t in [targets] if isinstance(targets, (str, int, Target)) else targets:
        if not isinstance(t, Target):
            token_id(model, t)


def select(
    model: Any,
    logits: torch.Tensor,
    targets: Sequence[str | int | Target] | None,
    max_logits: int,
    logit_probability: float,
) -> list[Target]:
    """The targets for last-position ``logits [d_vocab]``: the given ones, or the most probable tokens until
    their probabilities sum to ``logit_probability`` (at most ``max_logits``), as circuit-tracer picks them."""
    probs = torch.softmax(logits.float(), -1)
    if targets is None:
        top_p, top_i = torch.topk(probs, min(max_logits, probs.shape[0]))
        cutoff = int(torch.searchsorted(torch.cumsum(top_p, 0), logit_probability)) + 1
        ids = top_i[:cutoff].tolist()
    else:
        if isinstance(targets, (str, int, Target)):
            targets = [targets]
        if not targets:
            raise ValueError(
                "targets is empty; give tokens, Target directions, or None for the likeliest tokens"
            )
        if all(isinstance(t, Target) for t in targets):
            return list(targets)
        if any(isinstance(t, Target) for t in targets):
            raise TypeError("targets mixes tokens and Target directions; give one kind")
        ids = [token_id(model, t) for t in targets]
    w_u = model.unembed.weight.detach().float()  # [d_model, d_vocab]
    centred = w_u[:, ids] - w_u.mean(1, keepdim=True)  # [d_model, n_targets]
    return [Target(_text(model, t), centred[:, i].clone(), float(probs[t]), t) for i, t in enumerate(ids)]


def _text(model: Any, token: int) -> str:
    tokenizer = getattr(model, "tokenizer", None)
    return tokenizer.decode([token]) if tokenizer is not None else str(token)
