"""What a generation produced: :class:`Generation`."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from hooks import ActivationCache


@dataclass(frozen=True, kw_only=True)
class Generation:
    """What :func:`generate` produced.

    Attributes:
        tokens: LongTensor ``[batch, pos]``: each row's prompt and everything it generated (its EOS or the
            tokens holding its stop string included), padded after it finished; left-padded prompts unless
            ``padding_side="right"``.
        mask: LongTensor ``[batch, pos]``: 1 at real tokens, 0 at padding.
        prompt_lengths: real prompt tokens per row.
        new_tokens: per row, the generated ids that come before its stop (no EOS, nothing of a stop string).
        text: per row, the decoded new text, ending right before its stop; ``None`` without a tokenizer.
        stop_reasons: per row, ``"eos"``, ``"stop_string"``, ``"max_new_tokens"`` or, on the generation an
            exception carries, ``"error"`` for the rows that were still running.
        logits: with ``return_logits=True``, FloatTensor ``[batch, step, d_vocab]``: the next-token logits of
            each step, before temperature and filtering (a finished row's are those of its padding).
        cache: with ``return_cache=True``, the activations named by ``names_filter`` over ``tokens`` (one more
            forward, hooks in place).
    """

    tokens: torch.Tensor
    mask: torch.Tensor
    prompt_lengths: list[int]
    new_tokens: list[list[int]]
    text: list[str] | None
    stop_reasons: list[str]
    logits: torch.Tensor | None = None
    cache: ActivationCache | None = None

    def __repr__(self) -> str:
        lengths = [len(t) for t in self.new_tokens]
        return (
            f"Generation(batch={self.tokens.shape[0]}, new_tokens={lengths}, "
            f"stop_reasons={self.stop_reasons})"
        )
