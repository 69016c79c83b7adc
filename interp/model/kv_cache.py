"""The KV cache: every layer's keys and values for the positions run so far, so a step runs only new tokens.

Keys are stored after their norm and rotary (what attention reads), in the hook layout
``[batch, pos, kv_head, d_head]``, in buffers that grow by doubling so an append is a copy into place rather
than a concatenation of everything so far. The cache also remembers which cached positions are real tokens and
how many real tokens each row has seen, so the next positions continue from each row's own length and left
padding stays invisible.

A forward pass writes its layers' new keys and values past the committed length, and :meth:`KVCache.commit`
advances the length only once the whole pass has succeeded: a pass that raises leaves the cache as it was.
"""

from __future__ import annotations

import torch


class KVCache:
    """Keys and values of ``n_layers`` layers for one batch of sequences.

    Args:
        n_layers: layers of the model.
        capacity: positions to allocate for at first (grown by doubling when exceeded); e.g. the prompt
            length plus the tokens to generate.

    >>> cache = KVCache(n_layers=2, capacity=8)
    >>> len(cache)
    0
    """

    def __init__(self, n_layers: int, capacity: int | None = None) -> None:
        self.n_layers = n_layers
        self.capacity = capacity
        self.keys: list[torch.Tensor | None] = [None] * n_layers
        self.values: list[torch.Tensor | None] = [None] * n_layers
        self.valid: torch.Tensor | None = None  # [batch, length] True at real tokens
        self.real_lengths: torch.Tensor | None = None  # [batch] real tokens seen per row
        self.length = 0

    def __len__(self) -> int:
        return self.length

    @property
    def batch_size(self) -> int | None:
        return None if self.valid is None else self.valid.shape[0]

    def positions(self, new_mask: torch.Tensor) -> torch.Tensor:
        """Positions ``[batch, new]`` of new tokens: each row continues from its own count of real tokens."""
        start = 0 if self.real_lengths is None else self.real_lengths[:, None]
        return (start + new_mask.long().cumsum(-1) - 1).clamp(min=0)

    def key_mask(self, new_mask: torch.Tensor) -> torch.Tensor:
        """``[batch, length + new]``: the real tokens among cached and new keys."""
        new = new_mask.bool()
        if self.valid is None:
            return new
        if self.valid.shape[0] != new.shape[0]:
            raise ValueError(
                f"the KV cache holds {self.valid.shape[0]} sequences but this step has {new.shape[0]}; "
                "a cache serves one batch"
            )
        return torch.cat([self.valid, new], dim=1)

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store a layer's new keys and values ``[batch, new, kv_head, d_head]`` after the committed length
        and return that layer's keys and values for every position, cached and new (views, not copies)."""
        end = self.length + k.shape[1]
        store_k, store_v = self.keys[layer], self.values[layer]
        if store_k is None or store_k.shape[1] < end or store_k.dtype != k.dtype:
            store_k, store_v = self._grow(layer, k, v, end)
        store_k[:, self.length : end] = k
        store_v[:, self.length : end] = v
        return store_k[:, :end], store_v[:, :end]

    def _grow(
        self, layer: int, k: torch.Tensor, v: torch.Tensor, end: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        old_k, old_v = self.keys[layer], self.values[layer]
        size = max(end, self.capacity or 0, 2 * (old_k.shape[1] if old_k is not None else 0))
        new_k = k.new_empty(k.shape[0], size, *k.shape[2:])  # [batch, capacity, kv_head, d_head]
        new_v = v.new_empty(v.shape[0], size, *v.shape[2:])
        if old_k is not None and self.length:
            new_k[:, : self.length] = old_k[:, : self.length]
            new_v[:, : self.length] = old_v[:, : self.length]
        self.keys[layer], self.values[layer] = new_k, new_v
        return new_k, new_v

    def commit(self, new_mask: torch.Tensor) -> None:
        """Advance past a forward pass that appended ``new_mask.shape[1]`` positions to every layer."""
        self.valid = self.key_mask(new_mask)
        counts = new_mask.long().sum(-1)
        self.real_lengths = counts if self.real_lengths is None else self.real_lengths + counts
        self.length += new_mask.shape[1]

    def reorder(self, rows: torch.Tensor) -> None:
        """Keep only ``rows`` of the batch (in that order), e.g. to drop finished sequences."""
        for store in (self.keys, self.values):
            for layer, t in enumerate(store):
                if t is not None:
                    store[layer] = t[rows]
        if self.valid is not None:
            self.valid = self.valid[rows]
            self.real_lengths = self.real_lengths[rows]

    def select(self, rows: torch.Tensor) -> KVCache:
        """A new cache holding ``rows`` of this one's batch, in that order; rows may repeat (to run one cached
        prefix under several edits at once). This cache is left as it is."""
        out = KVCache(self.n_layers, self.capacity)
        out.keys = [None if t is None else t[rows] for t in self.keys]
        out.values = [None if t is None else t[rows] for t in self.values]
        if self.valid is not None:
            out.valid, out.real_lengths = self.valid[rows], self.real_lengths[rows]
        out.length = self.length
        return out

    def nbytes(self) -> int:
        """Bytes held by the stored keys and values."""
        return sum(t.nbytes for store in (self.keys, self.values) for t in store if t is not None)
