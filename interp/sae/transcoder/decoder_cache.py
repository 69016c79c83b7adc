"""The decoder rows of a lazy cross-layer transcoder kept in memory, within a cap, for the next forward.

A lazy CLT reads decoder rows from its files when asked (a CLT over 26 layers of 16k features holds tens of
GiB of decoders, of which one prompt's features use a few thousand rows). Reading them again on every forward
of a spliced model costs a file read per source layer and output layer; this cache keeps what was read.

Policy: rows are kept per feature (all of a feature's ``n_out`` slices, ``n_out * d_model`` values), for as
long as they fit in ``max_bytes``; past it, the features used least recently are dropped first, never those of
the request in hand. One request never holds more than it asked for: a request larger than the cap is read and
returned without being kept. Rows are read once per request for all the missing features of one layer
together, so a forward over the same prompt again reads nothing, and a forward over another prompt reads only
the features that prompt adds. The rows kept are the file's values as the reader returns them, so what a
cached row gives is what a read gives, bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

DEFAULT_MAX_BYTES = 2 * 2**30
"""The default cap: 2 GiB of decoder rows."""


class DecoderCache:
    """Decoder rows by ``(layer, feature)``, read through ``read`` on a miss (see the module docstring).

    Args:
        read: ``(layer, features) -> [n_features, n_out, d_model]``; ``features`` a LongTensor, or ``None``
            for every row of the layer.
        n_features: features a layer.
        max_bytes: the cap on the rows kept; ``0`` keeps nothing.
    """

    def __init__(
        self, read: Callable[[int, torch.Tensor | None], torch.Tensor], n_features: int, max_bytes: int
    ):
        if max_bytes < 0:
            raise ValueError(f"max_bytes={max_bytes}; the decoder cache's cap must be >= 0 bytes")
        self.read, self.n_features, self.max_bytes = read, n_features, int(max_bytes)
        self._rows: dict[int, torch.Tensor] = {}  # layer -> [kept, n_out, d_model]
        self._features: dict[int, torch.Tensor] = {}  # layer -> [kept]: the feature of each kept row
        self._slot: dict[int, torch.Tensor] = {}  # layer -> [n_features]: its row among the kept, or -1
        self._used: dict[int, torch.Tensor] = {}  # layer -> [kept]: when each row was last asked for
        self._clock = 0
        self.reads = 0
        """Rows read from the files so far (a measure of what the cache saves)."""

    @property
    def nbytes(self) -> int:
        """Bytes of rows kept now."""
        return sum(r.numel() * r.element_size() for r in self._rows.values())

    def clear(self) -> None:
        """Drop every row kept."""
        for table in (self._rows, self._features, self._slot, self._used):
            table.clear()

    def rows(self, layer: int, features: torch.Tensor | None, out: int | None = None) -> torch.Tensor:
        """``[len(features), n_out, d_model]`` (``None``: every feature of ``layer``), from memory where kept;
        with ``out``, only that slice: ``[len(features), d_model]``."""
        self._clock += 1
        wanted = torch.arange(self.n_features) if features is None else features.long().cpu()
        slot = self._slot.get(layer)
        if slot is None:
            slot = self._slot[layer] = torch.full((self.n_features,), -1, dtype=torch.long)
        kept = slot[wanted]
        if layer in self._used and bool((kept >= 0).all()):  # all kept: the common case after a first forward
            self._used[layer][kept] = self._clock
            return self._rows[layer][kept] if out is None else self._rows[layer][kept, out]
        if layer in self._used:  # what this request uses stays, whatever it reads
            self._used[layer][kept[kept >= 0]] = self._clock
        missing = _in_order_unique(wanted[kept < 0])
        if len(missing):
            whole = len(missing) == self.n_features
            if whole:
                missing = torch.arange(self.n_features)  # the order read(layer, None) gives
            got = self.read(layer, None if whole else missing)
            self.reads += len(missing)
            if not self._make_room(len(missing) * _row_bytes(got)):
                answer = self._answer(layer, wanted, missing, got)  # too large to keep: given, not kept
                return answer if out is None else answer[:, out]
            self._keep(layer, missing, got)
        where = self._slot[layer][wanted]
        self._used[layer][where] = self._clock
        return self._rows[layer][where] if out is None else self._rows[layer][where, out]

    def _answer(
        self, layer: int, wanted: torch.Tensor, missing: torch.Tensor, got: torch.Tensor
    ) -> torch.Tensor:
        """The rows of ``wanted`` from ``got`` (the rows of ``missing``) and those kept, keeping none of ``got``."""
        out = got.new_empty((len(wanted), *got.shape[1:]))
        place = torch.full((self.n_features,), -1, dtype=torch.long)
        place[missing] = torch.arange(len(missing))
        fresh = place[wanted] >= 0
        out[fresh] = got[place[wanted[fresh]]]
        if not bool(fresh.all()):
            old = self._slot[layer][wanted[~fresh]]
            out[~fresh] = self._rows[layer][old]
            self._used[layer][old] = self._clock
        return out

    def _keep(self, layer: int, features: torch.Tensor, rows: torch.Tensor) -> None:
        if layer in self._rows:
            rows = torch.cat([self._rows[layer], rows])
            features = torch.cat([self._features[layer], features])
            used = torch.cat(
                [self._used[layer], torch.full((len(features) - len(self._used[layer]),), self._clock)]
            )
        else:
            used = torch.full((len(features),), self._clock)
        self._set(layer, rows, features, used)

    def _make_room(self, new: int) -> bool:
        """Drop the least recently used rows (none asked for by the request in hand) until ``new`` more bytes
        fit under the cap; whether they do."""
        if new > self.max_bytes:
            return False
        excess = self.nbytes + new - self.max_bytes
        if excess <= 0:
            return True
        layers = list(self._used)
        used = torch.cat([self._used[layer] for layer in layers])  # every kept row's last use
        owner = torch.cat([torch.full_like(self._used[layer], i) for i, layer in enumerate(layers)])
        size = torch.tensor([_row_bytes(self._rows[layer]) for layer in layers])
        order = used.argsort(stable=True)  # the oldest first
        order = order[used[order] < self._clock]  # the request in hand keeps its rows
        freed = size[owner[order]].cumsum(0)
        drop = order[: int((freed < excess).sum()) + 1]
        offsets = torch.tensor([0, *(len(self._used[layer]) for layer in layers)]).cumsum(0)
        for i, layer in enumerate(layers):
            mine = drop[owner[drop] == i] - offsets[i]
            if len(mine):
                keep = torch.ones(len(self._features[layer]), dtype=torch.bool)
                keep[mine] = False
                self._set(
                    layer, self._rows[layer][keep], self._features[layer][keep], self._used[layer][keep]
                )
        excess -= int(size[owner[drop]].sum())
        return excess <= 0

    def _set(self, layer: int, rows: torch.Tensor, features: torch.Tensor, used: torch.Tensor) -> None:
        self._rows[layer], self._features[layer], self._used[layer] = rows, features, used
        slot = torch.full((self.n_features,), -1, dtype=torch.long)
        slot[features] = torch.arange(len(features))
        self._slot[layer] = slot


def _row_bytes(rows: torch.Tensor) -> int:
    return math.prod(rows.shape[1:]) * rows.element_size()


def _in_order_unique(values: torch.Tensor) -> torch.Tensor:
    """``values`` without repeats, in the order of their first occurrence."""
    if len(values) < 2:
        return values
    uniq, inverse = torch.unique(values, return_inverse=True)
    first = torch.full((len(uniq),), len(values), dtype=torch.long)
    first.scatter_reduce_(0, inverse, torch.arange(len(values)), reduce="amin")
    return uniq[first.argsort()]
