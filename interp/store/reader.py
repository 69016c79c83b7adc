"""ActivationStore: one store read back as rows, whatever the number of shards or of ranks that wrote it.

Row ``i`` of every hook's tensor and of :attr:`ActivationStore.index` are the same token of the same item.
:meth:`ActivationStore.memmap` maps the raw data region of each shard file with ``numpy.memmap`` (the
safetensors header gives the offsets) rather than calling ``safe_open(..., framework="numpy")``, whose
``get_tensor`` copies the whole tensor into memory: a memmap reads only the pages that are touched, and the
operating system shares them between processes that read the same store.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from interp.store.files import memmap, read_header
from interp.store.meta import read_meta
from interp.store.writer import ITEM, POSITION

INDEX_COLUMNS = ["row", "shard", "item", "item_id", "position", "token"]


@dataclass(frozen=True)
class ShardFile:
    """One committed shard: its path, its first row in the store, its row count and its header."""

    number: int
    path: Path
    start: int
    rows: int
    header: dict[str, Any]
    data_start: int


@dataclass(frozen=True)
class StoreShard:
    """One shard loaded in memory: its rows of the index and a tensor per hook (``[rows, ...]``)."""

    number: int
    index: pd.DataFrame
    tensors: dict[str, torch.Tensor]


class ActivationStore:
    """A folder written by :func:`interp.store.cache_activations` (or ``interp cache``).

    >>> store = ActivationStore("acts/")  # doctest: +SKIP
    >>> store.index.head()  # row, shard, item, item_id, position, token  # doctest: +SKIP
    >>> resid = store.tensor("blocks.3.hook_resid_post")  # [rows, d_model]  # doctest: +SKIP

    An unfinished store (a run that was interrupted) reads as the rows committed so far; :attr:`complete`
    says which it is.
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        meta = read_meta(self.folder)
        if meta is None:
            raise FileNotFoundError(
                f"{self.folder} has no meta.json, so it is not an activation store; write one with "
                "`interp cache` or interp.store.cache_activations"
            )
        self.meta = meta
        self.run: Any = None  # statistics of the run that returned this store, if any
        paths = [self.folder / p for p in meta["shards"]] if meta.get("complete") else self._scan()
        self.shards: list[ShardFile] = []
        start = 0
        for number, path in enumerate(paths):
            header, data_start = read_header(path)
            header.pop("__metadata__", None)  # token strings: read again when the index is built
            rows = header[ITEM]["shape"][0]
            self.shards.append(ShardFile(number, path, start, rows, header, data_start))
            start += rows
        self._starts = np.array([s.start for s in self.shards], dtype=np.int64)

    def _scan(self) -> list[Path]:
        world = self.meta["identity"]["world_size"]
        folders = [self.folder] if world == 1 else [self.folder / f"rank{r}" for r in range(world)]
        return [p for f in folders for p in sorted(f.glob("shard_*.safetensors"))]

    @property
    def hook_names(self) -> list[str]:
        """The hooks stored, in the model's order."""
        return list(self.meta["identity"]["hooks"])

    @property
    def complete(self) -> bool:
        """Whether the run that writes this store has finished."""
        return bool(self.meta.get("complete"))

    def __len__(self) -> int:
        return sum(s.rows for s in self.shards)

    def __repr__(self) -> str:
        state = "complete" if self.complete else "incomplete"
        return f"ActivationStore({str(self.folder)!r}, {len(self)} rows, {len(self.shards)} shards, {state})"

    def row_shape(self, hook: str) -> tuple[int, ...]:
        """The shape of one row of ``hook`` (e.g. ``(d_model,)`` or ``(n_heads, d_head)``)."""
        self._check(hook)
        return tuple(self.shards[0].header[hook]["shape"][1:]) if self.shards else ()

    @cached_property
    def index(self) -> pd.DataFrame:
        """One line per row: ``row, shard, item, item_id, position, token``."""
        frames = [self._shard_index(s) for s in self.shards]
        if not frames:
            return pd.DataFrame({c: pd.Series(dtype=object) for c in INDEX_COLUMNS})
        return pd.concat(frames, ignore_index=True)

    def _shard_index(self, shard: ShardFile) -> pd.DataFrame:
        meta = read_header(shard.path)[0].get("__metadata__", {})
        item = np.array(memmap(shard.path, ITEM, shard.header, shard.data_start))
        ids = dict(json.loads(meta.get("item_ids", "[]")))
        tokens = json.loads(meta["tokens"]) if "tokens" in meta else [None] * shard.rows
        return pd.DataFrame(
            {
                "row": np.arange(shard.start, shard.start + shard.rows, dtype=np.int64),
                "shard": np.full(shard.rows, shard.number, dtype=np.int64),
                "item": item,
                "item_id": pd.Series([ids.get(i) for i in item.tolist()], dtype=object),
                "position": np.array(memmap(shard.path, POSITION, shard.header, shard.data_start)),
                "token": pd.Series(tokens, dtype=object),
            }
        )

    def tensor(
        self, hook: str, rows: Sequence[int] | np.ndarray | torch.Tensor | slice | None = None
    ) -> torch.Tensor:
        """``hook``'s activations, ``[rows, *row_shape]``; all rows, or those listed (global row numbers)."""
        self._check(hook)
        if rows is None:
            parts = [_load(s, hook) for s in self.shards]
            return torch.cat(parts) if parts else torch.empty(0)
        wanted = self._rows(rows)
        which = np.searchsorted(self._starts, wanted, side="right") - 1
        first = self.shards[0].header[hook] if self.shards else None
        out = None
        for number in np.unique(which):
            shard, sel = self.shards[number], np.nonzero(which == number)[0]
            local = wanted[sel] - shard.start
            with safe_open(shard.path, framework="pt") as f:
                block = f.get_slice(hook)[int(local.min()) : int(local.max()) + 1]
            if out is None:
                out = torch.empty((len(wanted), *first["shape"][1:]), dtype=block.dtype)
            out[torch.from_numpy(sel)] = block[torch.from_numpy(local - local.min())]
        return out if out is not None else torch.empty(0)

    def memmap(self, hook: str) -> ShardedArray:
        """``hook``'s rows as one lazily concatenated array of per-shard ``numpy.memmap`` s (no data read)."""
        self._check(hook)
        return ShardedArray([memmap(s.path, hook, s.header, s.data_start) for s in self.shards])

    def __iter__(self) -> Iterator[StoreShard]:
        """Shards in row order, one in memory at a time."""
        for shard in self.shards:
            tensors = load_file(shard.path)
            for key in (ITEM, POSITION):
                tensors.pop(key)
            yield StoreShard(shard.number, self._shard_index(shard), tensors)

    def _rows(self, rows: Any) -> np.ndarray:
        n = len(self)
        wanted = (
            np.arange(n)[rows] if isinstance(rows, slice) else np.asarray(rows, dtype=np.int64).reshape(-1)
        )
        if len(wanted) and (wanted.min() < -n or wanted.max() >= n):
            raise IndexError(f"rows must lie in [0, {n}) for this store of {n} rows")
        return np.where(wanted < 0, wanted + n, wanted)

    def _check(self, hook: str) -> None:
        if hook not in self.hook_names:
            raise KeyError(f"{hook!r} is not in this store; it holds {self.hook_names}")


