"""One twin pair traced: the edges from its candidates into the answer, the heads that carry them, and, for
chosen heads, the query-node terms of their preference for one candidate's key over the other's.

Edges. In each twin's attribution graph, the edge from each candidate (the referent of one twin, the other
candidate of the other) into the difference target ``a - b``: the feature or token node at the candidate's words
with the largest absolute direct edge to the target. Where the candidate lies in the prefix both twins share (the
WSC273 nouns come before the switch word, and the model is causal) that node has the same activation and write in
both twins, so one node is followed in both: the one present in both graphs with the largest summed absolute edge.
Otherwise (an agreement pair's names differ) each twin has its own.

Heads. Each edge is split exactly into the heads its paths pass last (``edges_head_loadings``, of the
difference: the first token's loadings minus the second's), and a head's *carry* in a twin is its loading
summed over the candidates' edges. Its twin difference (the twin expecting ``a`` minus the twin expecting ``b``)
is positive when the head carries the switch toward the expected referent. Two covariates per head, for
controls: its magnitude (the summed absolute loadings: how much of the referent edges it carries at all, its
influence on them) and its attention from the last position to the candidates' words (its activation there).

Terms. For a head, its score from the last position to the first candidate's key minus to the second's
(``key_difference``), split into query-node x key-node terms of the graph's nodes; row sums are each query node's
part of that preference. A node at a position both twins share writes the same in both, so only nodes from the
first differing token on can be what differs between twins; their parts are summed by (layer, feature). What
the shared positions, the errors, the token embeddings and the bias (what no node writes) contribute is kept as
shares. In WSC273 pairs every key position lies in the shared prefix, so the key side is the same in both twins
and the twin difference of the preference is all in the query: only query parts are compared.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from interp.circuits.features.attention import BIAS, head_scores, key_difference
from interp.circuits.features.heads import edges_head_loadings
from studies.attribution.pairs import TwinPair

Key = tuple[int, int, int, int]  # (head layer, head, feature layer, feature)


def candidate_nodes(graph: Any, positions: list[int]) -> dict[str, float]:
    """Each feature or token node at ``positions`` with its direct edge to the difference target ``logit.0``."""
    target = graph.n_features + graph.n_errors + graph.n_pos  # the row of logit.0
    row = graph.adjacency[target].float()
    wanted = set(positions)
    return {
        str(node): float(row[i])
        for i, node in enumerate(graph.nodes[:target])
        if node.kind in ("feature", "token") and node.position in wanted
    }


def sources(pair: TwinPair, graphs: tuple[Any, Any]) -> list[list[str | None]]:
    """``[twin][candidate]``: the node each candidate's edge comes from (``None`` where every edge is zero);
    one node for both twins where the candidate's words lie in the shared prefix (module docstring)."""
    out: list[list[str | None]] = [[], []]
    for role in pair.candidates:
        found = [candidate_nodes(g, p.roles[role]) for g, p in zip(graphs, pair.prompts, strict=True)]
        if all(p < pair.shared for p in pair.first.roles[role]):
            both = set(found[0]) & set(found[1])
            size = {n: abs(found[0][n]) + abs(found[1][n]) for n in both}
            best = max(sorted(size), key=lambda n: size[n], default=None)
            chosen = [best if best is not None and size[best] > 0 else None] * 2
        else:
            chosen = [max(sorted(f), key=lambda n: abs(f[n]), default=None) for f in found]
            chosen = [c if c is not None and found[t][c] != 0 else None for t, c in enumerate(chosen)]
        for twin in range(2):
            out[twin].append(chosen[twin])
    return out


def head_carries(model: Any, tc: Any, graph: Any, nodes: list[str | None]) -> dict:
    """Per head, its carry of the candidates' edges into the difference (``[layer, head]``), the summed
    absolute loadings, the edges and their attention-free parts."""
    cfg = model.cfg
    carry = np.zeros((cfg.n_layers, cfg.n_heads))
    magnitude = np.zeros_like(carry)
    edges, direct = [], []
    kept = [n for n in nodes if n is not None]
    pairs = [(t, n) for n in kept for t in ("logit.1", "logit.2")]
    found = edges_head_loadings(model, tc, graph, pairs) if pairs else []
    for i in range(len(kept)):
        first, second = found[2 * i], found[2 * i + 1]
        loads = (first.heads - second.heads).double().numpy()  # [layer, head]
        carry += loads
        magnitude += np.abs(loads)
        edges.append(first.edge - second.edge)
        direct.append(first.direct - second.direct)
    return {"carry": carry, "magnitude": magnitude, "edges": edges, "direct": direct}


