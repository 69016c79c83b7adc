"""``transformer_lens.evals``: the induction loss, the one evaluation the demos call without a data set."""

from __future__ import annotations

from typing import Any

import torch

LOW, HIGH = 100, 20000
"""The token ids TransformerLens draws from: ``randint(100, 20000)``."""


@torch.inference_mode()
def induction_loss(
    model: Any,
    tokenizer: Any = None,
    batch_size: int = 4,
    subseq_len: int = 384,
    prepend_bos: bool | None = None,
    device: str | torch.device | None = None,
) -> torch.Tensor:
    """Mean next-token loss on the second half of random token sequences repeated twice, as TransformerLens 3
    defines it: a model with induction heads predicts the second copy well.

    The ids are drawn uniformly from 100 to 19999 with torch's global random generator (seed it with
    ``torch.manual_seed`` for a repeatable value); each row is ``subseq_len`` ids twice. With ``prepend_bos``
    (default: ``model.cfg.default_prepend_bos``) the row's *first id is replaced* by BOS, not preceded by it,
    so the rows stay ``2 * subseq_len`` long. The mean is over the per-token losses from position
    ``subseq_len + 1`` on (the predictions of ids ``subseq_len + 2`` onwards). ``device`` (default: the
    model's) is where the ids go; TransformerLens's default is ``"cuda"``.

    Raises:
        ValueError: the vocabulary does not hold the ids drawn, or the rows do not fit the context.
    """
    vocab, n_ctx = model.cfg.d_vocab, model.cfg.n_ctx
    if vocab < HIGH:
        raise ValueError(
            f"induction_loss draws token ids from {LOW} to {HIGH - 1}, as TransformerLens does; this model's "
            f"vocabulary has d_vocab={vocab}; use a model with at least {HIGH} tokens"
        )
    if n_ctx is not None and 2 * subseq_len > n_ctx:
        raise ValueError(
            f"induction_loss runs rows of 2 * subseq_len = {2 * subseq_len} tokens; this model's context is "
            f"n_ctx={n_ctx}; pass subseq_len <= {n_ctx // 2}"
        )
    first = torch.randint(LOW, HIGH, (batch_size, subseq_len))  # [batch, pos]
    tokens = torch.cat([first, first], dim=1)  # [batch, 2 * pos]
    if prepend_bos if prepend_bos is not None else model.cfg.default_prepend_bos:
        tokens[:, 0] = _bos_id(tokenizer if tokenizer is not None else model.tokenizer)
    tokens = tokens.to(device if device is not None else model.device)
    per_token = model.loss_fn(model(tokens), tokens, per_token=True)  # [batch, 2 * pos - 1]
    return per_token[:, subseq_len + 1 :].mean()


def _bos_id(tokenizer: Any) -> int:
    """BOS of interp's tokenizer (``bos_id``) or of a Hugging Face one (``bos_token_id``)."""
    bos = getattr(tokenizer, "bos_id", None)
    if bos is None:
        bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        raise ValueError("prepend_bos needs a tokenizer with a BOS token; pass prepend_bos=False")
    return int(bos)
