"""Batches of pairs shared out among ``torchrun`` ranks, with results merged in batch order.

The batch plan depends only on the pairs and the batch size, each rank computes whole batches (contiguous
ones, :func:`interp.distributed.shard_range`), and every rank receives every batch's result in plan order. A
sum over batches taken in that order is the one a single process takes, so scores and faithfulness values are
the same to the bit for any number of ranks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from tqdm import tqdm

from interp import distributed
from interp.circuits.pairs import Pairs

T = TypeVar("T")


def map_batches(
    pairs: Pairs, batch_size: int, fn: Callable[[Pairs], T], *, progress: bool = False, desc: str = "pairs"
) -> list[T]:
    """``fn`` of every batch of ``pairs``, in plan order, on every rank (this rank computes its share)."""
    plan = pairs.batches(batch_size)
    span = distributed.shard_range(len(plan))
    show = progress and distributed.rank() == 0
    bar = tqdm(total=sum(len(plan[i]) for i in span), desc=desc, unit="pair", disable=not show, leave=False)
    local = []
    for i in span:
        rows = plan[i]
        local.append(fn(pairs[rows.start : rows.stop]))
        bar.update(len(rows))
    bar.close()
    if not distributed.is_distributed():
        return local
    return [result for part in distributed.all_gather_objects(local) for result in part]


def ordered_sum(values: list):
    """``values[0] + values[1] + ...`` from left to right (the order that makes merges exact)."""
    total = values[0]
    for value in values[1:]:
        total = total + value
    return total
