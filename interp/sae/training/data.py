"""The training rows: a tensor or an activation store, read as one shuffled stream in bounded memory.

The stream is a pure function of the seed. Each epoch visits the source's chunks (a store's shards; slices of
a tensor) in a seeded order, groups them into buffers of at least ``buffer_rows`` rows, and shuffles the rows
inside each buffer. Step ``s`` trains on stream rows ``[s * batch, (s + 1) * batch)``, epochs following each
other without a gap, so a run resumed at step ``s`` reads exactly the rows the uninterrupted run read, and
loads only the buffers from there on. At most two buffers are in memory at once.

Under ``torchrun`` every rank builds the same stream and takes its contiguous share of each batch, so the
ranks together train on the batch one process would.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from interp import distributed

DEFAULT_CHUNK_ROWS = 65536


def data_fingerprint(head: str, store: Any, tensor: torch.Tensor | None, n_rows: int) -> str:
    """A hash of ``head`` (what the rows are) and the data: ``store``'s data fingerprint, or, without a store,
    every ``n_rows // 4096``-th row of ``tensor``."""
    h = hashlib.sha256(head.encode())
    if store is not None:
        h.update(str(store.meta.get("data_fingerprint")).encode())
    else:
        step = max(1, n_rows // 4096)
        h.update(tensor[::step].float().contiguous().numpy().tobytes())
    return h.hexdigest()


class RowSource:
    """Rows ``[n, d_in]`` of a tensor or of hooks of an :class:`~interp.store.ActivationStore`.

    Args:
        source: a float tensor ``[n, d_in]`` or an activation store.
        hook_name: the store's hook to read (default: its only hook), or a list of hooks whose rows are read
            side by side, concatenated in the order given (a transcoder's inputs and outputs, which the store
            caches together from one forward); for a tensor, recorded as given.
        chunk_rows: for a tensor, the rows of one chunk (a store's chunks are its shards).
        min_position: for a store, keep only rows of tokens at this position or later in their item (``1``
            drops each sequence's first token, whose residual stream in many models is an outlier of a
            hundred times the usual norm, the "attention sink").
    """

    def __init__(
        self,
        source: Any,
        hook_name: str | None = None,
        chunk_rows: int = DEFAULT_CHUNK_ROWS,
        min_position: int = 0,
    ) -> None:
        from interp.store import ActivationStore
        from interp.store.files import memmap
        from interp.store.writer import POSITION

        self.store = None
        self.keep: list[np.ndarray | None] = []
        if isinstance(source, torch.Tensor):
            if source.ndim != 2 or not source.is_floating_point():
                raise ValueError(
                    f"training data must be a float tensor [n, d_in], got {source.dtype} of shape "
                    f"{tuple(source.shape)}"
                )
            self.tensor = source.detach()
            n = source.shape[0]
            self.chunks = [(s, min(chunk_rows, n - s)) for s in range(0, n, chunk_rows)]
            self.d_in = int(source.shape[1])
            self.hook_name = hook_name
            self.model_name = None
        elif isinstance(source, ActivationStore):
            names = source.hook_names
            if hook_name is None:
                if len(names) != 1:
                    raise ValueError(f"the store holds {names}; pass hook_name= to say which to train on")
                hook_name = names[0]
            self.hooks = [hook_name] if isinstance(hook_name, str) else list(hook_name)
            for hook in self.hooks:
                if hook not in names:
                    raise ValueError(
                        f"hook {hook!r} is not in the store at {source.folder}; it holds {names}"
                    )
            self.store, self.hook_name = source, hook_name
            self.d_in = sum(int(np.prod(source.row_shape(h))) for h in self.hooks)
            self.chunks = []
            for shard in source.shards:
                keep = None
                if min_position > 0:
                    positions = np.asarray(memmap(shard.path, POSITION, shard.header, shard.data_start))
                    keep = np.nonzero(positions >= min_position)[0]
                self.keep.append(keep)
                self.chunks.append((shard.start, shard.rows if keep is None else len(keep)))
            self.model_name = source.meta["identity"]["model"].get("name")
        else:
            raise TypeError(
                f"source must be a tensor [n, d_in] or an ActivationStore, got {type(source).__name__}"
            )
        self.n_rows = sum(rows for _, rows in self.chunks)
        self.min_position = min_position
        if self.n_rows == 0 or self.d_in == 0:
            raise ValueError("the training data holds no rows; cache some activations first")

    def fingerprint(self) -> str:
        """A hash that changes when the data does (a store's data fingerprint; a tensor's bytes, sampled)."""
        # (a list of hooks formats as its list, a single hook as before: old checkpoints still resume)
        head = f"{self.hook_name}:{self.n_rows}:{self.d_in}:{self.min_position}"
        return data_fingerprint(head, self.store, getattr(self, "tensor", None), self.n_rows)

    def read(self, chunk: int) -> torch.Tensor:
        """The rows of one chunk, ``[rows, d_in]`` float32."""
        start, rows = self.chunks[chunk]
        if self.store is None:
            part = self.tensor[start : start + rows]
        else:
            shard = self.store.shards[chunk]
            rows_of = slice(shard.start, shard.start + shard.rows)
            parts = [self.store.tensor(h, rows_of).reshape(shard.rows, -1) for h in self.hooks]
            part = parts[0] if len(parts) == 1 else torch.cat([p.float() for p in parts], dim=-1)
            if self.keep[chunk] is not None:
                part = part[torch.from_numpy(self.keep[chunk])]
        return part.float()

    def gather(self, chunks: list[int], order: torch.Tensor) -> torch.Tensor:
        """The rows of ``chunks``, one after another, taken in ``order`` (``[rows, d_in]`` float32): for a
        tensor one gather from it, without the copy that concatenating the chunks first would make."""
        if self.store is not None:
            return torch.cat([self.read(c) for c in chunks])[order]
        index = torch.cat(
            [torch.arange(start, start + rows) for start, rows in (self.chunks[c] for c in chunks)]
        )
        return self.tensor[index[order]].float()


def _generator(*keys: int) -> torch.Generator:
    seed = int.from_bytes(hashlib.sha256(repr(keys).encode()).digest()[:8], "little")
    return torch.Generator().manual_seed(seed)


class Stream:
    """The seeded stream of rows over epochs, and batches from any step on (see the module docstring)."""

    def __init__(self, source: RowSource, seed: int, buffer_rows: int) -> None:
        if buffer_rows < 1:
            raise ValueError(f"buffer_rows={buffer_rows}; it must be at least 1")
        self.source, self.seed, self.buffer_rows = source, seed, buffer_rows
        self._last: tuple[tuple[int, int], torch.Tensor] | None = None  # the buffer built last, for a re-read

    def buffers(self, epoch: int) -> list[list[int]]:
        """The chunk indices of each buffer of ``epoch``, in order."""
        order = torch.randperm(len(self.source.chunks), generator=_generator(self.seed, epoch)).tolist()
        groups, current, rows = [], [], 0
        for chunk in order:
            current.append(chunk)
            rows += self.source.chunks[chunk][1]
            if rows >= self.buffer_rows:
                groups.append(current)
                current, rows = [], 0
        if current:
            groups.append(current)
        return groups

    def _buffer(self, epoch: int, number: int, chunks: list[int]) -> torch.Tensor:
        if self._last is not None and self._last[0] == (epoch, number):
            return self._last[1]  # a training run reads its first buffer twice: for the sample, then to train
        self._last = None
        size = sum(self.source.chunks[c][1] for c in chunks)
        rows = self.source.gather(
            chunks, torch.randperm(size, generator=_generator(self.seed, epoch, number))
        )
        self._last = ((epoch, number), rows)
        return rows

    def rows_from(self, start: int) -> Iterator[torch.Tensor]:
        """Successive shuffled buffers of the stream, the first one cut to begin at stream row ``start``."""
        n = self.source.n_rows
        epoch, offset = divmod(start, n)
        while True:
            seen = 0
            for number, chunks in enumerate(self.buffers(epoch)):
                size = sum(self.source.chunks[c][1] for c in chunks)
                if seen + size <= offset:
                    seen += size
                    continue
                block = self._buffer(epoch, number, chunks)
                yield block[max(0, offset - seen) :]
                seen += size
            epoch, offset = epoch + 1, 0

    def batches(self, batch_size: int, start_step: int = 0) -> Iterator[torch.Tensor]:
        """This rank's share of each global batch ``[rows, d_in]``, from ``start_step`` on, without end."""
        world, rank = distributed.world_size(), distributed.rank()
        lo, hi = rank * batch_size // world, (rank + 1) * batch_size // world
        carry: torch.Tensor | None = None  # the start of a batch that straddles two buffers
        for block in self.rows_from(start_step * batch_size):
            pos = 0
            if carry is not None:
                need = batch_size - carry.shape[0]
                if block.shape[0] < need:
                    carry = torch.cat([carry, block])
                    continue
                yield torch.cat([carry, block[:need]])[lo:hi]
                pos, carry = need, None
            while pos + batch_size <= block.shape[0]:
                yield block[pos + lo : pos + hi]
                pos += batch_size
            if pos < block.shape[0]:
                carry = block[pos:]
