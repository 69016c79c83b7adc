"""The one metric type: ``metric(logits, batch) -> [batch]``, one value per row of the batch that was run.

Patching, attribution patching, SAE feature attribution, steering sweeps and every circuit algorithm measure
a behaviour the same way: they run a batch, hand the metric the model's output and the :class:`Batch` that
was run (its tokens, attention mask, where each row's metric reads, and per-row labels such as answer and foil
token ids), and get back one number per row. Where a caller reports one number (the clean and corrupted
metric of a patch, an attribution's gradient, a circuit's faithfulness) it averages the rows itself, so a
metric never reduces over the batch and one metric serves every caller: :func:`logit_difference` reads the
labels ``answer`` and ``foil`` wherever it is used.

What the batch is depends on the caller: patching passes the tokens of the run it measures (clean, corrupted
or patched), a steering sweep the prompts of each condition (with the label ``prompt``: each row's prompt
index), and circuits their :class:`~interp.circuits.Pairs`, which is a batch whose tokens are the clean inputs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch

Metric = Callable[[torch.Tensor, "Batch"], torch.Tensor]
"""``metric(logits, batch) -> [batch]``: one floating-point value per row of ``batch``."""


@dataclass(frozen=True, eq=False)
class Batch:
    """The rows a metric scores: the tokens that were run and what the metric reads of each row.

    Args:
        tokens: ``[n, pos]`` token ids of the run.
        attention_mask: ``[n, pos]`` 1 for real tokens, 0 for padding (default: all real).
        positions: ``[n]`` the position each row's metric reads (default: its last real token).
        labels: per-row tensors ``[n, ...]`` the metric reads (answer and foil token ids, for example).
    """

    tokens: torch.Tensor
    attention_mask: torch.Tensor | None = None
    positions: torch.Tensor | None = None
    labels: Mapping[str, torch.Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        tokens = as_ids(self.tokens, "tokens")
        if tokens.shape[0] == 0:
            raise ValueError("no rows: tokens hold 0 rows")
        object.__setattr__(self, "tokens", tokens)
        self._check_rows()

    def _check_rows(self) -> None:
        """Check the mask, positions and labels against ``tokens`` and store them normalised."""
        n, n_pos = self.tokens.shape
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
                raise ValueError("a row has no real token (its attention_mask row is all 0)")
        positions = self.positions
        if positions is not None:
            positions = torch.as_tensor(positions).to(torch.long).reshape(-1)
            if positions.numel() != n:
                raise ValueError(f"positions has {positions.numel()} entries; give one per row ({n})")
            if bool(((positions < 0) | (positions >= n_pos)).any()):
                raise IndexError(f"positions {positions.tolist()} fall outside 0..{n_pos - 1}")
            if mask is not None and not bool(mask.gather(1, positions[:, None].to(mask.device)).all()):
                raise ValueError("a row's metric position is a padding position; point it at a real token")
        labels = {}
        for key, value in dict(self.labels).items():
            value = torch.as_tensor(value)
            if value.ndim == 0 or value.shape[0] != n:
                raise ValueError(
                    f"label {key!r} has shape {list(value.shape)}; it must be [n, ...] with n={n}"
                )
            labels[key] = value
        object.__setattr__(self, "attention_mask", mask)
        object.__setattr__(self, "positions", positions)
        object.__setattr__(self, "labels", labels)

    def __len__(self) -> int:
        return self.tokens.shape[0]

    @property
    def n_pos(self) -> int:
        return self.tokens.shape[1]

    def read_positions(self) -> torch.Tensor:
        """``[n]`` where each row's metric reads: ``positions``, else its last real token."""
        if self.positions is not None:
            return self.positions
        if self.attention_mask is None:
            return torch.full((len(self),), self.n_pos - 1, dtype=torch.long)
        mask = self.attention_mask.cpu()
        return self.n_pos - 1 - mask.flip(1).argmax(1)  # the last 1 of each row, for either padding side

    def final_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """``[n, d_vocab]``: each row's logits where its metric reads.

        ``logits`` may be ``[n, pos, d_vocab]`` (every position), ``[n, 1, d_vocab]`` (computed at the read
        positions only) or ``[n, d_vocab]`` (already one position per row, as a steering sweep gives them).
        """
        if logits.ndim == 2:
            return logits
        if logits.shape[1] == 1 and (self.positions is not None or self.n_pos == 1):
            return logits[:, 0]
        index = self.read_positions().to(logits.device)
        return logits[torch.arange(len(self), device=logits.device), index]


