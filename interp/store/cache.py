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
from interp.store.files import write_json
from interp.store.folder import claim, discard_unstarted, first_missing
from interp.store.meta import CHAIN_START, FORMAT, META, chain, model_record
from interp.store.rank_run import Run
from interp.store.reader import ActivationStore

_PER_QUERY_KEY = ("hook_pattern", "hook_attn_scores")


def check_per_token(names: list[str]) -> None:
    """Raise for hooks that are not one row per token (attention patterns and scores)."""
    bad = [name for name in names if name.endswith(_PER_QUERY_KEY)]
    if bad:
        raise ValueError(
            f"{bad[0]!r} is [batch, head, query, key], and the store keeps one row per token of "
            "[batch, pos, ...] activations; store 'blocks.*.attn.hook_z' or 'blocks.*.attn.hook_result' "
            "instead, or take patterns from model.run_with_cache on the items you need"
        )


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
    overwrite: bool = False,
) -> ActivationStore:
    """Run ``data`` through ``model`` and store the named activations, one row per kept token.

    Args:
        model: a :class:`~interp.HookedTransformer` (with ``model.tokenizer`` for text data).
        data: texts; records with ``text`` (or ``sentence``/``prompt``) and optional ``id``; or pre-tokenized
            batches ``(ids, mask)`` / ``ids``, each ``[batch, pos]``, padded on either side.
        names_filter: which hooks (a name, glob, list or predicate); each must be ``[batch, pos, ...]``.
        out_dir: the store folder. A folder from an interrupted run with the same model, hooks and settings
            is continued; one from a different model, hooks or settings is refused (unless ``overwrite``).
            A run that fails before its first shard leaves no store behind (see :mod:`interp.store.folder`).
        batch_size: texts per forward pass.
        positions: ``"all"`` real tokens, the ``"last"`` one, or a list of positions such as ``[0, -1]``
            (counted over real tokens; negative from the end).
        shard_rows: rows per shard file; the writer holds one shard and one batch in memory.
        dtype: storage dtype (e.g. ``"float16"``); default: as the model computes.
        progress: show a progress bar (rank 0 only).
        on_shard: called with each shard's path after it is committed.
        overwrite: replace a store already in ``out_dir`` (its own files; other files stay).

    Returns:
        The store, with ``store.run`` holding this call's :class:`~interp.store.rank_run.RunStats`.

    Raises:
        StoreMismatchError: ``out_dir`` holds a different store, or the data differs from what it was
            started with.
        ValueError: a hook is not per token (patterns, scores), a record has no text, or a listed position is
            outside an item. All of these are found before anything is written: every item of a sized data
            set is tokenized once up front (cheap next to the forward passes).
    """
    hooks = model.resolve(names_filter)
    check_per_token(hooks)
    if shard_rows < 1:
        raise ValueError(f"shard_rows={shard_rows}; it must be at least 1")
    source = BatchSource(data, getattr(model, "tokenizer", None), batch_size)
    positions = check_positions(positions)
    store_dtype = _dtype(dtype)
    source.check(positions)
    world, rank = distributed.world_size(), distributed.rank()
    n_batches = source.n_batches()
    if world > 1 and n_batches is None:
        raise ValueError("a run over several ranks needs a sized data set (a list), to split it by batch")
    identity = {
        "format": FORMAT,
        "model": model_record(model),
        "hooks": hooks,
        "positions": positions,
        "dtype": str(store_dtype or model.dtype).removeprefix("torch."),
        "batch_size": source.batch_size,
        "shard_rows": shard_rows,
        "data": {"kind": source.kind, "n_items": source.n_items(), "n_batches": n_batches},
        "world_size": world,
    }
    out = Path(out_dir)
    created = first_missing(out)
    wrote = claim(out, identity, create=rank == 0, overwrite=overwrite)
    span = distributed.shard_range(n_batches) if world > 1 else range(0, n_batches or 0)
    folder = out if world == 1 else out / f"rank{rank}"
    if world > 1:
        claim(folder, {**identity, "rank": rank, "batches": [span.start, span.stop]}, create=True)
    run = Run(model, source, hooks, positions, store_dtype, shard_rows, folder, on_shard)
    try:
        summary = run.execute(span if n_batches is not None else None, progress and rank == 0)
    except BaseException:
        # Other ranks may still be writing, so only a single process tidies up; under torchrun the next
        # run takes an unstarted store over instead.
        if world == 1 and wrote:
            discard_unstarted(out, created)
        raise
    if world > 1:
        summaries = distributed.gather_objects(summary)
        if rank == 0:
            _write_merged(out, identity, summaries)
        distributed.barrier()
    store = ActivationStore(out)
    store.run = run.stats
    return store


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
