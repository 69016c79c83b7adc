"""Per-feature histograms of activations whose range follows the largest activation seen, with exact counts.

A feature's range is not known until the pass ends, so its bins are laid out below ``top = 2**e``, the smallest
power of two above every activation seen so far (one ``e`` per feature). Two histograms of the active tokens
(activation > 0):

- ``linear``: :data:`LINEAR_BINS` equal bins over ``[0, top)``, bin ``floor(v * LINEAR_BINS / top)``; when
  ``top`` doubles, neighbouring bins merge in pairs. This is the histogram drawn.
- ``log``: :data:`PER_OCTAVE` bins per octave below ``top`` for :data:`OCTAVES` octaves, then one bin for all
  smaller values; bin ``floor(PER_OCTAVE * log2(top / v))``; when ``top`` doubles, every bin moves
  ``PER_OCTAVE`` bins down and the lowest merge into the last. Quantiles are read from it, to within one bin
  (a factor ``2 ** (1 / PER_OCTAVE)``, 9%).

Bins are computed with ``frexp`` and ``ldexp`` (``v = m * 2**x``), so where a value falls depends on ``v`` and
``top`` by exact arithmetic: a value counted before ``top`` grew lies in the bin it would have been counted in
afterwards, and the counts equal those of a histogram made once at the end with the final ``top``.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

LINEAR_BINS = 64
PER_OCTAVE = 8
OCTAVES = 16
LOG_BINS = PER_OCTAVE * OCTAVES + 1
EMPTY = -(2**30)
"""The exponent of a feature that has not fired."""


def log_bins(values: torch.Tensor, top: torch.Tensor) -> torch.Tensor:
    """The log bin of each positive value under exponents ``top`` (both ``[m]``)."""
    mantissa, exponent = torch.frexp(values.float())  # values = mantissa * 2**exponent, mantissa in [0.5, 1)
    within = torch.floor(-torch.log2(mantissa) * PER_OCTAVE).long()  # 0..PER_OCTAVE
    return ((top.long() - exponent.long()) * PER_OCTAVE + within).clamp(max=LOG_BINS - 1)


def linear_bins(values: torch.Tensor, top: torch.Tensor) -> torch.Tensor:
    """The linear bin of each positive value under exponents ``top``."""
    scale = (
        LINEAR_BINS.bit_length() - 1 - top
    ).float()  # v * LINEAR_BINS / 2**top = ldexp(v, log2(bins) - top)
    return torch.ldexp(values.float(), scale).floor().long().clamp(0, LINEAR_BINS - 1)


class Histograms:
    """The two histograms and the exponent ``top`` of ``n`` features."""

    def __init__(self, n: int, device: torch.device | str = "cpu") -> None:
        self.top = torch.full((n,), EMPTY, dtype=torch.int32, device=device)
        self.linear = torch.zeros((n, LINEAR_BINS), dtype=torch.long, device=device)
        self.log = torch.zeros((n, LOG_BINS), dtype=torch.long, device=device)

    def add(self, feature: torch.Tensor, values: torch.Tensor) -> None:
        """Count positive ``values`` of features ``feature`` (both ``[m]``)."""
        _, exponent = torch.frexp(values.float())
        top = self.top.scatter_reduce(0, feature, exponent.int(), "amax")
        grew = (top > self.top) & (self.top != EMPTY)
        if grew.any():
            rows = grew.nonzero().squeeze(1)
            self._merge(rows, (top - self.top)[rows].long())
        self.top.copy_(top)  # in place: the table keeps its one allocation
        e = top[feature]
        ones = torch.ones_like(feature)
        self.linear.view(-1).index_add_(0, feature * LINEAR_BINS + linear_bins(values, e), ones)
        self.log.view(-1).index_add_(0, feature * LOG_BINS + log_bins(values, e), ones)

    def _merge(self, rows: torch.Tensor, shift: torch.Tensor) -> None:
        """Move the counts of features ``rows`` to a ``top`` larger by ``2**shift``."""
        shift = shift.clamp(max=62)[:, None]  # [k, 1]
        lin = torch.arange(LINEAR_BINS, device=rows.device).expand(len(rows), -1) >> shift
        self.linear[rows] = torch.zeros_like(self.linear[rows]).scatter_add_(1, lin, self.linear[rows])
        log = (torch.arange(LOG_BINS, device=rows.device) + shift * PER_OCTAVE).clamp(max=LOG_BINS - 1)
        self.log[rows] = torch.zeros_like(self.log[rows]).scatter_add_(1, log, self.log[rows])

    def quantiles(
        self, rows: torch.Tensor, fractions: torch.Tensor, low: torch.Tensor, high: torch.Tensor
    ) -> torch.Tensor:
        """``[n, q]``: for features ``rows``, the activation below which each fraction of the active tokens lie.

        Read from the log histogram, interpolated in log space within the bin, and clamped to each feature's
        ``[low, high]`` (its smallest and largest activation, ``[n]``); zero for a feature that never fired.
        """
        counts = self.log[rows].double()  # [n, bins], bin 0 holds the largest values
        total = counts.sum(1, keepdim=True)  # [n, 1]
        above = (1 - fractions.double())[None, :] * total  # [n, q] tokens above the quantile
        cum = counts.cumsum(1)  # [n, bins]
        b = torch.searchsorted(cum, above, right=True).clamp(max=LOG_BINS - 1)  # the bin holding it
        before = torch.where(b > 0, cum.gather(1, (b - 1).clamp(min=0)), torch.zeros_like(above))
        inside = ((above - before) / counts.gather(1, b).clamp(min=1)).clamp(0, 1)
        depth = (b.double() + inside) / PER_OCTAVE  # octaves below top
        value = torch.exp2(self.top[rows].double()[:, None] - depth)
        value = torch.minimum(torch.maximum(value, low.double()[:, None]), high.double()[:, None])
        return torch.where(total > 0, value, torch.zeros_like(value)).float()

    def drawn(self, rows: torch.Tensor, high: torch.Tensor) -> list[tuple[list[float], float]]:
        """For features ``rows``: the linear counts from 0 up to the bin holding each one's largest activation
        ``high``, and that range's end (``([], 0.0)`` for a feature that never fired)."""
        top = self.top[rows]
        fired = top != EMPTY
        last = linear_bins(high.clamp(min=1e-30), torch.where(fired, top, 0)).tolist()
        width = torch.ldexp(torch.ones_like(high, dtype=torch.float64), top.double()) / LINEAR_BINS
        counts = self.linear[rows].double().cpu().numpy()
        return [
            (counts[i, : last[i] + 1].tolist(), (last[i] + 1) * float(width[i])) if ok else ([], 0.0)
            for i, ok in enumerate(fired.tolist())
        ]

    def state(self, prefix: str) -> dict[str, torch.Tensor]:
        return {f"{prefix}.top": self.top, f"{prefix}.linear": self.linear, f"{prefix}.log": self.log}

    def load(self, prefix: str, tensors: Mapping[str, torch.Tensor]) -> None:
        self.top.copy_(tensors[f"{prefix}.top"])
        self.linear.copy_(tensors[f"{prefix}.linear"])
        self.log.copy_(tensors[f"{prefix}.log"])
