"""A feature's dashboard as a record in circuit-tracer's feature-file schema, from the pass's tables.

circuit-tracer 0.5's ``frontend/feature_models.py`` (``Model``) names the fields: ``examples_quantiles`` (groups
of examples, each example its ``tokens``, the feature's activation at every token ``tokens_acts_list``, the
chosen token ``train_token_ind``, and ``is_repeated_datapoint``), ``top_logits`` / ``bottom_logits``,
``act_min`` / ``act_max``, ``quantile_values``, ``histogram``, ``activation_frequency``. The records add a few
fields that model ignores: ``layer``, ``feature``, ``n_active``, ``n_tokens``, ``histogram_range`` and
``quantile_bounds``, and on each example ``item``, ``position`` and ``activation``.

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

from interp.sae.dashboards.collector import Collector
from interp.sae.dashboards.dictionary import Dictionary, cantor
from interp.sae.dashboards.logits import top_tokens
from interp.sae.dashboards.sources import TokenTexts

PERCENTILES = torch.arange(1, 101, dtype=torch.float64) / 100
TOP_NAME = "Top activations"


def quantile_name(group: int, groups: int, low: float, high: float) -> str:
    """The title of quantile group ``group`` (0: the lowest) of ``groups``."""
    lo, hi = round(100 * group / groups), round(100 * (group + 1) / groups)
    return f"Quantile {lo}-{hi}%: activations {low:.3g} to {high:.3g}"


def feature_records(
    collector: Collector,
    model: Any,
    dictionary: Dictionary,
    texts: TokenTexts,
    scan: str,
    start: int,
    stop: int,
) -> list[dict[str, Any]]:
    """The records of global features ``start`` to ``stop`` (see the module docstring)."""
    s = collector.settings
    rows = torch.arange(start, stop, device=collector.count.device)
    count, low, high = collector.count[rows], collector.low[rows], collector.high[rows]
    low = torch.where(count > 0, low, torch.zeros_like(low))
    percentiles = collector.hist.quantiles(rows, PERCENTILES.to(rows.device), low, high).cpu()
    inner = torch.arange(1, s.quantiles, dtype=torch.float64, device=rows.device) / s.quantiles
    bounds = collector.hist.quantiles(rows, inner, low, high).cpu().numpy()  # [n, quantiles - 1]
    top = {k: v[rows].cpu() for k, v in {"filled": collector.top.filled, **collector.top.fields}.items()}
    sample = {
        k: v[rows].cpu() for k, v in {"filled": collector.sample.filled, **collector.sample.fields}.items()
    }
    ident = collector.identity()[start:stop]
    logits = _logits(collector, model, dictionary, ident, start)
    codes = torch.cat([top["tokens"].flatten(), sample["tokens"].flatten()]).unique().tolist()
    words = texts.texts(codes)
    n_tokens = max(collector.n_tokens, 1)
    out = []
    count, low, high = count.cpu().tolist(), low.cpu().tolist(), high.cpu().tolist()
    for i, (layer, feature) in enumerate(ident):
        edges = [low[i], *bounds[i].tolist(), high[i]]
        groups = _examples(s, {k: v[i] for k, v in top.items()}, {k: v[i] for k, v in sample.items()}, edges)
        decimals = max(0, 3 - math.floor(math.log10(high[i]))) if high[i] > 0 else 4
        quantiles = [{"quantile_name": TOP_NAME, "examples": groups[0]}] if count[i] else []
        for g in range(s.quantiles - 1, -1, -1):
            if groups[g + 1]:
                name = quantile_name(g, s.quantiles, edges[g], edges[g + 1])
                quantiles.append({"quantile_name": name, "examples": groups[g + 1]})
        seen: set[int] = set()
        for group in quantiles:
            group["examples"] = [_example(e, words, s.before, decimals, seen) for e in group["examples"]]
        counts, edge = collector.hist.drawn(start + i, high[i])
        out.append(
            {
                "transcoder_id": scan,
                "index": cantor(layer, feature),
                "layer": layer,
                "feature": feature,
                "examples_quantiles": quantiles,
                "top_logits": logits.get(i, ([], []))[0],
                "bottom_logits": logits.get(i, ([], []))[1],
                "act_min": low[i],
                "act_max": high[i],
                "quantile_values": percentiles[i].tolist() if count[i] else [],
                "quantile_bounds": edges if count[i] else [],
                "histogram": [float(c) for c in counts],
                "histogram_range": [0.0, edge],
                "activation_frequency": count[i] / n_tokens,
                "n_active": count[i],
                "n_tokens": collector.n_tokens,
            }
        )
    return out


def _examples(s: Any, top: dict, sample: dict, edges: list[float]) -> list[list[dict]]:
    """The top examples (group 0) and each quantile group's (1 + g, g from the lowest), as payload dicts."""

    def entry(table: dict, j: int) -> dict:
        return {k: table[k][j] for k in ("value", "item", "position", "window", "tokens")}

    tops = [entry(top, j) for j in range(len(top["filled"])) if top["filled"][j]]
    shown = {(int(e["item"]), int(e["position"])) for e in tops}
    groups: list[list[dict]] = [tops] + [[] for _ in range(s.quantiles)]
    inner = np.asarray(edges[1:-1])
    for j in range(len(sample["filled"])):
        if not sample["filled"][j]:
            break  # rows are sorted: the empty slots come last
        e = entry(sample, j)
        if (int(e["item"]), int(e["position"])) in shown:
            continue
        g = int(np.searchsorted(inner, float(e["value"]), side="right"))  # edges[g] <= value < edges[g + 1]
        if len(groups[g + 1]) < s.per_quantile:
            groups[g + 1].append(e)
    return groups


def _example(e: dict, words: dict[int, str], before: int, decimals: int, seen: set[int]) -> dict[str, Any]:
    window = e["window"].float().numpy()
    inside = ~np.isnan(window)
    first = int(np.argmax(inside))
    item = int(e["item"])
    repeated = item in seen
    seen.add(item)
    return {
        "tokens": [words[int(c)] for c in e["tokens"][torch.from_numpy(inside)].tolist()],
        "tokens_acts_list": np.round(window[inside].astype(np.float64), decimals).tolist(),
        "train_token_ind": before - first,
        "is_repeated_datapoint": repeated,
        "item": item,
        "position": int(e["position"]),
        "activation": float(e["value"]),
    }


def _logits(
    collector: Collector, model: Any, dictionary: Dictionary, ident: list[tuple[int, int]], start: int
) -> dict[int, tuple[list[str], list[str]]]:
    """Chunk position -> (promoted, suppressed) token texts."""
    out: dict[int, tuple[list[str], list[str]]] = {}
    tokenizer = getattr(model, "tokenizer", None)
    by_layer: dict[int, list[int]] = {}
    for i, (layer, _) in enumerate(ident):
        by_layer.setdefault(layer, []).append(i)
    for layer, places in by_layer.items():
        feats = torch.tensor([ident[i][1] for i in places])
        found = top_tokens(model, dictionary.logit_rows(layer, feats), collector.settings.logits)
        if found is None:
            continue
        ups, downs = found
        for place, up, down in zip(places, ups.tolist(), downs.tolist(), strict=True):
            if tokenizer is None:
                out[place] = ([str(t) for t in up], [str(t) for t in down])
            else:
                out[place] = (tokenizer.to_str_tokens(up), tokenizer.to_str_tokens(down))
    return out
