"""Activation store: activations for more items than fit in memory, as safetensors shards plus an index.

``cache_activations`` (and ``interp cache``) streams a data set through a model in batches and keeps the
requested hooks, one row per token (all tokens, the last, or listed positions; never padding). Rows go into
shard files of ``shard_rows`` rows, ``shard_00000.safetensors``, ...; each file holds one tensor per hook,
``[rows, *row_shape]``, rows aligned across hooks, plus its own index (item, position, token string, item
id). ``meta.json`` records the model (name, config, weight fingerprint), hooks, positions, dtype and data
fingerprint; a folder written for anything else is refused instead of mixed.

Runs are resumable: every shard is committed by an atomic rename and records where the next one starts, so
a killed run continues after its last committed shard and produces byte for byte the store an uninterrupted
run would. Under ``torchrun`` the ranks split the batches and write ``rank{r}/`` subfolders that read back as
one store. :class:`ActivationStore` reads a store: ``.index`` (a DataFrame), ``.tensor(hook, rows)``,
``.memmap(hook)``, iteration over shards.

Example:
    >>> store = cache_activations(model, texts, "blocks.*.hook_resid_post", "acts/")  # doctest: +SKIP
    >>> store.tensor("blocks.0.hook_resid_post").shape  # [rows, d_model]  # doctest: +SKIP
"""

from interp.store.cache import cache_activations
from interp.store.corpus import read_corpus, read_items, windows
from interp.store.meta import StoreMismatchError
from interp.store.rank_run import RunStats
from interp.store.reader import ActivationStore, ShardedArray, StoreShard

__all__ = [
    "ActivationStore",
    "RunStats",
    "ShardedArray",
    "StoreMismatchError",
    "StoreShard",
    "cache_activations",
    "read_corpus",
    "read_items",
    "windows",
]
