"""One rank's part of a cache run: its batches, from the resume point on, into its folder.

Batches before the resume point are only tokenized and hashed: the chain of batch hashes recorded with each
shard must match, so that a resumed run never appends to rows computed from other data.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from hooks.names import layer_of
from interp.store.batches import Batch, BatchSource, Positions, select_rows
from interp.store.files import read_header, write_json
from interp.store.meta import CHAIN_START, META, StoreMismatchError, chain, read_meta
from interp.store.writer import BatchRows, Cursor, ShardWriter, read_cursor


@dataclass(frozen=True)
class RunStats:
    """What one call did: rows and batches computed (not those found on disk), time, peak rows held."""

    rows_written: int
    batches_run: int
    seconds: float
    peak_rows: int


class Run:
    """One rank's part of a cache run, into one folder."""

    def __init__(
        self,
        model: Any,
        source: BatchSource,
        hooks: list[str],
        positions: Positions,
        dtype: torch.dtype | None,
        shard_rows: int,
        folder: Path,
        on_shard: Callable[[Path], None] | None,
    ) -> None:
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
        # Captures stay on the model's device; only the kept rows are copied to the CPU (for positions="last"
        # that is one row an item instead of the whole sequence).
        _, cache = model.run_with_cache(
            batch.ids.to(model.device),
            batch.mask.to(model.device),
            names_filter=self.hooks,
            stop_at_layer=self.stop_at_layer,
        )
        where = (row.to(model.device), col.to(model.device))
        tensors = {}
        for name in self.hooks:
            act = cache[name]  # [batch, pos, ...]
            if tuple(act.shape[:2]) != tuple(batch.ids.shape):
                raise ValueError(
                    f"{name!r} has shape {tuple(act.shape)}, not [batch, pos, ...] for a batch of "
                    f"{tuple(batch.ids.shape)}; the store keeps one row per token"
                )
            tensors[name] = act[where].cpu()  # [rows, ...]
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
    layers = [layer_of(name) for name in hooks]
    if any(
        layer is None and name not in ("hook_embed", "hook_pos_embed")
        for layer, name in zip(layers, hooks, strict=True)
    ):
        return None
    last = max((layer for layer in layers if layer is not None), default=-1)
    return last + 1 if last + 1 < n_layers else None
