"""``cache_activations``: stream a data set through a model into an activation store, resumably.

The run is a loop over deterministic batches (see :mod:`interp.store.batches`). Each committed shard
records where the next one starts, so a run that was killed continues after the last committed shard: the
batches before it are only re-tokenized and hashed (to check that the data is the same), not run. Under
``torchrun`` every rank writes the contiguous range of batches it owns into ``OUT/rank{r}/``; rank 0 then
writes ``OUT/meta.json`` listing the ranks' shards in rank order, which is item order, so the store reads
back row for row as a single-process store does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from interp import distributed
from interp.store.batches import BatchSource, Positions, check_positions
from interp.store.files import tmp_path, write_json
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
from interp.store.run import Run

_PER_QUERY_KEY = ("hook_pattern", "hook_attn_scores")


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
        The store, with ``store.run`` holding this call's :class:`~interp.store.run.RunStats`.

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
    run = Run(model, source, hooks, positions, store_dtype, shard_rows, folder, on_shard)
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


def _dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    value = getattr(torch, str(dtype).removeprefix("torch."), None)
    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        raise ValueError(
            f"dtype={dtype!r} is not a floating dtype; use e.g. 'float32', 'float16', 'bfloat16'"
        )
    return value
