"""Top activating contexts of transcoder features, read from an activation store, for the graph viewer.

The store must hold each needed layer's transcoder input hook (``transcoders.input_hook(layer)``), one row per
token (``interp cache MODEL --hooks ... --positions all``). Shards are read one at a time; for each requested
feature the ``k`` rows where it is largest are kept, and each is shown as the ``window`` tokens before it and
the token itself, marked ``[[...]]``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from interp.dictionary import SparseDictionary


def top_contexts(
    store: Any,
    transcoders: SparseDictionary,
    features: Iterable[tuple[int, int]],
    *,
    k: int = 5,
    window: int = 12,
) -> dict[tuple[int, int], list[str]]:
    """``(layer, feature) -> texts`` of the ``k`` tokens of ``store`` where each feature is most active."""
    wanted: dict[int, list[int]] = {}
    for layer, feature in features:
        wanted.setdefault(int(layer), []).append(int(feature))
    missing = [
        transcoders.input_hook(lay) for lay in wanted if transcoders.input_hook(lay) not in store.hook_names
    ]
    if missing:
        raise ValueError(
            f"the activation store has no rows of {missing}; cache the transcoders' input hooks "
            f"(it holds {store.hook_names})"
        )
    best: dict[tuple[int, int], list[tuple[float, int]]] = {}
    offset = 0
    for shard in store:
        for layer, feats in wanted.items():
            x = shard.tensors[transcoders.input_hook(layer)].float()  # [rows, d_model]
            with torch.no_grad():
                acts = transcoders.encode(x, layer)[1][:, feats]  # [rows, n_features]
            top = acts.topk(min(k, len(acts)), dim=0)
            for j, feat in enumerate(feats):
                found = best.setdefault((layer, feat), [])
                found += [
                    (float(v), offset + int(r))
                    for v, r in zip(top.values[:, j], top.indices[:, j], strict=True)
                ]
                found.sort(reverse=True)
                del found[k:]
        offset += len(shard.index)
    index = store.index
    return {
        key: [_context(index, row, window) for value, row in rows if value > 0] for key, rows in best.items()
    }


def _context(index: Any, row: int, window: int) -> str:
    item, position = index.at[row, "item"], int(index.at[row, "position"])
    same = index[(index["item"] == item) & (index["position"].between(position - window, position))]
    same = same.sort_values("position")
    tokens = ("" if t is None else str(t) for t in same["token"])
    return "".join(f"[[{t}]]" if p == position else t for p, t in zip(same["position"], tokens, strict=True))
