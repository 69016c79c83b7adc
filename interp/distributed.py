"""Sharding a study or a cache run across ``torchrun`` ranks, and merging the results exactly.

A study is a map over items followed by reductions. Under ``torchrun --nproc-per-node N`` every rank runs the
same script: it takes a contiguous slice of the items (:func:`shard`), computes its records, and rank 0
gathers them (:func:`gather_objects`) and merges them (``merge_*``) into the same result one process would
give. Without ``torchrun`` (``WORLD_SIZE`` unset) every helper is a single-process no-op, so one script runs
both ways::

    with distributed.session():
        items = distributed.shard(all_items)          # this rank's contiguous slice
        local = [score(item) for item in items]       # per-item records, each with its "item" index
        parts = distributed.gather_objects(local)     # rank 0: one list per rank; others: None
        if distributed.rank() == 0:
            write_report(distributed.merge_records(parts, key="item"))

The split is **contiguous** (rank r gets ``items[r*n//W : (r+1)*n//W]``), not strided: concatenating the
ranks' outputs in rank order gives item order, so per-rank files (activation store shards) line up with a
single-process run without a reordering step.

Failure: a rank that raises inside :func:`session` (or :func:`fail_fast`) prints its error with its rank,
records it for ``torchrun``'s summary, and exits non-zero at once. It does not tear down the process group:
its peers may be blocked in a collective, and a teardown can wait on them. ``torchrun`` sees the exit and
stops the other ranks, so the run ends with that rank's error rather than hanging until a timeout.
"""

from __future__ import annotations

import contextlib
import datetime
import gc
import os
import sys
import traceback
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar

import torch
import torch.distributed as dist

T = TypeVar("T")

DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)


def init_from_env(backend: str | None = None, timeout: datetime.timedelta = DEFAULT_TIMEOUT) -> bool:
    """Join the process group that ``torchrun`` describes in the environment.

    Args:
        backend: ``"gloo"`` or ``"nccl"``; default: nccl when CUDA is available, gloo otherwise.
        timeout: how long a collective may wait for a peer before raising.

    Returns:
        Whether this process is part of a process group (``False`` when ``WORLD_SIZE`` is unset).
    """
    if dist.is_initialized():
        return True
    if "WORLD_SIZE" not in os.environ:
        return False
    if not dist.is_available():
        raise RuntimeError("WORLD_SIZE is set, but this torch build has no torch.distributed support")
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend == "nccl":
        torch.cuda.set_device(local_rank())
    dist.init_process_group(backend, timeout=timeout)
    return True


def is_distributed() -> bool:
    """Whether a process group is active (a single-process run is not)."""
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    """This process's rank, 0 without a process group."""
    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    """Number of ranks, 1 without a process group."""
    return dist.get_world_size() if is_distributed() else 1


def local_rank() -> int:
    """This process's index on its machine (``LOCAL_RANK`` set by ``torchrun``), 0 otherwise."""
    return int(os.environ.get("LOCAL_RANK", 0))


def device() -> torch.device:
    """The device this rank should compute on: its own GPU under ``torchrun`` on CUDA, else the CPU."""
    return torch.device("cuda", local_rank()) if torch.cuda.is_available() else torch.device("cpu")


def barrier() -> None:
    """Wait until every rank gets here (no-op in a single process)."""
    if is_distributed():
        dist.barrier()


