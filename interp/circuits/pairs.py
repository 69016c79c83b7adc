"""Clean and corrupted inputs, paired position for position, and the metric that compares them.

Edge patching swaps what one input would have carried for what another carries, position by position, so the
clean and corrupted token tensors must have one shape. Pairs of different lengths from one another are batched
with one shared ``attention_mask`` (pad on the right in a causal model, so real tokens never see padding);
twins that tokenize to different lengths must be padded or aligned by the caller first (choosing words that
are one token each, or dropping such pairs), since no position-wise correspondence exists between them.

A metric maps the logits of a batch to one number per pair, ``metric(logits, batch) -> [batch]``; scores,
circuit evaluations and faithfulness average it over pairs. With ``positions`` given, the model's logits are
computed at those positions only (the metric sees ``[batch, 1, d_vocab]``), which saves the unembedding of
every other position: for SmolLM2's 49k-token vocabulary that is a fifth of a forward pass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch

Metric = Callable[[torch.Tensor, "Pairs"], torch.Tensor]


@dataclass(frozen=True, eq=False)
class Pairs:
    """A batch of (clean, corrupted) inputs.

    Args:
        clean: ``[n, pos]`` token ids of the clean inputs (the behaviour a circuit should reproduce).
        corrupt: ``[n, pos]`` token ids of the corrupted inputs, the same shape as ``clean``.
        attention_mask: ``[n, pos]`` 1 for real tokens, 0 for padding, shared by both (default: all real).
        positions: ``[n]`` the position each pair's metric reads; the logits are computed there only.
        labels: per-pair tensors ``[n, ...]`` the metric reads (answer and foil token ids, for example); a
            batch slices them along with the tokens.
    """

    clean: torch.Tensor
    corrupt: torch.Tensor
    attention_mask: torch.Tensor | None = None
    positions: torch.Tensor | None = None
    labels: Mapping[str, torch.Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        clean, corrupt = (_as_ids(t, name) for t, name in ((self.clean, "clean"), (self.corrupt, "corrupt")))
        if clean.shape != corrupt.shape:
            raise ValueError(
                f"clean inputs have shape {list(clean.shape)} and corrupted ones {list(corrupt.shape)}: edge "
                "patching swaps activations position by position, so both need [n, pos] of one shape. Pad "
                "both to one length with a shared attention_mask, or align the pairs (e.g. pick words that "
                "tokenize to the same number of tokens) and drop those that cannot be"
            )
        n, n_pos = clean.shape
        if n == 0:
            raise ValueError("no pairs: clean and corrupt hold 0 rows")
        mask = self.attention_mask
        if mask is not None:
            mask = mask[None] if mask.ndim == 1 else mask
            if tuple(mask.shape) != (n, n_pos):
                raise ValueError(
                    f"attention_mask has shape {list(mask.shape)}; it must be [n, pos] = {[n, n_pos]}"
                )
            if not ((mask == 0) | (mask == 1)).all():
                raise ValueError("attention_mask must hold only 0 (padding) and 1 (real token)")
            mask = mask.to(torch.long)
            if bool((mask.sum(1) == 0).any()):
                raise ValueError("a pair has no real token (its attention_mask row is all 0)")
        positions = self.positions
        if positions is not None:
            positions = torch.as_tensor(positions).to(torch.long).reshape(-1)
            if positions.numel() != n:
                raise ValueError(f"positions has {positions.numel()} entries; give one per pair ({n})")
            if bool(((positions < 0) | (positions >= n_pos)).any()):
                raise IndexError(f"positions {positions.tolist()} fall outside 0..{n_pos - 1}")
            if mask is not None and not bool(mask.gather(1, positions[:, None].to(mask.device)).all()):
                raise ValueError("a pair's metric position is a padding position; point it at a real token")
        labels = {}
        for key, value in dict(self.labels).items():
            value = torch.as_tensor(value)
            if value.ndim == 0 or value.shape[0] != n:
                raise ValueError(
                    f"label {key!r} has shape {list(value.shape)}; it must be [n, ...] with n={n}"
                )
            labels[key] = value
        object.__setattr__(self, "clean", clean)
        object.__setattr__(self, "corrupt", corrupt)
        object.__setattr__(self, "attention_mask", mask)
        object.__setattr__(self, "positions", positions)
        object.__setattr__(self, "labels", labels)

    def __len__(self) -> int:
        return self.clean.shape[0]

    @property
    def n_pos(self) -> int:
        return self.clean.shape[1]

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

    def read_positions(self) -> torch.Tensor:
        """``[n]`` where each pair's metric reads: ``positions``, else its last real token."""
        if self.positions is not None:
            return self.positions
        if self.attention_mask is None:
            return torch.full((len(self),), self.n_pos - 1, dtype=torch.long)
        mask = self.attention_mask.cpu()
        return self.n_pos - 1 - mask.flip(1).argmax(1)  # the last 1 of each row, for either padding side

    def final_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """``[n, d_vocab]``: each pair's logits where its metric reads (from full or read-position logits)."""
        if logits.shape[1] == 1 and (self.positions is not None or self.n_pos == 1):
            return logits[:, 0]
        index = self.read_positions().to(logits.device)
        return logits[torch.arange(len(self), device=logits.device), index]


