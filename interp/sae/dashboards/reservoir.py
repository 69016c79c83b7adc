"""Bounded tables that keep, per group, the entries with the smallest keys offered so far, and their payloads.

A dashboard keeps two such tables per feature: the ``top`` examples (key: minus the activation) and a uniform
``sample`` of the tokens where the feature fires (key: a hash of the token, :func:`sample_key`). Keeping the
``size`` smallest hashes is bottom-k sampling: the kept tokens are a uniform sample without replacement of
every token offered, and the table after any stream of offers depends only on the set of tokens offered, not
on their order or on how they were batched, so a resumed run keeps what an uninterrupted one keeps.

Keys are ``(primary, secondary)`` pairs compared in that order (``primary`` float32, ``secondary`` int64); an
empty slot holds ``(+inf, INT64_MAX)``. Each row is kept sorted, so its last slot is the entry to beat: an offer
is filtered against it first, and only the few offers that pass are sorted and merged, so the cost of a batch
is one comparison per offer plus work proportional to what enters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

INT64_MAX = torch.iinfo(torch.int64).max
_MIX = (-4658895280553007687, -7723592293110705685, -4265267296055464877)  # splitmix64's constants, as int64


def _logical_shift(x: torch.Tensor, bits: int) -> torch.Tensor:
    """``x >> bits`` as an unsigned 64-bit shift (torch shifts int64 arithmetically)."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def sample_key(item: torch.Tensor, position: torch.Tensor, feature: torch.Tensor, seed: int) -> torch.Tensor:
    """A pseudo-random int64 per token and feature (splitmix64 of the four numbers): the sample's key.

    A function of the token (``item``, ``position``), the feature's global number and ``seed`` only, so which
    tokens a feature's sample keeps does not depend on batching, resuming or the device.
    """
    x = item.long() * 1_000_003 + position.long()
    x = x * 2_654_435_761 + feature.long() + seed * 97_531
    for _ in range(2):
        x = x + _MIX[0]
        x = (x ^ _logical_shift(x, 30)) * _MIX[1]
        x = (x ^ _logical_shift(x, 27)) * _MIX[2]
        x = x ^ _logical_shift(x, 31)
    return x


def _lex_order(primary: torch.Tensor, secondary: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Indices that sort along ``dim`` by ``primary`` then ``secondary``."""
    order = secondary.argsort(dim=dim, stable=True)
    return order.gather(dim, primary.gather(dim, order).argsort(dim=dim, stable=True))


class Reservoir:
    """For each of ``n`` groups, the ``size`` entries with the smallest keys offered so far.

    Args:
        n: groups (features).
        size: entries kept per group.
        fields: payload name -> (shape of one entry, dtype); e.g. ``{"value": ((), torch.float32)}``.
        device: where the tables live.
    """

    def __init__(
        self,
        n: int,
        size: int,
        fields: Mapping[str, tuple[tuple[int, ...], torch.dtype]],
        device: torch.device | str = "cpu",
    ) -> None:
        self.size = size
        self.entered = 0  # offers that entered a table (the work beyond one comparison per offer)
        self.primary = torch.full((n, size), float("inf"), device=device)
        self.secondary = torch.full((n, size), INT64_MAX, dtype=torch.long, device=device)
        self.fields = {
            name: torch.zeros((n, size, *shape), dtype=dtype, device=device)
            for name, (shape, dtype) in fields.items()
        }

    @property
    def filled(self) -> torch.Tensor:
        """``[n, size]`` whether each slot holds an entry."""
        return self.secondary != INT64_MAX

    def offer(
        self,
        group: torch.Tensor,
        primary: torch.Tensor,
        secondary: torch.Tensor,
        payload: Callable[[torch.Tensor], dict[str, torch.Tensor]],
    ) -> None:
        """Offer entries ``[m]``; ``payload(selected)`` gives the fields of the offers at indices ``selected``
        (it is called only for the offers that can enter, so costly payloads are built for few)."""
        worst_p, worst_s = self.primary[group, -1], self.secondary[group, -1]
        beats = (primary < worst_p) | ((primary == worst_p) & (secondary < worst_s))
        chosen = beats.nonzero().squeeze(1)
        if chosen.numel() == 0:
            return
        g, p, s = group[chosen], primary[chosen], secondary[chosen]
        order = _lex_order(p, s)
        order = order[g[order].argsort(stable=True)]  # by group, then key
        chosen, g, p, s = chosen[order], g[order], p[order], s[order]
        groups, inverse, counts = torch.unique_consecutive(g, return_inverse=True, return_counts=True)
        starts = torch.cumsum(counts, 0) - counts
        rank = torch.arange(len(g), device=g.device) - starts[inverse]
        keep = rank < self.size  # more offers than slots in one group: only the best can enter
        chosen, inverse, rank, p, s = chosen[keep], inverse[keep], rank[keep], p[keep], s[keep]
        self.entered += len(chosen)
        u, k = len(groups), self.size
        new_p = torch.full((u, k), float("inf"), device=p.device)
        new_s = torch.full((u, k), INT64_MAX, dtype=torch.long, device=p.device)
        new_p[inverse, rank], new_s[inverse, rank] = p, s
        both_p = torch.cat([self.primary[groups], new_p], dim=1)  # [u, 2k]
        both_s = torch.cat([self.secondary[groups], new_s], dim=1)
        best = _lex_order(both_p, both_s, dim=1)[:, :k]  # [u, k]
        self.primary[groups] = both_p.gather(1, best)
        self.secondary[groups] = both_s.gather(1, best)
        data = payload(chosen)
        for name, table in self.fields.items():
            fresh = torch.zeros((u, k, *table.shape[2:]), dtype=table.dtype, device=table.device)
            fresh[inverse, rank] = data[name].to(table.dtype)
            merged = torch.cat([table[groups], fresh], dim=1)  # [u, 2k, ...]
            index = best.reshape(*best.shape, *([1] * (table.ndim - 2))).expand(-1, -1, *table.shape[2:])
            table[groups] = merged.gather(1, index)

    def state(self, prefix: str) -> dict[str, torch.Tensor]:
        """The tables as named tensors (for a checkpoint)."""
        out = {f"{prefix}.primary": self.primary, f"{prefix}.secondary": self.secondary}
        out.update({f"{prefix}.{name}": t for name, t in self.fields.items()})
        return out

    def load(self, prefix: str, tensors: Mapping[str, torch.Tensor]) -> None:
        """Restore the tables :meth:`state` gave."""
        self.primary.copy_(tensors[f"{prefix}.primary"])
        self.secondary.copy_(tensors[f"{prefix}.secondary"])
        for name, table in self.fields.items():
            table.copy_(tensors[f"{prefix}.{name}"])
