"""Each feature's dashboard as a :class:`~interp.sae.dashboards.schema.FeatureFile`, from the pass's tables.

The groups: ``Top activations`` (the ``top`` largest), then the active tokens split by activation into
``quantiles`` groups of equal count, highest first, each showing up to ``per_quantile`` tokens of the uniform
sample that fall in it, in sample order, leaving out tokens already shown: the tokens of the group with the
smallest sample keys, i.e. a uniform draw from the group. The group bounds are the quantiles of the log
histogram (within 9% of the exact ones); ``quantile_values`` lists its 1st to 100th percentiles, as
circuit-tracer's page reads them (an activation's percentile is the first value it does not exceed).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from interp.dictionary import SparseDictionary
from interp.feature_id import feature_index
from interp.sae.dashboards.collector import Collector
from interp.sae.dashboards.logits import logit_rows, top_tokens
from interp.sae.dashboards.schema import Example, FeatureFile, QuantileGroup
from interp.sae.dashboards.sources import TokenTexts

PERCENTILES = torch.arange(1, 101, dtype=torch.float64) / 100
TOP_NAME = "Top activations"


def quantile_name(group: int, groups: int, low: float, high: float) -> str:
    """The title of quantile group ``group`` (0: the lowest) of ``groups``."""
    lo, hi = round(100 * group / groups), round(100 * (group + 1) / groups)
    return f"Quantile {lo}-{hi}%: activations {low:.3g} to {high:.3g}"


def feature_files(
    collector: Collector,
    model: Any,
    dictionary: SparseDictionary,
    texts: TokenTexts,
    scan: str,
    start: int,
    stop: int,
) -> list[FeatureFile]:
    """The files of the pass's features ``start`` to ``stop`` (in the collector's order; see the module
    docstring)."""
    s = collector.settings
    rows = torch.arange(start, stop, device=collector.count.device)
    count, low, high = collector.count[rows], collector.low[rows], collector.high[rows]
    low = torch.where(count > 0, low, torch.zeros_like(low))
    percentiles = collector.hist.quantiles(rows, PERCENTILES.to(rows.device), low, high).cpu().numpy()
    inner = torch.arange(1, s.quantiles, dtype=torch.float64, device=rows.device) / s.quantiles
    bounds = collector.hist.quantiles(rows, inner, low, high).cpu().numpy()  # [n, quantiles - 1]
    drawn = collector.hist.drawn(rows, high)
    top, sample = _numpy(collector.top, rows), _numpy(collector.sample, rows)
    ident = collector.identity()[start:stop]
    logits = _logits(collector, model, dictionary, ident)
    words = texts.texts(np.unique(np.concatenate([top["tokens"].ravel(), sample["tokens"].ravel()])).tolist())
    n_tokens = max(collector.n_tokens, 1)
    out = []
    count, low, high = count.cpu().tolist(), low.cpu().tolist(), high.cpu().tolist()
    for i, (layer, feature) in enumerate(ident):
        edges = [low[i], *bounds[i].tolist(), high[i]]
        groups = _examples(s, top, sample, i, edges)
        decimals = max(0, 3 - math.floor(math.log10(high[i]))) if high[i] > 0 else 4
        named = [(TOP_NAME, groups[0])] if count[i] else []
        for g in range(s.quantiles - 1, -1, -1):
            if groups[g + 1]:
                named.append((quantile_name(g, s.quantiles, edges[g], edges[g + 1]), groups[g + 1]))
        seen: set[int] = set()
        quantiles = [
            QuantileGroup(name, [_example(t, i, j, words, s.before, decimals, seen) for t, j in chosen])
            for name, chosen in named
        ]
        counts, edge = drawn[i]
        top_logits, bottom_logits = logits.get(i, ([], []))
        out.append(
            FeatureFile(
                transcoder_id=scan,
                index=feature_index(layer, feature),
                layer=layer,
                feature=feature,
                examples_quantiles=quantiles,
                top_logits=top_logits,
                bottom_logits=bottom_logits,
                act_min=low[i],
                act_max=high[i],
                quantile_values=percentiles[i].tolist() if count[i] else [],
                quantile_bounds=edges if count[i] else [],
                histogram=counts,
                histogram_range=[0.0, edge],
                activation_frequency=count[i] / n_tokens,
                n_active=count[i],
                n_tokens=collector.n_tokens,
            )
        )
    return out


def _numpy(table: Any, rows: torch.Tensor) -> dict[str, np.ndarray]:
    """A reservoir's rows ``rows`` in key order as numpy arrays (``filled`` and every field)."""
    out = {k: v.cpu().numpy() for k, v in table.sorted(rows).items()}
    out["window"] = out["window"].astype(np.float64)
    return out


def _examples(s: Any, top: dict, sample: dict, i: int, edges: list[float]) -> list[list[tuple[dict, int]]]:
    """Feature ``i``'s top examples (group 0) and each quantile group's (``1 + g``, ``g`` from the lowest), as
    ``(table, slot)`` pairs."""
    tops = [(top, j) for j in np.flatnonzero(top["filled"][i])]
    shown = {(int(top["item"][i, j]), int(top["position"][i, j])) for _, j in tops}
    groups: list[list[tuple[dict, int]]] = [tops] + [[] for _ in range(s.quantiles)]
    filled = np.flatnonzero(sample["filled"][i])  # in key order: rows are kept sorted
    which = np.searchsorted(np.asarray(edges[1:-1]), sample["value"][i, filled], side="right")
    for j, g in zip(filled.tolist(), which.tolist(), strict=True):  # edges[g] <= value < edges[g + 1]
        if (
            len(groups[g + 1]) < s.per_quantile
            and (int(sample["item"][i, j]), int(sample["position"][i, j])) not in shown
        ):
            groups[g + 1].append((sample, j))
    return groups


def _example(
    table: dict, i: int, j: int, words: dict[int, str], before: int, decimals: int, seen: set[int]
) -> Example:
    window = table["window"][i, j]
    inside = ~np.isnan(window)
    first = int(np.argmax(inside))
    item = int(table["item"][i, j])
    repeated = item in seen
    seen.add(item)
    return Example(
        tokens=[words[c] for c in table["tokens"][i, j][inside].tolist()],
        tokens_acts_list=np.round(window[inside], decimals).tolist(),
        train_token_ind=before - first,
        is_repeated_datapoint=repeated,
        item=item,
        position=int(table["position"][i, j]),
        activation=float(table["value"][i, j]),
    )


def _logits(
    collector: Collector, model: Any, dictionary: SparseDictionary, ident: list[tuple[int, int]]
) -> dict[int, tuple[list[str], list[str]]]:
    """Chunk position -> (promoted, suppressed) token texts."""
    found: dict[int, tuple[list[int], list[int]]] = {}
    by_layer: dict[int, list[int]] = {}
    for i, (layer, _) in enumerate(ident):
        by_layer.setdefault(layer, []).append(i)
    for layer, places in by_layer.items():
        feats = torch.tensor([ident[i][1] for i in places])
        tops = top_tokens(model, logit_rows(dictionary, layer, feats), collector.settings.logits)
        if tops is not None:
            for place, up, down in zip(places, tops[0].tolist(), tops[1].tolist(), strict=True):
                found[place] = (up, down)
    names = TokenTexts(getattr(model, "tokenizer", None), ids=True)
    words = names.texts([t for up, down in found.values() for t in up + down])
    return {i: ([words[t] for t in up], [words[t] for t in down]) for i, (up, down) in found.items()}
