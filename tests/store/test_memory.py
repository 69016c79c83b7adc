"""The writer holds one shard and one batch, however large the data set."""

from __future__ import annotations

import gc
import sys
import tracemalloc

from interp.store import cache_activations
from tests.store.models import HOOKS, sentences, tiny_model


def test_rows_held_stay_below_one_shard_plus_one_batch(tmp_path):
    model = tiny_model()
    store = cache_activations(
        model, sentences(160, seed=3), HOOKS, tmp_path / "s", batch_size=8, shard_rows=16, progress=False
    )
    batch_rows = int(store.index.groupby(store.index["item"] // 8).size().max())
    assert len(store) > 10 * (16 + batch_rows)  # the data set is far larger than what the writer holds
    assert len(store.shards) == -(-len(store) // 16)
    assert 16 <= store.run.peak_rows <= 16 + batch_rows


def test_python_memory_does_not_grow_with_the_data(tmp_path):
    """Token strings and item ids are kept for the current shard only, so traced memory stays flat.

    Keeping every row's token string would grow memory by at least the strings' size; the bound is 60%
    of that (what remains is torch's own small caches, keyed by tensor shapes, which stop growing), with
    room for the noise of other allocations in a long test run.
    """
    model = tiny_model()
    texts = sentences(200, seed=4)
    cache_activations(model, texts[:40], HOOKS, tmp_path / "warm", batch_size=8, progress=False)
    samples: dict[int, int] = {}

    def sample(path) -> None:
        number = int(path.name.split("_")[1].split(".")[0])
        if number in (5, 45):
            gc.collect()  # count live objects, not cycles waiting for the collector
            samples[number] = tracemalloc.get_traced_memory()[0]

    tracemalloc.start()
    try:
        store = cache_activations(
            model, texts, HOOKS, tmp_path / "s", batch_size=8, shard_rows=24, progress=False, on_shard=sample
        )
    finally:
        tracemalloc.stop()
    rows_between = 40 * 24
    token_bytes = rows_between * sum(sys.getsizeof(t) for t in store.index["token"]) / len(store)
    assert len(store.shards) > 45
    assert samples[45] - samples[5] < token_bytes * 0.6, (samples, token_bytes)