@torch.no_grad()
def attention_to(model: Any, tokens: torch.Tensor, positions: list[int]) -> np.ndarray:
    """``[layer, head]``: each head's attention from the last position to ``positions``, summed."""
    names = [f"blocks.{layer}.attn.hook_pattern" for layer in range(model.cfg.n_layers)]
    _, cache = model.run_with_cache(tokens[None].to(model.embed.W_E.device), names_filter=names)
    index = torch.tensor(sorted(set(positions)))
    rows = [cache[n][0, :, -1, :].float().cpu()[:, index].sum(-1) for n in names]  # [head] each
    return torch.stack(rows).double().numpy()


def trace_heads(model: Any, tc: Any, pair: TwinPair, graphs: tuple[Any, Any]) -> dict:
    """The pair's heads: each twin's carries (``[twin, layer, head]``), magnitudes and attention to the
    candidates, and the followed nodes with their edges."""
    nodes = sources(pair, graphs)
    twins = [head_carries(model, tc, g, n) for g, n in zip(graphs, nodes, strict=True)]
    positions = [p for role in pair.candidates for p in pair.first.roles[role]]
    second_positions = [p for role in pair.candidates for p in pair.second.roles[role]]
    attention = [
        attention_to(model, pair.first.tokens, positions),
        attention_to(model, pair.second.tokens, second_positions),
    ]
    return {
        "nodes": nodes,
        "edges": [t["edges"] for t in twins],
        "direct": [t["direct"] for t in twins],
        "carry": np.stack([t["carry"] for t in twins]),
        "magnitude": np.stack([t["magnitude"] for t in twins]),
        "attention": np.stack(attention),
    }


def query_parts(score: Any, graph: Any, shared: int) -> tuple[dict[tuple[int, int], float], dict[str, float]]:
    """A key difference's query-node parts: feature nodes from position ``shared`` on, summed by (layer,
    feature); and what the rest contributes, by kind (``shared`` features, ``error``, ``token``, ``bias``)."""
    rows = score.matrix.double().sum(1).tolist()  # [query node]: q_n . (k_a - k_b) * scale
    by_feature: dict[tuple[int, int], float] = {}
    rest = {"shared": 0.0, "error": 0.0, "token": 0.0, "bias": 0.0}
    for node, value in zip(score.query_components, rows, strict=True):  # Node values, the bias last
        if node == BIAS:
            rest["bias"] += value
            continue
        if node.kind == "feature" and node.position >= shared:
            key = (node.layer, node.feature)
            by_feature[key] = by_feature.get(key, 0.0) + value
        else:
            rest["shared" if node.kind == "feature" else node.kind] += value
    return by_feature, rest


def feature_covariates(graph: Any, shared: int) -> tuple[dict[tuple[int, int], float], dict]:
    """Per (layer, feature), summed over positions from ``shared`` on: its influence on the target in the graph
    and its activation."""
    influence = graph.influence()[: graph.n_features].double().tolist()
    influence_of: dict[tuple[int, int], float] = {}
    activation_of: dict[tuple[int, int], float] = {}
    for (layer, position, feature), inf, act in zip(
        graph.features.tolist(), influence, graph.activations.double().tolist(), strict=True
    ):
        if position >= shared:
            influence_of[(layer, feature)] = influence_of.get((layer, feature), 0.0) + inf
            activation_of[(layer, feature)] = activation_of.get((layer, feature), 0.0) + act
    return influence_of, activation_of


def trace_terms(
    model: Any, tc: Any, pair: TwinPair, graphs: tuple[Any, Any], heads: list[tuple[int, int]]
) -> dict:
    """For each of ``heads``, in both twins: the score difference first candidate - second from the last
    position, its pattern to each, and the query parts of the difference (:func:`query_parts`); with the
    features' covariates."""
    a, b = pair.candidates
    twins = []
    for prompt, graph in zip(pair.prompts, graphs, strict=True):
        query, key_a, key_b = graph.n_pos - 1, prompt.roles[a][-1], prompt.roles[b][-1]
        cases = [(lay, h, query, k) for lay, h in heads for k in (key_a, key_b)]
        scores = head_scores(model, tc, graph, cases)
        influence, activation = feature_covariates(graph, pair.shared)
        per_head = []
        for lay, h in heads:
            first, second = scores[(lay, h, query, key_a)], scores[(lay, h, query, key_b)]
            parts, rest = query_parts(key_difference(first, second), graph, pair.shared)
            per_head.append(
                {
                    "difference": first.score - second.score,
                    "pattern": [first.pattern, second.pattern],
                    "parts": parts,
                    "rest": rest,
                }
            )
        twins.append({"heads": per_head, "influence": influence, "activation": activation})
    return {"heads": [f"L{lay}H{h}" for lay, h in heads], "twins": twins}
