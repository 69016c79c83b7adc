"""Batched forward passes over texts: token log-probabilities, final-position logits and small caches.

Texts are right-padded into batches of ``batch_size`` in their given order (so a run is deterministic), run
once each, and handed back batch by batch with everything a caller needs to locate words: the ``Tokens``
batch (character offsets per token) and, for a causal model, each token's log-probability given the tokens
before it. Padding sits after the real tokens, so a causal model's activations at real positions do not see
it, and an encoder masks it out.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from tqdm import tqdm

from hooks import ActivationCache
from interp.tokens import Tokens


@dataclass
class Batch:
    """One forward pass over ``texts[start:start + len(tokens.texts)]``.

    Attributes:
        start: index of the batch's first text.
        tokens: the batch; ``tokens.ids``/``mask`` are ``[batch, pos]`` on the model's device.
        logprobs: ``[batch, pos]`` log-probability of each token given the ones before it (NaN at the first
            position and at padding); ``None`` for a model without an LM head.
        logits: ``[batch, pos, d_vocab]`` or the final stream of an encoder, on the CPU, float32.
        cache: the activations asked for, on the CPU (empty when none were).
    """

    start: int
    tokens: Tokens
    logprobs: torch.Tensor | None
    logits: torch.Tensor
    cache: ActivationCache | None

    def last(self) -> torch.Tensor:
        """``[batch]`` position of each row's last real token."""
        return self.tokens.mask.sum(1).cpu() - 1


def has_lm_head(model) -> bool:
    """Whether the model predicts tokens (an encoder loaded without a head does not)."""
    return model.cfg.lm_head != "none" and model.cfg.causal


def prepend_bos(model, choice: bool | None = None) -> bool | None:
    """The ``prepend_bos`` to tokenize with: ``choice`` when given (``--prepend-bos``/``--no-prepend-bos``),
    else BOS for causal scoring when the vocabulary has one, so the first word is scored too."""
    if choice is not None:
        return choice
    tokenizer = model.tokenizer
    return True if model.cfg.causal and tokenizer.bos_id is not None else None


def bos_prepended(model, choice: bool | None = None) -> bool:
    """Whether the texts the model reads start with a BOS token (for the report)."""
    value = prepend_bos(model, choice)
    return bool(model.tokenizer.prepends_bos) if value is None else value


@torch.no_grad()
def run_batches(
    model,
    texts: Sequence[str],
    *,
    batch_size: int,
    names_filter=None,
    progress: tqdm | None = None,
    bos: bool | None = None,
) -> Iterator[Batch]:
    """Run ``model`` over ``texts`` in batches, yielding one :class:`Batch` each (``bos``: see
    :func:`prepend_bos`)."""
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size}; it must be at least 1")
    lm = has_lm_head(model)
    for start in range(0, len(texts), batch_size):
        chunk = list(texts[start : start + batch_size])
        tokens = model.to_tokens(chunk, prepend_bos=prepend_bos(model, bos), padding_side="right")
        ids, mask = tokens
        if names_filter is None:
            out, cache = model(ids, mask), None
        else:
            out, cache = model.run_with_cache(ids, mask, names_filter=names_filter, device="cpu")
        out = out.float().cpu()  # [batch, pos, d_vocab] or [batch, pos, d_model]
        logprobs = None
        if lm:
            lp = out[:, :-1].log_softmax(-1)  # [batch, pos - 1, d_vocab]
            taken = lp.gather(-1, ids[:, 1:, None].cpu()).squeeze(-1)  # [batch, pos - 1]
            logprobs = torch.cat([torch.full((len(chunk), 1), float("nan")), taken], dim=1)
            logprobs[~mask.cpu().bool()] = float("nan")
        if progress is not None:
            progress.update(len(chunk))
        yield Batch(start, tokens, logprobs, out, cache)


def span_sum(batch: Batch, row: int, start: int, end: int | None = None) -> float:
    """Sum of the log-probabilities of the tokens of ``row`` covering characters ``[start, end)``;
    ``end=None``: every token that starts at or after ``start``."""
    offsets = batch.tokens.offsets[row]  # [pos, 2]
    real = batch.tokens.mask[row].cpu().bool() & ~batch.tokens.special[row]
    if end is None:
        chosen = real & (offsets[:, 0] >= start)
    else:
        chosen = torch.zeros_like(real)
        chosen[batch.tokens.span_positions(start, end, row)] = True
    values = batch.logprobs[row][chosen]
    if bool(values.isnan().any()):
        raise ValueError(
            f"a scored token has no log-probability (it is the first token) in {batch.tokens.texts[row]!r}"
        )
    return float(values.sum())


def scored_sum(batch: Batch, row: int) -> float:
    """Sum of the log-probabilities of every token of ``row`` that has one (all but a first token that no
    BOS predicts)."""
    real = batch.tokens.mask[row].cpu().bool() & ~batch.tokens.special[row]
    values = batch.logprobs[row][real]
    return float(values[~values.isnan()].sum())


def tail_sum(batch: Batch, row: int, start: int) -> float:
    """Sum of the log-probabilities of the tokens of ``row`` from position ``start`` to its last real token
    (lm-eval-harness's continuation: the tokens after those of the context)."""
    n_real = int(batch.tokens.mask[row].sum())
    if not 0 < start < n_real:
        raise ValueError(
            f"the context covers {start} of the {n_real} tokens of {batch.tokens.texts[row]!r}; nothing to score"
        )
    return float(batch.logprobs[row, start:n_real].sum())
