"""Training rows for a Lorsa: whole sequences, each a layer's attention input and output at every position.

A Lorsa head at a position reads every earlier position, so it trains on sequences, not on shuffled tokens.
:class:`SequenceSource` offers the trainer's row interface (:class:`~interp.sae.training.data.RowSource`: chunks,
``read``, ``gather``, ``fingerprint``) with one row per sequence: ``context`` positions of the input and output,
``[context * 2 * d_model]``, position by position (a position's input, then its output). The trainer shuffles
sequences as it shuffles tokens; its batch and token counts stay in tokens (``tokens_per_row = context``).

From a pair of tensors ``[sequences, context, d_model]``, or from an activation store that cached the two hooks
at every position of its items (``interp cache``): each item's first ``context`` positions make a sequence
(default ``context``: the shortest item's length; items shorter than ``context`` are left out, and said so).
Positions are kept from the start of each item, since a head at a later position reads the earlier ones; the
first ``min_position`` of each are left out of the loss, not out of the sequence.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from interp.sae.training.data import data_fingerprint

CHUNK_SEQUENCES = 256


class SequenceSource:
    """Sequences of one layer's input and output hooks (see the module docstring).

    Args:
        source: ``(inputs, outputs)``, each ``[sequences, context, d_model]``, or an activation store.
        hooks: the input and output hooks (the store's names; recorded for tensors).
        context: positions per sequence (default: every position of the tensors, the shortest item of a store).
        min_position: positions at the start of each sequence the loss leaves out.
    """

    def __init__(
        self, source: Any, hooks: tuple[str, str], context: int | None = None, min_position: int = 0
    ) -> None:
        self.hook_name = list(hooks)
        self.min_position = min_position
        self.store = None
        self.model_name = None
        self.dropped = 0
        if isinstance(source, tuple):
            self._from_tensors(source, context)
        elif hasattr(source, "hook_names"):
            self._from_store(source, hooks, context)
        else:
            raise TypeError(
                "a Lorsa trains on (inputs, outputs) tensors [sequences, context, d_model] or on an activation "
                f"store, got {type(source).__name__}"
            )
        if self.context <= min_position:
            raise ValueError(
                f"min_position={min_position} leaves nothing of sequences of context={self.context} to train on"
            )
        self.tokens_per_row = self.context
        self.d_in = self.context * 2 * self.d_model
        self.chunks = [
            (s, min(CHUNK_SEQUENCES, self.n_rows - s)) for s in range(0, self.n_rows, CHUNK_SEQUENCES)
        ]

    def _from_tensors(self, pair: tuple, context: int | None) -> None:
        if len(pair) != 2 or not all(isinstance(t, torch.Tensor) and t.ndim == 3 for t in pair):
            raise TypeError("a tensor source is a pair (inputs, outputs), each [sequences, context, d_model]")
        x, y = pair
        if x.shape != y.shape:
            raise ValueError(f"inputs {tuple(x.shape)} and outputs {tuple(y.shape)} differ in shape")
        self.context = x.shape[1] if context is None else context
        if self.context > x.shape[1]:
            raise ValueError(f"context={context}, but the sequences hold {x.shape[1]} positions")
        self.d_model = x.shape[2]
        self.tensor = torch.cat([x[:, : self.context], y[:, : self.context]], dim=-1).flatten(1).detach()
        self.n_rows = x.shape[0]

    def _from_store(self, store: Any, hooks: tuple[str, str], context: int | None) -> None:
        missing = [h for h in hooks if h not in store.hook_names]
        if missing:
            raise ValueError(
                f"the store lacks {missing[0]!r}; a Lorsa trains on a layer's attention input and output cached "
                f"together (it holds {store.hook_names})"
            )
        index = store.index
        rows, item, position = (index[c].to_numpy() for c in ("row", "item", "position"))
        starts = np.nonzero(position == 0)[0]
        lengths = np.diff(np.append(starts, len(position)))
        # an item's rows are contiguous and in order: position p of the item starting at row s is row s + p
        segment = np.cumsum(position == 0) - 1  # [rows]: the item each row is in, by its start
        whole = len(starts) > 0 and segment.min() >= 0
        if whole:
            whole = bool((position == np.arange(len(position)) - starts[segment]).all())
            whole = whole and bool((item == item[starts[segment]]).all())
        if not whole:
            raise ValueError(
                "a Lorsa trains on whole items, but this store's rows are not every position of each item in "
                "order; cache with every position kept (interp cache without --positions)"
            )
        self.context = int(lengths.min()) if context is None else context
        kept = lengths >= self.context
        self.dropped = int((~kept).sum())
        if not kept.any():
            raise ValueError(
                f"no item of the store has context={self.context} positions (the longest has {lengths.max()})"
            )
        self.starts = rows[starts[kept]]
        self.store, self.n_rows = store, len(self.starts)
        self.d_model = int(np.prod(store.row_shape(hooks[0])))
        self.model_name = store.meta["identity"]["model"].get("name")

    def fingerprint(self) -> str:
        """A hash that changes when the data does."""
        head = f"lorsa:{self.hook_name}:{self.n_rows}:{self.context}:{self.min_position}"
        return data_fingerprint(head, self.store, getattr(self, "tensor", None), self.n_rows)

    def read(self, chunk: int) -> torch.Tensor:
        """The sequences of one chunk, ``[sequences, context * 2 * d_model]`` float32."""
        start, n = self.chunks[chunk]
        if self.store is None:
            return self.tensor[start : start + n].float()
        rows = (self.starts[start : start + n, None] + np.arange(self.context)).reshape(-1)
        parts = [self.store.tensor(h, rows).float().reshape(n, self.context, -1) for h in self.hook_name]
        return torch.cat(parts, dim=-1).flatten(1)

    def gather(self, chunks: list[int], order: torch.Tensor) -> torch.Tensor:
        """The sequences of ``chunks``, one after another, taken in ``order``."""
        return torch.cat([self.read(c) for c in chunks])[order]

    def split(self, batch: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A batch of rows as ``(inputs, outputs)``, each ``[sequences, context, d_model]``."""
        pairs = batch.reshape(batch.shape[0], self.context, 2, self.d_model)
        return pairs[:, :, 0], pairs[:, :, 1]
