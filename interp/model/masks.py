"""Which keys each query may see, built once per forward pass and shared by every layer.

Three things restrict attention: padding (a key that is not a real token is never seen), causality (a query
sees no later key) and a sliding window (a query sees only the last ``window`` keys, itself included). Keys
and queries are indexed along the key axis, which with a KV cache spans the cached positions and the new ones;
the queries are the last ``n_query`` of them. Distances in a window count index steps, which between real
tokens equal real-token steps because padding is contiguous (all on the left or all on the right).

A layer asks for its mask by window. When nothing but plain causality applies to a square block of queries
and keys, the answer is ``None`` with ``is_causal`` set, so the fused kernel runs its own causal path and no
``[query, key]`` tensor is formed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class LayerMask:
    """One layer's mask: ``allowed [batch or 1, 1, query, key]`` (True where a query may attend), or ``None``
    with ``is_causal`` telling whether the plain causal rule applies."""

    allowed: torch.Tensor | None
    is_causal: bool

    def dense(self, n_query: int, n_key: int, device: torch.device) -> torch.Tensor | None:
        """The mask as a tensor for the explicit path, ``None`` when every key is allowed."""
        if self.allowed is not None or not self.is_causal:
            return self.allowed
        return torch.ones(n_query, n_key, dtype=torch.bool, device=device).tril(n_key - n_query)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> LayerMask:
        """This mask on ``device`` (itself when already there): a block on another device moves its inputs."""
        if self.allowed is None or self.allowed.device == torch.device(device):
            return self
        return LayerMask(self.allowed.to(device, non_blocking=non_blocking), self.is_causal)


@dataclass
class Masks:
    """The masks of one forward pass.

    Args:
        valid: ``[batch, key]`` True at real tokens, or ``None`` when every key is real.
        n_query: the new positions, the last ``n_query`` of the key axis.
        n_key: the length of the key axis (cached plus new).
        causal: whether queries may not see later keys.
        device: where the masks live.
    """

    valid: torch.Tensor | None
    n_query: int
    n_key: int
    causal: bool
    device: torch.device
    _built: dict = field(default_factory=dict, repr=False)

    def for_window(self, window: int | None) -> LayerMask:
        """The mask of a layer with this sliding window (``None``: full attention); built once per window."""
        if window is not None and window >= self.n_key:
            window = None  # a window longer than everything run is no restriction
        if window not in self._built:
            self._built[window] = self._build(window)
        return self._built[window]

    def _build(self, window: int | None) -> LayerMask:
        square = self.n_query == self.n_key
        if self.valid is None and window is None:
            if not self.causal or self.n_query == 1:
                return LayerMask(None, False)  # everything visible (one new query sees all the past)
            if square:
                return LayerMask(None, True)
        key = torch.arange(self.n_key, device=self.device)
        query = key[self.n_key - self.n_query :, None]  # [query, 1]
        allowed = torch.ones(self.n_query, self.n_key, dtype=torch.bool, device=self.device)
        if self.causal:
            allowed &= key <= query
        if window is not None:
            allowed &= key > query - window
        allowed = allowed[None, None]  # [1, 1, query, key]
        if self.valid is not None:
            allowed = allowed & self.valid[:, None, None, :]  # [batch, 1, query, key]
            # A padding query with nothing to see attends to itself, so no row is all -inf (its output is
            # never used).
            allowed = allowed | (key == query)
        return LayerMask(allowed, False)