def shard_range(n: int, rank_: int | None = None, world: int | None = None) -> range:
    """The contiguous range of ``n`` item indices that a rank owns.

    >>> [list(shard_range(10, r, 3)) for r in range(3)]
    [[0, 1, 2], [3, 4, 5], [6, 7, 8, 9]]
    """
    r = rank() if rank_ is None else rank_
    w = world_size() if world is None else world
    if not 0 <= r < w:
        raise ValueError(f"rank {r} is outside a world of {w} ranks")
    return range(r * n // w, (r + 1) * n // w)


def shard(items: Sequence[T]) -> Sequence[T]:
    """This rank's contiguous slice of ``items`` (all of them in a single process).

    Ranks' slices are disjoint, cover every item, differ in length by at most one, and follow each other in
    rank order. Pair each record with its global index (``shard_range(len(items))``) so merges can sort.
    """
    span = shard_range(len(items))
    return items[span.start : span.stop]


def gather_objects(obj: T, dst: int = 0) -> list[T] | None:
    """Every rank's ``obj`` on rank ``dst``, in rank order; ``None`` on the other ranks.

    Objects travel pickled, so keep them to records and CPU tensors. In a single process: ``[obj]``.
    """
    if not is_distributed():
        return [obj]
    out: list[Any] | None = [None] * world_size() if rank() == dst else None
    dist.gather_object(obj, out, dst=dst)
    return out


def all_gather_objects(obj: T) -> list[T]:
    """Every rank's ``obj`` on every rank, in rank order."""
    if not is_distributed():
        return [obj]
    out: list[Any] = [None] * world_size()
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(obj: T, src: int = 0) -> T:
    """Rank ``src``'s ``obj`` on every rank."""
    if not is_distributed():
        return obj
    box = [obj if rank() == src else None]
    dist.broadcast_object_list(box, src=src)
    return box[0]


@contextlib.contextmanager
def fail_fast() -> Iterator[None]:
    """Make an error on one rank end the whole run with that rank's message, instead of a hang.

    In a single process the error propagates unchanged. Under a process group the rank prints
    ``interp: rank R of W failed: ...`` with the traceback, records the error for ``torchrun``'s summary,
    and exits with status 1 without waiting on its peers; ``torchrun`` then stops them.
    """
    try:
        yield
    except BaseException as err:
        if not is_distributed() or isinstance(err, (SystemExit, GeneratorExit)):
            raise
        _exit_with(err)


def _exit_with(err: BaseException) -> None:
    message = f"interp: rank {rank()} of {world_size()} failed: {type(err).__name__}: {err}"
    if "closed by peer" in str(err) or "Connection reset" in str(err):
        message += " (probably because another rank failed first: see its error)"
    print(message, file=sys.stderr)
    traceback.print_exception(err, file=sys.stderr)
    if "TORCHELASTIC_ERROR_FILE" in os.environ:
        with contextlib.suppress(Exception):
            from torch.distributed.elastic.multiprocessing.errors import get_error_handler

            get_error_handler().record_exception(err)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


@contextlib.contextmanager
def session(backend: str | None = None, timeout: datetime.timedelta = DEFAULT_TIMEOUT) -> Iterator[bool]:
    """Join the process group for the ``with`` block, fail fast on errors, and leave it afterwards.

    Yields whether the run is distributed. A group that was already initialized is left for its owner to
    destroy.
    """
    owned = not is_distributed()
    with fail_fast():
        active = init_from_env(backend, timeout)
        yield active
        barrier()
    # Reached only on success: after an error, fail_fast has ended the process (see the module docstring).
    if owned and is_distributed():
        # A DistributedDataParallel wrapper left in a reference cycle can hold the group's gloo threads until the
        # interpreter's last collection, after the group is gone; a rank has aborted at exit ("terminate called
        # without an active exception") with its work done. Collect it while the group still exists.
        gc.collect()
        dist.destroy_process_group()


# Reductions that merge exactly: N ranks' parts give what one process computes over all items.


def merge_counts(parts: Sequence[Mapping[Any, int]]) -> Counter:
    """Integer counts per key, added up (exact)."""
    total: Counter = Counter()
    for part in parts:
        total.update(part)
    return total


def merge_sums(parts: Sequence[Mapping[Any, Any]]) -> dict[Any, Any]:
    """Per-key sums of numbers or tensors, added in rank order.

    Integer sums are exact. Floating sums of per-rank partial sums round differently from one running sum;
    when a report needs the same bits for any number of ranks, gather per-item records instead
    (:func:`merge_records`) and reduce them on rank 0 in item order.
    """
    total: dict[Any, Any] = {}
    for part in parts:
        for key, value in part.items():
            total[key] = value if key not in total else total[key] + value
    return total


def merge_tables(parts: Sequence[Any], by: str | Sequence[str]) -> Any:
    """pandas DataFrames of per-key sums (e.g. counts per layer and head), added up per key and sorted."""
    import pandas as pd

    frames = [p for p in parts if p is not None and len(p)]
    if not frames:
        return parts[0] if parts else pd.DataFrame()
    keys = [by] if isinstance(by, str) else list(by)
    return pd.concat(frames).groupby(keys, sort=True).sum().reset_index()


def merge_records(parts: Sequence[Sequence[T]], key: str = "item") -> list[T]:
    """Per-item records from every rank, concatenated and sorted by ``key`` (a dict key or attribute).

    Raises:
        ValueError: two records share a key (the ranks' shards overlapped), or a record has no ``key``.
    """
    records = [record for part in parts for record in part]

    def key_of(record: Any) -> Any:
        try:
            return record[key] if isinstance(record, Mapping) else getattr(record, key)
        except (KeyError, AttributeError):
            raise ValueError(f"record {record!r} has no {key!r} to sort by") from None

    records.sort(key=key_of)
    for before, after in zip(records, records[1:], strict=False):
        if key_of(before) == key_of(after):
            raise ValueError(f"two records have {key}={key_of(after)!r}: did the ranks' shards overlap?")
    return records
