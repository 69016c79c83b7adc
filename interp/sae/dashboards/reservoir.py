"""Bounded tables that keep, per group, the entries with the smallest keys offered so far, and their payloads.

A dashboard keeps two such tables per feature: the ``top`` examples (key: the activation, largest first, see
:func:`top_key`) and a uniform ``sample`` of the tokens where the feature fires (key: a hash of the token,
:func:`sample_key`). Keeping the ``size`` smallest hashes is bottom-k sampling: the kept tokens are a uniform
sample without replacement of every token offered, and the table after any stream of offers depends only on
the set of tokens offered, not on their order or on how they were batched, so a resumed run keeps what an
uninterrupted one keeps.

Keys are int64 (an empty place holds ``INT64_MAX``), kept sorted per group, each with a pointer to the slot
holding its payload. An offer is first compared with its group's largest kept key, and only the offers that
beat it go further; for the groups they reach, the sorted keys and the sorted offers are merged (each one's
place in the other found by binary search), and each entering offer's payload is written into the slot of an
entry it pushed out. A batch therefore costs one comparison per offer plus work proportional to the groups
reached and what enters; payloads never move.
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

    A function of the token (``item``, ``position``), the feature's number in its dictionary (its
    ``featureIndex``) and ``seed`` only, so which tokens a feature's sample keeps does not depend on batching,
    resuming, the device, or which other features the pass reads.
    """
    x = item.long() * 1_000_003 + position.long()
    x = x * 2_654_435_761 + feature.long() + seed * 97_531
    for _ in range(2):
        x = x + _MIX[0]
        x = (x ^ _logical_shift(x, 30)) * _MIX[1]
        x = (x ^ _logical_shift(x, 27)) * _MIX[2]
        x = x ^ _logical_shift(x, 31)
    return x


def top_key(values: torch.Tensor, tiebreak: torch.Tensor) -> torch.Tensor:
    """An int64 that orders by ``values`` descending, then by the low 32 bits of ``tiebreak``: the float's bits
    mapped to an order-preserving int32 (negatives flipped) in the high half."""
    bits = (-values.float()).view(torch.int32).long()
    ordered = torch.where(bits < 0, bits ^ 0x7FFFFFFF, bits)  # monotone in the float, as a signed int32
    return (ordered << 32) | (tiebreak & 0xFFFFFFFF)


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
        self.keys = torch.full((n, size), INT64_MAX, dtype=torch.long, device=device)  # sorted per group
        self.slots = torch.arange(size, device=device).repeat(n, 1)  # where each key's payload is
        self.fields = {
            name: torch.zeros((n, size, *shape), dtype=dtype, device=device)
            for name, (shape, dtype) in fields.items()
        }

    def offer(
        self,
        group: torch.Tensor,
        key: torch.Tensor,
        payload: Callable[[torch.Tensor], dict[str, torch.Tensor]],
    ) -> None:
        """Offer entries ``[m]`` (their keys unique); ``payload(selected)`` gives the fields of the offers at
        indices ``selected`` (called only for the offers that enter, so costly payloads are built for few)."""
        chosen = (key < self.keys[group, -1]).nonzero().squeeze(1)
        if chosen.numel() == 0:
            return
        g, k = group[chosen], key[chosen]
        order = k.argsort(stable=True)
        order = order[g[order].argsort(stable=True)]  # by group, then key
        chosen, g, k = chosen[order], g[order], k[order]
        groups, inverse, counts = torch.unique_consecutive(g, return_inverse=True, return_counts=True)
        rank = torch.arange(len(g), device=g.device) - (torch.cumsum(counts, 0) - counts)[inverse]
        fits = rank < self.size  # more offers than places in one group: only the best can enter
        chosen, inverse, rank, k = chosen[fits], inverse[fits], rank[fits], k[fits]
        u, size, c = len(groups), self.size, int(rank.max()) + 1
        offered = torch.full((u, c), INT64_MAX, dtype=torch.long, device=k.device)  # sorted per row
        place = torch.full((u, c), -1, dtype=torch.long, device=k.device)  # index into ``chosen``
        offered[inverse, rank], place[inverse, rank] = k, torch.arange(len(k), device=k.device)
        old, old_slots = self.keys[groups], self.slots[groups]  # [u, size]
        # a stable merge: each key's place is its rank in its own row plus the keys of the other row before it
        at_new = torch.arange(c, device=k.device) + torch.searchsorted(old, offered, right=True)  # [u, c]
        at_old = torch.arange(size, device=k.device) + torch.searchsorted(offered, old)  # [u, size]
        keys = torch.full((u, size + c), INT64_MAX, dtype=torch.long, device=k.device)
        keys.scatter_(1, at_old, old)
        keys.scatter_(
            1, at_new, offered
        )  # padding sorts after every old key, so it never lands in the first size
        out = at_old >= size  # pushed out (or empty): their slots are free
        enters = at_new < size  # [u, c]; per row exactly as many as are pushed out
        r_in, c_in = enters.nonzero(as_tuple=True)
        r_out, c_out = out.nonzero(as_tuple=True)  # row-major, so each row's entries pair up in order
        slots = torch.full((u, size + c), -1, dtype=torch.long, device=k.device)
        slots.scatter_(1, at_old, old_slots)
        slots[r_in, at_new[r_in, c_in]] = old_slots[r_out, c_out]
        self.keys[groups], self.slots[groups] = keys[:, :size], slots[:, :size]
        selected = chosen[place[r_in, c_in]]
        self.entered += len(selected)
        data = payload(selected)
        target, slot = groups[r_in], old_slots[r_out, c_out]
        for name, table in self.fields.items():
            table[target, slot] = data[name].to(table.dtype)

    def sorted(self, rows: torch.Tensor) -> dict[str, torch.Tensor]:
        """Groups ``rows``' entries in key order: ``filled`` ``[n, size]``, ``keys`` and every field."""
        keys, slots = self.keys[rows], self.slots[rows]
        out = {"filled": keys != INT64_MAX, "keys": keys}
        for name, table in self.fields.items():
            part = table[rows]
            index = slots.reshape(*slots.shape, *([1] * (part.ndim - 2))).expand(-1, -1, *part.shape[2:])
            out[name] = part.gather(1, index)
        return out

    @property
    def filled(self) -> torch.Tensor:
        """``[n, size]`` whether each place holds an entry."""
        return self.keys != INT64_MAX

    def state(self, prefix: str) -> dict[str, torch.Tensor]:
        """The tables as named tensors (for a checkpoint)."""
        out = {f"{prefix}.keys": self.keys, f"{prefix}.slots": self.slots}
        out.update({f"{prefix}.{name}": t for name, t in self.fields.items()})
        return out

    def load(self, prefix: str, tensors: Mapping[str, torch.Tensor]) -> None:
        """Restore the tables :meth:`state` gave."""
        self.keys.copy_(tensors[f"{prefix}.keys"])
        self.slots.copy_(tensors[f"{prefix}.slots"])
        for name, table in self.fields.items():
            table.copy_(tensors[f"{prefix}.{name}"])
