"""``cache_activations``: stream a data set through a model into an activation store, resumably.

The run is a loop over deterministic batches (see :mod:`interp.store.batches`). Each committed shard
records where the next one starts, so a run that was killed continues after the last committed shard: the
batches before it are only re-tokenized and hashed (to check that the data is the same), not run. Under
``torchrun`` every rank writes the contiguous range of batches it owns into ``OUT/rank{r}/``; rank 0 then
writes ``OUT/meta.json`` listing the ranks' shards in rank order, which is item order, so the store reads
back row for row as a single-process store does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from interp import distributed
from interp.store.batches import Batch, BatchSource, Positions, check_positions, select_rows
from interp.store.files import read_header, tmp_path, write_json
from interp.store.meta import (
    CHAIN_START,
    FORMAT,
    META,
    StoreMismatchError,
    chain,
    check_identity,
    model_identity,
    read_meta,
)
from interp.store.reader import ActivationStore
from interp.store.writer import BatchRows, Cursor, ShardWriter, read_cursor

_PER_QUERY_KEY = ("hook_pattern", "hook_attn_scores")


@dataclass(frozen=True)
class RunStats:
    """What one call did: rows and batches computed (not those found on disk), time, peak rows held."""

    rows_written: int
    batches_run: int
    seconds: float
    peak_rows: int


def cache_activations(
    model: Any,
    data: Sequence[Any] | Iterable[Any],
    names_filter: Any,
    out_dir: str | Path,
    *,
    batch_size: int = 16,
    positions: Positions = "all",
    shard_rows: int = 4096,
    dtype: str | torch.dtype | None = None,
    progress: bool = True,
    on_shard: Callable[[Path], None] | None = None,
) -> ActivationStore:
    """Run ``data`` through ``model`` and store the named activations, one row per kept token.

    Args:
        model: a :class:`~interp.HookedTransformer` (with ``model.tokenizer`` for text data).
        data: texts; records with ``text`` (or ``sentence``/``prompt``) and optional ``id``; or pre-tokenized
            batches ``(ids, mask)`` / ``ids``, each ``[batch, pos]``, padded on either side.
        names_filter: which hooks (a name, glob, list or predicate); each must be ``[batch, pos, ...]``.
        out_dir: the store folder. A folder from an interrupted run with the same model, hooks and settings
            is continued; one from a different model, hooks or settings is refused.
        batch_size: texts per forward pass.
        positions: ``"all"`` real tokens, the ``"last"`` one, or a list of positions such as ``[0, -1]``
            (counted over real tokens; negative from the end).
        shard_rows: rows per shard file; the writer holds one shard and one batch in memory.
        dtype: storage dtype (e.g. ``"float16"``); default: as the model computes.
        progress: show a progress bar (rank 0 only).
        on_shard: called with each shard's path after it is committed.

    Returns:
        The store, with ``store.run`` holding this call's :class:`RunStats`.

    Raises:
        StoreMismatchError: ``out_dir`` holds a different store, or the data differs from what it was
            started with.
        ValueError: a hook is not per token (patterns, scores), or a listed position is outside an item.
    """
    hooks = model.resolve(names_filter)
    bad = [name for name in hooks if name.endswith(_PER_QUERY_KEY)]
    if bad:
        raise ValueError(
            f"{bad[0]!r} is [batch, head, query, key], and the store keeps one row per token of "
            "[batch, pos, ...] activations; store 'blocks.*.attn.hook_z' or 'blocks.*.attn.hook_result' "
            "instead, or take patterns from model.run_with_cache on the items you need"
        )
    source = BatchSource(data, getattr(model, "tokenizer", None), batch_size)
    positions = check_positions(positions)
    store_dtype = _dtype(dtype)
    world, rank = distributed.world_size(), distributed.rank()
    n_batches = source.n_batches()
    if world > 1 and n_batches is None:
        raise ValueError("a run over several ranks needs a sized data set (a list), to split it by batch")
    identity = {
        "format": FORMAT,
        "model": model_identity(model),
        "hooks": hooks,
        "positions": positions,
        "dtype": str(store_dtype or model.dtype).removeprefix("torch."),
        "batch_size": source.batch_size,
        "shard_rows": shard_rows,
        "data": {"kind": source.kind, "n_items": source.n_items(), "n_batches": n_batches},
        "world_size": world,
    }
    out = Path(out_dir)
    _claim(out, identity, create=rank == 0)
    span = distributed.shard_range(n_batches) if world > 1 else range(0, n_batches or 0)
    folder = out if world == 1 else out / f"rank{rank}"
    if world > 1:
        _claim(folder, {**identity, "rank": rank, "batches": [span.start, span.stop]}, create=True)
    run = _Run(model, source, hooks, positions, store_dtype, shard_rows, folder, on_shard)
    summary = run.execute(span if n_batches is not None else None, progress and rank == 0)
    if world > 1:
        summaries = distributed.gather_objects(summary)
        if rank == 0:
            _write_merged(out, identity, summaries)
        distributed.barrier()
    store = ActivationStore(out)
    store.run = run.stats
    return store


def _claim(folder: Path, identity: dict[str, Any], create: bool) -> None:
    """Check that ``folder`` is empty or holds this store; on the creating rank, write its first meta.json."""
    existing = read_meta(folder) if folder.is_dir() else None
    if existing is not None:
        check_identity(folder, existing["identity"], identity)
    elif folder.is_dir() and any(p.name != tmp_path(folder / META).name for p in folder.iterdir()):
        raise StoreMismatchError(
            f"{folder} is not empty and holds no activation store (no meta.json); "
            "choose an empty or new folder"
        )
    distributed.barrier()  # every rank has checked before anyone writes
    if existing is None and create:
        folder.mkdir(parents=True, exist_ok=True)
        write_json(folder / META, {"identity": identity, "complete": False, "shards": []})


def _write_merged(out: Path, identity: dict[str, Any], summaries: list[dict[str, Any]]) -> None:
    shards = [f"rank{r}/{name}" for r, s in enumerate(summaries) for name in s["shards"]]
    fingerprint = chain(CHAIN_START, "".join(s["data_fingerprint"] for s in summaries).encode())
    total = {key: sum(s[key] for s in summaries) for key in ("rows", "bytes")}
    write_json(
        out / META,
        {"identity": identity, "complete": True, "shards": shards, "data_fingerprint": fingerprint, **total},
    )


class _Run:
    """One rank's part of a cache run, into one folder."""

    def __init__(self, model, source, hooks, positions, dtype, shard_rows, folder, on_shard) -> None:
        self.model, self.source, self.hooks, self.positions = model, source, hooks, positions
        self.dtype, self.shard_rows, self.folder, self.on_shard = dtype, shard_rows, folder, on_shard
        self.stop_at_layer = _stop_layer(hooks, model.cfg.n_layers)
        self.tokenizer = getattr(model, "tokenizer", None)
        self.stats = RunStats(0, 0, 0.0, 0)

    def execute(self, span: range | None, progress: bool) -> dict[str, Any]:
        """Store the batches of ``span`` (``None``: all of an unsized source) not stored yet; sum up."""
        for stale in self.folder.glob("*.tmp"):
            stale.unlink()  # a write that was interrupted before its rename
        committed = _committed(self.folder)
        meta = read_meta(self.folder) or {}
        start = span.start if span is not None else 0
        cursor = Cursor(start, 0, CHAIN_START)
        if committed:
            cursor = read_cursor(read_header(committed[-1])[0]["__metadata__"])
        writer = ShardWriter(self.folder, self.shard_rows, self.dtype, len(committed), self.on_shard)
        clock, h, end, checked, batches_run = time.perf_counter(), CHAIN_START, start, False, 0
        stop = span.stop if span is not None else None
        total = len(span) if span is not None else None
        with (
            torch.inference_mode(),
            tqdm(total=total, disable=not progress, unit="batch", desc="cache") as bar,
        ):
            for batch in self.source.batches(start, stop):
                before, h, end = h, chain(h, batch.digest()), batch.number + 1
                if batch.number == cursor.batch:
                    self._check_data(before, cursor.data_hash, batch.number)
                    checked = True
                if batch.number >= cursor.batch and not meta.get("complete"):
                    skip = cursor.skip if batch.number == cursor.batch else 0
                    writer.add(self._rows(batch, before, h, skip))
                    batches_run += 1
                bar.update()
            if not checked:
                self._check_data(h if cursor.batch == end else None, cursor.data_hash, cursor.batch)
            if meta.get("complete"):
                self._check_data(h, meta["data_fingerprint"], end)
            writer.commit(Cursor(end, 0, h))
        shards = _committed(self.folder)
        summary = {
            "shards": [path.name for path in shards],
            "rows": sum(read_header(p)[0]["_index.item"]["shape"][0] for p in shards),
            "bytes": sum(p.stat().st_size for p in shards),
            "data_fingerprint": h,
        }
        write_json(
            self.folder / META, {"identity": read_meta(self.folder)["identity"], "complete": True, **summary}
        )
        self.stats = RunStats(writer.rows_written, batches_run, time.perf_counter() - clock, writer.peak_rows)
        return summary

    def _check_data(self, seen: str | None, stored: str, batch: int) -> None:
        if seen != stored:
            raise StoreMismatchError(
                f"{self.folder} was started on different data: the items before batch {batch} do not hash "
                "the same (or there are fewer of them). Write to another output folder, or delete this one "
                "to start over"
            )

    def _rows(self, batch: Batch, hash_before: str, hash_after: str, skip: int) -> BatchRows:
        row, col, position = select_rows(batch, self.positions)
        model = self.model
        _, cache = model.run_with_cache(
            batch.ids.to(model.device),
            batch.mask.to(model.device),
            names_filter=self.hooks,
            device="cpu",
            stop_at_layer=self.stop_at_layer,
        )
        tensors = {}
        for name in self.hooks:
            act = cache[name]  # [batch, pos, ...]
            if tuple(act.shape[:2]) != tuple(batch.ids.shape):
                raise ValueError(
                    f"{name!r} has shape {tuple(act.shape)}, not [batch, pos, ...] for a batch of "
                    f"{tuple(batch.ids.shape)}; the store keeps one row per token"
                )
            tensors[name] = act[row, col]  # [rows, ...]
        item = batch.first_item + row
        tokens = self.tokenizer.to_str_tokens(batch.ids[row, col]) if self.tokenizer is not None else None
        ids = None
        if batch.item_ids is not None:
            ids = {batch.first_item + b: batch.item_ids[b] for b in range(len(batch.item_ids))}
        return BatchRows(batch.number, tensors, item, position, tokens, ids, hash_before, hash_after, skip)


def _committed(folder: Path) -> list[Path]:
    """Committed shards in order; a gap in the numbering is an error."""
    paths = sorted(folder.glob("shard_*.safetensors"))
    for number, path in enumerate(paths):
        if path.name != f"shard_{number:05d}.safetensors":
            raise StoreMismatchError(
                f"{folder} is missing shard {number} (found {path.name}); delete it to start over"
            )
    return paths


def _stop_layer(hooks: list[str], n_layers: int) -> int | None:
    """The first block no requested hook needs, so the forward can stop there (``None``: run it all)."""
    from hooks.names import layer_of

    layers = [layer_of(name) for name in hooks]
    if any(
        layer is None and name not in ("hook_embed", "hook_pos_embed")
        for layer, name in zip(layers, hooks, strict=True)
    ):
        return None
    last = max((layer for layer in layers if layer is not None), default=-1)
    return last + 1 if last + 1 < n_layers else None


def _dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    value = getattr(torch, str(dtype).removeprefix("torch."), None)
    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        raise ValueError(
            f"dtype={dtype!r} is not a floating dtype; use e.g. 'float32', 'float16', 'bfloat16'"
        )
    return value