def as_ids(tokens: torch.Tensor, name: str) -> torch.Tensor:
    """``tokens`` as ``[n, pos]`` integer ids (a ``[pos]`` row becomes one row), or an error naming ``name``."""
    if not isinstance(tokens, torch.Tensor) or tokens.dtype not in (torch.int64, torch.int32):
        raise TypeError(
            f"{name} must be an integer tensor of token ids [n, pos], got {getattr(tokens, 'dtype', tokens)!r}"
        )
    if tokens.ndim == 1:
        tokens = tokens[None]
    if tokens.ndim != 2 or tokens.shape[1] == 0:
        raise ValueError(f"{name} must be [n, pos] with pos >= 1, got shape {list(tokens.shape)}")
    return tokens


def logit_difference(logits: torch.Tensor, batch: Batch) -> torch.Tensor:
    """``logit[answer] - logit[foil]`` where each row's metric reads: labels ``answer`` and ``foil`` ``[n]``.

    Positive when the model prefers the answer; between twins whose answers swap (the corrupted input's answer
    is the clean one's foil) it is negative on the corrupted input.

    >>> batch = Batch(torch.tensor([[5, 6]]), labels={"answer": torch.tensor([2]), "foil": torch.tensor([0])})
    >>> logit_difference(torch.tensor([[[0.0, 0, 0], [1.0, 0, 5]]]), batch).tolist()
    [4.0]
    """
    for key in ("answer", "foil"):
        if key not in batch.labels:
            raise KeyError(
                f"logit_difference needs the label {key!r} ([n] token ids); the batch has {sorted(batch.labels)}"
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


def run_batches(
    clean_tokens: torch.Tensor,
    corrupt_tokens: torch.Tensor,
    attention_mask: torch.Tensor | None,
    labels: Mapping[str, torch.Tensor] | None,
) -> tuple[Batch, Batch]:
    """The batches a metric sees on the clean run and on the corrupt (or patched) one: same mask and labels."""
    labels = {} if labels is None else labels
    return Batch(clean_tokens, attention_mask, labels=labels), Batch(
        corrupt_tokens, attention_mask, labels=labels
    )


def check_signature(metric: object) -> None:
    """Refuse, before anything runs, a metric that cannot be called as ``metric(logits, batch)``.

    Metrics of patching, attribution patching and SAE feature attribution used to take the logits alone and
    return a scalar; such a metric is refused with what to write instead.
    """
    if not callable(metric):
        raise TypeError(
            f"metric is a {type(metric).__name__}; give a function metric(logits, batch) -> [batch]"
        )
    try:
        signature = inspect.signature(metric)
    except (TypeError, ValueError):  # some builtins have none: the call itself will tell
        return
    try:
        signature.bind(None, None)
    except TypeError:
        name = getattr(metric, "__name__", type(metric).__name__)
        raise TypeError(
            f"the metric {name}{signature} cannot be called as metric(logits, batch): metrics now take the "
            "logits and the Batch that was run and return one value per row (callers average them), so write "
            "e.g. `def metric(logits, batch): return logits[:, -1, answer] - logits[:, -1, foil]`"
        ) from None


def check_metric(value: object, batch: Batch, where: str) -> torch.Tensor:
    """The metric's value as ``[batch]`` float, or an error that says what it returned and what is needed."""
    n = len(batch)
    if not isinstance(value, torch.Tensor):
        raise TypeError(
            f"the metric returned {type(value).__name__} {where}; it must return a tensor [batch]"
        )
    if tuple(value.shape) != (n,):
        hint = (
            " (a mean over the batch? return one value per row; callers average them)"
            if value.ndim == 0
            else ""
        )
        raise ValueError(
            f"the metric must return one number per row, shape [batch] = [{n}], but returned shape "
            f"{list(value.shape)} {where}{hint}"
        )
    if not value.is_floating_point():
        raise TypeError(
            f"the metric returned {value.dtype} values {where}; it must return floating-point values"
        )
    if bool(torch.isnan(value).any()):
        raise ValueError(f"the metric returned NaN {where}")
    return value


def mean_metric(metric: Metric, logits: torch.Tensor, batch: Batch, where: str) -> torch.Tensor:
    """The checked metric averaged over the rows of ``batch``: a 0-d tensor, differentiable as the metric is."""
    return check_metric(metric(logits, batch), batch, where).mean()
