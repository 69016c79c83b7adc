"""The explainer's "why here": for the head shown first, what in the query matched what in the key.

QK attribution (:mod:`interp.analysis.qk`) splits a score into query-component x key-component terms that add
up to it exactly. The page shows, for the followed token and the head it opens on, the largest terms of the
score to the strongest key and to the runner-up, the largest terms of their difference ("why this key rather
than that one"), and, when a twin text is given, of the change in the score to the strongest key between the
two texts. Only that head is computed: an attribution costs a forward pass, and the page stays small.
"""

from __future__ import annotations

from typing import Any

import torch

from interp.analysis.qk import qk_attribution, qk_names
from interp.analysis.qk.difference import qk_key_difference, qk_twin_difference
from interp.analysis.qk.matrix import QKMatrix

WHY_TOP = 6
"""Component pairs listed per score."""


def _pairs(matrix: QKMatrix) -> list[dict[str, Any]]:
    table = matrix.table(top=WHY_TOP)
    return [
        {"query": q, "key": k, "value": float(v), "share": float(s)}
        for q, k, v, s in zip(table["query"], table["key"], table["value"], table["share"], strict=True)
    ]


def strongest_keys(row: torch.Tensor) -> list[int]:
    """The two keys with the most weight in a pattern row ``[key]`` (fewer when fewer have any)."""
    top = row.float().topk(min(2, row.shape[-1]))
    return [k for k, w in zip(top.indices.tolist(), top.values.tolist(), strict=True) if w > 0]


@torch.no_grad()
def why_here(
    model: Any, text: str, query: int, layer: int, head: int, row: torch.Tensor, twin: str | None = None
) -> dict[str, Any]:
    """The "why here" data for ``(layer, head)`` at ``query``; ``row [key]`` is the head's pattern row."""
    keys = strongest_keys(row)
    ids, mask = model.to_tokens(text)
    _, cache = model.run_with_cache(ids, mask, names_filter=qk_names(model, layer))
    out: dict[str, Any] = {"layer": layer, "head": head, "keys": [], "difference": None, "twin": None}
    for key in keys:
        attribution = qk_attribution(model, text, layer, head, query, key, cache=cache)
        out["keys"].append({"key": key, "score": attribution.score, "pairs": _pairs(attribution)})
    if len(keys) == 2:
        difference = qk_key_difference(model, text, layer, head, query, keys[0], keys[1], cache=cache)
        out["difference"] = {"total": difference.total, "pairs": _pairs(difference)}
    if twin is not None:
        try:
            change = qk_twin_difference(model, text, twin, layer, head, query, keys[0])
        except ValueError as err:  # the twin does not align at the query or the key: say so on the page
            out["twin"] = {"text": twin, "note": str(err)}
        else:
            out["twin"] = {
                "text": twin,
                "score": change.second.score,
                "total": change.total,
                "pairs": _pairs(change),
            }
    return out