def _load(shard: ShardFile, hook: str) -> torch.Tensor:
    with safe_open(shard.path, framework="pt") as f:
        return f.get_tensor(hook)


class ShardedArray:
    """Rows of one hook across shards, memory-mapped; indexing reads only the rows asked for.

    ``array[i]``, ``array[a:b]`` and ``array[[i, j, ...]]`` return numpy arrays; ``np.asarray(array)``
    reads everything.
    """

    def __init__(self, parts: list[np.ndarray]) -> None:
        self.parts = parts
        self._starts = np.cumsum([0] + [len(p) for p in parts])

    @property
    def shape(self) -> tuple[int, ...]:
        return (int(self._starts[-1]), *(self.parts[0].shape[1:] if self.parts else ()))

    @property
    def dtype(self) -> np.dtype:
        return self.parts[0].dtype if self.parts else np.dtype(np.float32)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key: Any) -> np.ndarray:
        rest: tuple = ()
        if isinstance(key, tuple):
            key, rest = key[0], key[1:]
        if isinstance(key, (int, np.integer)):
            i = int(key) + len(self) if key < 0 else int(key)
            if not 0 <= i < len(self):
                raise IndexError(f"row {key} is outside [0, {len(self)})")
            p = int(np.searchsorted(self._starts, i, side="right") - 1)
            return np.asarray(self.parts[p][i - self._starts[p]])[rest]
        rows = np.arange(len(self))[key]
        which = np.searchsorted(self._starts, rows, side="right") - 1
        out = np.empty((len(rows), *self.shape[1:]), dtype=self.dtype)
        for p in np.unique(which):
            sel = which == p
            out[sel] = self.parts[p][rows[sel] - self._starts[p]]
        return out[(slice(None), *rest)]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        full = np.concatenate(self.parts) if self.parts else np.empty((0,))
        return full.astype(dtype) if dtype is not None else full
