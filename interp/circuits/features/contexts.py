"""Top activating contexts of transcoder features, read from an activation store, for the graph viewer.

The store must hold each needed layer's transcoder input hook (``transcoders.input_hook(layer)``), one row per
token (``interp cache MODEL --hooks ... --positions all``). The contexts are the top examples of the features'
dashboards (:func:`interp.sae.dashboards.collect`, one pass over the store): for each requested feature the
``k`` tokens where it is largest, each shown as the ``window`` tokens before it and the token itself, marked
``[[...]]``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

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
    from interp.sae.dashboards import Data, Settings, collect

    wanted = sorted({(int(layer), int(feature)) for layer, feature in features})
    settings = Settings(top=k, before=window, after=0, quantiles=1, per_quantile=1, sample=1)
    collected = collect(None, transcoders, Data(store=store), settings=settings, features=wanted)
    out = {}
    for file in collected.records(None):
        top = file.examples_quantiles[0].examples if file.examples_quantiles else []
        out[(file.layer, file.feature)] = [_marked(e) for e in top]
    return out


def _marked(example: Any) -> str:
    chosen = example.train_token_ind
    return "".join(f"[[{t}]]" if i == chosen else t for i, t in enumerate(example.tokens))
