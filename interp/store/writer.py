"""ShardWriter: per-token rows into fixed-size shard buffers, each shard committed with its index.

Memory stays bounded by design: the writer owns one preallocated buffer of ``shard_rows`` rows per hook and
copies each batch's selected rows into it; when it is full it is written out and reused. At any moment the
process holds one shard buffer plus the batch being copied, whatever the size of the data set.

Each shard file carries its own index (item and position tensors, token strings and item ids in the
metadata) and a *cursor*: the batch to resume from, how many of that batch's rows are already stored, and
the data fingerprint up to that batch. Shard and index are one file, so they are committed by one rename.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from interp.store.files import write_safetensors
from interp.store.meta import FORMAT

ITEM, POSITION = "_index.item", "_index.position"


def shard_name(number: int) -> str:
    return f"shard_{number:05d}.safetensors"


@dataclass(frozen=True)
class Cursor:
    """Where a run continues: at batch ``batch``, after its first ``skip`` rows; ``data_hash`` covers the
    batches before ``batch``."""

    batch: int
    skip: int
    data_hash: str


@dataclass
class BatchRows:
    """The selected rows of one batch, ready to store (all tensors ``[rows, ...]`` on the CPU)."""

    number: int
    tensors: dict[str, torch.Tensor]
    item: torch.Tensor
    position: torch.Tensor
    tokens: list[str] | None
    item_ids: dict[int, Any] | None
    hash_before: str
    hash_after: str
    start: int = 0  # rows already stored by an earlier, interrupted run

    def __len__(self) -> int:
        return len(self.item)


class ShardWriter:
    """Fills shards of ``shard_rows`` rows and commits each one atomically.

    Args:
        folder: where shards go.
        shard_rows: rows per shard (the last one may be shorter).
        dtype: storage dtype for activations (``None``: as captured).
        next_shard: number of the first shard this writer writes.
        on_shard: called with each shard's path once it is committed.
    """

    def __init__(
        self,
        folder: Path,
        shard_rows: int,
        dtype: torch.dtype | None,
        next_shard: int,
        on_shard: Callable[[Path], None] | None = None,
    ) -> None:
        if shard_rows < 1:
            raise ValueError(f"shard_rows={shard_rows}; it must be at least 1")
        self.folder, self.shard_rows, self.dtype = folder, shard_rows, dtype
        self.next_shard, self.on_shard = next_shard, on_shard
        self.buffers: dict[str, torch.Tensor] = {}
        self.item = torch.empty(shard_rows, dtype=torch.int64)
        self.position = torch.empty(shard_rows, dtype=torch.int64)
        self.tokens: list[str] | None = None
        self.item_ids: dict[int, Any] = {}
        self.filled = 0
        self.rows_written = 0  # rows committed by this writer
        self.peak_rows = 0  # most rows held at once: the buffer's fill plus the incoming batch

    def add(self, rows: BatchRows) -> None:
        """Copy a batch's rows in, committing every shard that fills up."""
        self.peak_rows = max(self.peak_rows, self.filled + len(rows) - rows.start)
        if not self.buffers:
            self.buffers = {
                name: torch.empty((self.shard_rows, *t.shape[1:]), dtype=self.dtype or t.dtype)
                for name, t in rows.tensors.items()
            }
        i = rows.start
        while i < len(rows):
            take = min(len(rows) - i, self.shard_rows - self.filled)
            dst, src = slice(self.filled, self.filled + take), slice(i, i + take)
            for name, buffer in self.buffers.items():
                buffer[dst] = rows.tensors[name][src]
            self.item[dst], self.position[dst] = rows.item[src], rows.position[src]
            if rows.tokens is not None:
                self.tokens = self.tokens if self.tokens is not None else []
                self.tokens.extend(rows.tokens[src])
            if rows.item_ids is not None:
                self.item_ids.update((k, rows.item_ids[k]) for k in rows.item[src].unique().tolist())
            self.filled += take
            i += take
            if self.filled == self.shard_rows:
                done = i == len(rows)
                self.commit(
                    Cursor(rows.number + 1, 0, rows.hash_after)
                    if done
                    else Cursor(rows.number, i, rows.hash_before)
                )

    def commit(self, cursor: Cursor) -> None:
        """Write the buffered rows as the next shard (nothing if the buffer is empty)."""
        if self.filled == 0:
            return
        n = self.filled
        tensors = {name: buffer[:n] for name, buffer in self.buffers.items()}
        tensors[ITEM], tensors[POSITION] = self.item[:n], self.position[:n]
        metadata = {
            "format": FORMAT,
            "cursor": json.dumps([cursor.batch, cursor.skip]),
            "data_hash": cursor.data_hash,
            "item_ids": json.dumps(sorted(self.item_ids.items())),
        }
        if self.tokens is not None:
            metadata["tokens"] = json.dumps(self.tokens)
        path = self.folder / shard_name(self.next_shard)
        write_safetensors(path, tensors, metadata)
        self.rows_written += n
        self.next_shard += 1
        self.filled, self.tokens, self.item_ids = 0, None, {}
        if self.on_shard is not None:
            self.on_shard(path)


def read_cursor(metadata: dict[str, str]) -> Cursor:
    """The cursor a committed shard's metadata records."""
    batch, skip = json.loads(metadata["cursor"])
    return Cursor(batch, skip, metadata["data_hash"])
