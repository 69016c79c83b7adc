"""Clean and corrupted inputs, paired position for position, and the metric that compares them.

Edge patching swaps what one input would have carried for what another carries, position by position, so the
clean and corrupted token tensors must have one shape. Pairs of different lengths from one another are batched
with one shared ``attention_mask`` (pad on the right in a causal model, so real tokens never see padding);
twins that tokenize to different lengths must be padded or aligned by the caller first (choosing words that
are one token each, or dropping such pairs), since no position-wise correspondence exists between them.

A metric maps the logits of a batch to one number per pair, ``metric(logits, batch) -> [batch]``, with the
pairs as the batch (the one metric type of :mod:`interp.analysis.metric`); scores, circuit evaluations and
faithfulness average it over pairs. With ``positions`` given, the model's logits are
computed at those positions only (the metric sees ``[batch, 1, d_vocab]``), which saves the unembedding of
every other position: for SmolLM2's 49k-token vocabulary that is a fifth of a forward pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from interp.analysis.metric import Batch, Metric, as_ids, check_metric, logit_difference


@dataclass(frozen=True, eq=False, init=False)
class Pairs(Batch):
    """A batch of (clean, corrupted) inputs: a :class:`~interp.analysis.metric.Batch` of the clean inputs that
    also carries their corrupted twins.

    Args:
        clean: ``[n, pos]`` token ids of the clean inputs (the behaviour a circuit should reproduce).
        corrupt: ``[n, pos]`` token ids of the corrupted inputs, the same shape as ``clean``.
        attention_mask: ``[n, pos]`` 1 for real tokens, 0 for padding, shared by both (default: all real).
        positions: ``[n]`` the position each pair's metric reads; the logits are computed there only.
        labels: per-pair tensors ``[n, ...]`` the metric reads (answer and foil token ids, for example); a
            batch slices them along with the tokens.
    """

    corrupt: torch.Tensor

    def __init__(
        self,
        clean: torch.Tensor,
        corrupt: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        labels: Mapping[str, torch.Tensor] | None = None,
    ) -> None:
        clean, corrupt = as_ids(clean, "clean"), as_ids(corrupt, "corrupt")
        if clean.shape != corrupt.shape:
            raise ValueError(
                f"clean inputs have shape {list(clean.shape)} and corrupted ones {list(corrupt.shape)}: edge "
                "patching swaps activations position by position, so both need [n, pos] of one shape. Pad "
                "both to one length with a shared attention_mask, or align the pairs (e.g. pick words that "
                "tokenize to the same number of tokens) and drop those that cannot be"
            )
        if clean.shape[0] == 0:
            raise ValueError("no pairs: clean and corrupt hold 0 rows")
        object.__setattr__(self, "corrupt", corrupt)
        super().__init__(clean, attention_mask, positions, {} if labels is None else labels)

    @property
    def clean(self) -> torch.Tensor:
        """``[n, pos]`` the clean inputs: the batch's own tokens."""
        return self.tokens

    def __getitem__(self, rows: slice | torch.Tensor | list[int]) -> Pairs:
        """The pairs ``rows`` (a slice or indices), trimmed of padding columns no row of them uses."""
        if isinstance(rows, int):
            rows = slice(rows, rows + 1)
        if not isinstance(rows, slice):
            rows = torch.as_tensor(rows, dtype=torch.long)
        mask = None if self.attention_mask is None else self.attention_mask[rows]
        keep = self.n_pos
        if mask is not None:
            used = mask.any(0).nonzero()
            keep = int(used.max()) + 1 if len(used) else 1  # columns after the last real token of any row
            mask = mask[:, :keep]
        return Pairs(
            clean=self.clean[rows, :keep],
            corrupt=self.corrupt[rows, :keep],
            attention_mask=mask,
            positions=None if self.positions is None else self.positions[rows],
            labels={k: v[rows] for k, v in self.labels.items()},
        )

    def batches(self, batch_size: int) -> list[range]:
        """Consecutive row ranges of at most ``batch_size`` pairs (the plan every rank shares)."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(
                f"batch_size={batch_size!r}; it must be a positive integer (pairs per forward pass)"
            )
        return [range(s, min(s + batch_size, len(self))) for s in range(0, len(self), batch_size)]

    def to(self, device: torch.device | str) -> Pairs:
        """The same pairs with tokens and mask on ``device`` (labels stay where they are)."""
        mask = None if self.attention_mask is None else self.attention_mask.to(device)
        return Pairs(
            clean=self.clean.to(device),
            corrupt=self.corrupt.to(device),
            attention_mask=mask,
            positions=self.positions,
            labels=self.labels,
        )


__all__ = ["Metric", "Pairs", "check_metric", "logit_difference"]