def _as_ids(tokens: torch.Tensor, name: str) -> torch.Tensor:
    if not isinstance(tokens, torch.Tensor) or tokens.dtype not in (torch.int64, torch.int32):
        raise TypeError(
            f"{name} must be an integer tensor of token ids [n, pos], got {getattr(tokens, 'dtype', tokens)!r}"
        )
    if tokens.ndim == 1:
        tokens = tokens[None]
    if tokens.ndim != 2 or tokens.shape[1] == 0:
        raise ValueError(f"{name} must be [n, pos] with pos >= 1, got shape {list(tokens.shape)}")
    return tokens


def logit_difference(logits: torch.Tensor, batch: Pairs) -> torch.Tensor:
    """``logit[answer] - logit[foil]`` where each pair's metric reads: labels ``answer`` and ``foil`` ``[n]``.

    Positive when the model prefers the clean input's answer; on the corrupted input (whose answer is the
    foil) it is negative.
    """
    for key in ("answer", "foil"):
        if key not in batch.labels:
            raise KeyError(
                f"logit_difference needs the label {key!r} ([n] token ids); the pairs have {sorted(batch.labels)}"
            )
    final = batch.final_logits(logits).float()  # [n, d_vocab]
    rows = torch.arange(len(batch), device=final.device)
    answer, foil = (batch.labels[k].to(final.device, torch.long).reshape(-1) for k in ("answer", "foil"))
    d_vocab = final.shape[-1]
    for key, ids in (("answer", answer), ("foil", foil)):
        outside = ids[(ids < 0) | (ids >= d_vocab)]
        if outside.numel():
            raise ValueError(
                f"label {key!r} holds token id {int(outside[0])}, outside this model's vocabulary "
                f"0..{d_vocab - 1}; give ids from the model's own tokenizer"
            )
    return final[rows, answer] - final[rows, foil]


def check_metric(value: object, batch: Pairs, where: str) -> torch.Tensor:
    """The metric's value as ``[batch]`` float, or an error that says what it returned and what is needed."""
    n = len(batch)
    if not isinstance(value, torch.Tensor):
        raise TypeError(
            f"the metric returned {type(value).__name__} {where}; it must return a tensor [batch]"
        )
    if tuple(value.shape) != (n,):
        hint = (
            " (a mean over the batch? return one value per pair; circuits average them)"
            if value.ndim == 0
            else ""
        )
        raise ValueError(
            f"the metric must return one number per pair, shape [batch] = [{n}], but returned shape "
            f"{list(value.shape)} {where}{hint}"
        )
    if not value.is_floating_point():
        raise TypeError(
            f"the metric returned {value.dtype} values {where}; it must return floating-point values"
        )
    if bool(torch.isnan(value).any()):
        raise ValueError(f"the metric returned NaN {where}")
    return value
