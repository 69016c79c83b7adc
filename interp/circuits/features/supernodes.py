"""Automatic supernodes: groups of feature nodes that play one role, proposed with a criterion a test can check.

Two feature nodes may share a group when all of these hold:

1. **same position**: they are active at the same token;
2. **aligned decoders**: the cosine of their decoder rows (every layer they write, concatenated) is at least
   ``decoder_cosine``;
3. **interchangeable effects**: the cosine of their outgoing edges (their columns of the adjacency: what each
   does to every later node and logit) is at least ``effect_cosine``.

Groups are complete: every pair in a group meets all three (merged greedily, most similar pairs first). Then the
graph is **collapsed** onto the groups (a group's edges are its members' edges summed, in and out) and each
unit's influence on the logits (:meth:`~interp.circuits.features.graph.AttributionGraph.influence`) is compared
with its members' total influence in the full graph. The *influence kept* is ``1 - sum_u |I'(u) - I(u)| /
sum_u I(u)`` over every unit (groups and the nodes left alone); while it is below ``1 - tolerance`` the groups
whose own units move influence most are dissolved (ranked once, their number found by bisection), so the
proposal always keeps its influence within ``tolerance``. The criterion, the thresholds, the influence kept and
how much the graph shrank are reported with the groups.

The similarities are computed per position, a matrix product each; ``benchmarks/supernodes.py`` times a graph of
2,000 feature nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from interp.circuits.features import influence as inf
from interp.dictionary import SparseDictionary


@dataclass(frozen=True)
class Proposal:
    """Proposed supernodes and what collapsing the graph onto them keeps.

    Attributes:
        groups: ``(name, members)`` pairs (interp's node names), largest groups first.
        influence_kept: ``1 - sum |I' - I| / sum I`` over the collapsed graph's units (module docstring).
        n_nodes: the graph's nodes; ``n_units``: the nodes left once each group is one unit.
        criterion: the thresholds used (``decoder_cosine``, ``effect_cosine``, ``tolerance``).
    """

    groups: tuple[tuple[str, tuple[str, ...]], ...]
    influence_kept: float
    n_nodes: int
    n_units: int
    criterion: dict[str, float]

    def report(self) -> dict[str, Any]:
        """What the graph file's extension records beside the proposed groups."""
        return {
            "rule": (
                "same position; decoder cosine >= decoder_cosine; cosine of outgoing edges >= effect_cosine; "
                "every pair in a group; groups dissolved until the collapsed graph keeps its influence within "
                "tolerance"
            ),
            **self.criterion,
            "influence_kept": self.influence_kept,
            "n_nodes": self.n_nodes,
            "n_units": self.n_units,
            "n_groups": len(self.groups),
        }


def propose_supernodes(
    graph: Any,
    transcoders: SparseDictionary,
    *,
    candidates: Sequence[str] | None = None,
    decoder_cosine: float = 0.3,
    effect_cosine: float = 0.8,
    tolerance: float = 0.05,
    min_size: int = 2,
) -> Proposal:
    """Groups of ``graph``'s feature nodes that play one role (see the module docstring).

    Args:
        transcoders: the graph's transcoders (their decoder rows).
        candidates: the feature nodes that may be grouped (default: every feature node).
        decoder_cosine, effect_cosine: the thresholds of criteria 2 and 3, in [-1, 1].
        tolerance: the most influence the collapsed graph may move, as a share of the total, in [0, 1].
        min_size: the fewest members of a group.
    """
    for name, value, low in (
        ("decoder_cosine", decoder_cosine, -1.0),
        ("effect_cosine", effect_cosine, -1.0),
    ):
        if not low <= value <= 1.0:
            raise ValueError(f"{name} must be within [-1, 1], got {value}")
    if not 0.0 <= tolerance <= 1.0:
        raise ValueError(f"tolerance must be within [0, 1], got {tolerance}")
    if isinstance(min_size, bool) or not isinstance(min_size, int) or min_size < 2:
        raise ValueError(f"min_size must be an integer of at least 2, got {min_size!r}")
    rows = _candidates(graph, candidates)
    adjacency = graph.adjacency.float()
    decoders = _decoders(graph, transcoders, rows)
    effects = torch.nn.functional.normalize(adjacency[:, rows].T, dim=1)  # [n, N] outgoing edges
    positions = graph.features[rows, 1]
    groups: list[list[int]] = []
    for pos in positions.unique().tolist():
        at = (positions == pos).nonzero().flatten()
        if len(at) < min_size:
            continue
        ok = (decoders[at] @ decoders[at].T >= decoder_cosine) & (
            effects[at] @ effects[at].T >= effect_cosine
        )
        similarity = torch.minimum(decoders[at] @ decoders[at].T, effects[at] @ effects[at].T)
        groups += [
            [int(rows[at[i]]) for i in g] for g in _complete_groups(ok, similarity) if len(g) >= min_size
        ]
    weights = graph.logit_weights
    before = inf.influence(inf.normalise(adjacency), weights)
    groups, kept = _within(adjacency, weights, before, groups, tolerance)
    groups.sort(key=lambda g: (-len(g), g[0]))
    named = tuple((_name(graph, g), tuple(str(graph.nodes[i]) for i in g)) for g in groups)
    n_units = len(graph.nodes) - sum(len(g) - 1 for g in groups)
    criterion = {"decoder_cosine": decoder_cosine, "effect_cosine": effect_cosine, "tolerance": tolerance}
    return Proposal(named, kept, len(graph.nodes), n_units, criterion)


def collapse(adjacency: torch.Tensor, groups: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """The adjacency with each group summed into one unit (rows and columns), and each node's unit ``[N]``;
    units keep the order of their first node."""
    n = adjacency.shape[0]
    unit = torch.arange(n)
    for g in groups:
        unit[list(g)] = min(g)
    kept, unit = unit.unique(return_inverse=True)  # units numbered in node order
    out = torch.zeros(len(kept), n, dtype=adjacency.dtype).index_add_(0, unit, adjacency)
    out = torch.zeros(len(kept), len(kept), dtype=adjacency.dtype).index_add_(1, unit, out)
    return out, unit


def _within(adjacency, weights, before, groups, tolerance) -> tuple[list[list[int]], float]:
    """The groups left once those whose own units move the most influence are dissolved, as few as keep the
    influence within ``tolerance``: the groups are ranked once by their unit's error, and the number dissolved
    is found by bisection (a few influence computations, not one per group), then checked."""
    kept, errors, unit = _kept(adjacency, weights, before, groups)
    if kept >= 1 - tolerance:
        return groups, kept
    ranked = sorted(groups, key=lambda g: -float(errors[unit[g[0]]]))
    low, high = 0, len(ranked)  # dissolving `high` (all) keeps everything; `low` is known to fail
    while high - low > 1:
        mid = (low + high) // 2
        if _kept(adjacency, weights, before, ranked[mid:])[0] >= 1 - tolerance:
            high = mid
        else:
            low = mid
    kept = _kept(adjacency, weights, before, ranked[high:])[0]
    while kept < 1 - tolerance:  # kept need not grow with every group dissolved: step on until it holds
        high += 1
        kept = _kept(adjacency, weights, before, ranked[high:])[0]
    return ranked[high:], kept


def _kept(adjacency, weights, before, groups) -> tuple[float, torch.Tensor, torch.Tensor]:
    """The influence kept by collapsing onto ``groups``, each unit's error ``|I' - I|`` and each node's unit."""
    collapsed, unit = collapse(adjacency, groups)
    unit_weights = torch.zeros(collapsed.shape[0]).index_add_(0, unit, weights)
    after = inf.influence(inf.normalise(collapsed), unit_weights)
    summed = torch.zeros(collapsed.shape[0]).index_add_(0, unit, before)
    errors = (after - summed).abs()
    return 1.0 - float(errors.sum() / summed.sum().clamp(min=1e-30)), errors, unit


def _candidates(graph: Any, candidates: Sequence[str] | None) -> torch.Tensor:
    if candidates is None:
        return torch.arange(graph.n_features)
    rows = []
    for name in candidates:
        i = graph.index(name)
        if graph.nodes[i].kind != "feature":
            raise ValueError(f"supernodes group feature nodes; {name} is a {graph.nodes[i].kind} node")
        rows.append(i)
    return torch.tensor(sorted(set(rows)), dtype=torch.long)


def _decoders(graph: Any, transcoders: SparseDictionary, rows: torch.Tensor) -> torch.Tensor:
    """``[n, d]`` unit decoder rows of the candidates (every layer a feature writes, concatenated, padded)."""
    feats = graph.features[rows]
    width = max(len(transcoders.output_layers(layer)) for layer in transcoders.layers) * transcoders.d_out
    out = torch.zeros(len(rows), width)
    with torch.no_grad():
        for layer in feats[:, 0].unique().tolist():
            at = (feats[:, 0] == layer).nonzero().flatten()
            dec = transcoders.decoder(layer, feats[at, 2]).float().flatten(1).cpu()  # [n, n_out * d_out]
            out[at, : dec.shape[1]] = dec
    return torch.nn.functional.normalize(out, dim=1)


def _complete_groups(ok: torch.Tensor, similarity: torch.Tensor) -> list[list[int]]:
    """Greedy complete-linkage groups: pairs merged from the most similar down while every cross pair is ok."""
    n = ok.shape[0]
    group = list(range(n))
    members = {i: [i] for i in range(n)}
    upper = torch.triu(ok, diagonal=1).nonzero().tolist()
    upper.sort(key=lambda ij: -float(similarity[ij[0], ij[1]]))
    for i, j in upper:
        a, b = group[i], group[j]
        if a == b:
            continue
        if bool(ok[members[a]][:, members[b]].all()):
            for m in members[b]:
                group[m] = a
            members[a] += members.pop(b)
    return [sorted(m) for m in members.values() if len(m) > 1]


def _name(graph: Any, rows: list[int]) -> str:
    nodes = [graph.nodes[i] for i in rows]
    layers = sorted({n.layer for n in nodes})
    span = f"L{layers[0]}" if len(layers) == 1 else f"L{layers[0]}-{layers[-1]}"
    return f"{span}@{nodes[0].position} x{len(nodes)} ({nodes[0]})"
