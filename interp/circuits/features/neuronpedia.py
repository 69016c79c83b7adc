"""``graph.json``: a pruned attribution graph in Neuronpedia's graph schema (``metadata``, ``qParams``, ``nodes``,
``links``), with node ids formed as Neuronpedia forms them, so the file opens in its viewer and circuit-tracer's.

Ids: a feature ``{layer}_{feature}_{position}``; an error ``0_{layer}_{position}``; a token ``E_{token}_{position}``;
a logit ``{n_layers + 1}_{token}_{last position}``, where a custom direction (no token) is numbered
``d_vocab + {its place among the targets}`` as circuit-tracer numbers it. A link runs from a source to a target
with weight ``A[target, source]``. Each node's ``influence`` is its cumulative influence rank from pruning.
Nodes, links and their order are those circuit-tracer's ``create_graph_files`` writes for the same graph
(``tests/circuits/test_graph_files_circuit_tracer.py`` compares the two files).
"""

from __future__ import annotations

from typing import Any

from interp.analysis.node import Node
from interp.feature_id import FeatureId

SCHEMA_VERSION = 1
FEATURE, ERROR, EMBEDDING, LOGIT = "cross layer transcoder", "mlp reconstruction error", "embedding", "logit"
"""The ``feature_type`` of each kind of node, as circuit-tracer writes them."""
NOT_FEATURES = (EMBEDDING, LOGIT, ERROR)
"""The node types whose ``feature`` field is not a feature's index."""


def default_vocab(graph: Any) -> int:
    """A vocabulary size for ids past which custom directions are numbered, when the model's ``d_vocab`` is
    not given: the largest id seen, plus one (circuit-tracer uses the model's; pass it where it is known)."""
    return int(max(graph.input_tokens.max(), graph.logit_tokens.max())) + 1


def node_id(graph: Any, node: Node, vocab: int) -> str:
    """The Neuronpedia id of ``node``."""
    if node.kind == "feature":
        return f"{node.layer}_{node.feature}_{node.position}"
    if node.kind == "error":
        return f"0_{node.layer}_{node.position}"
    if node.kind == "token":
        return f"E_{int(graph.input_tokens[node.position])}_{node.position}"
    return f"{graph.n_layers + 1}_{_logit_index(graph, node, vocab)}_{graph.n_pos - 1}"


def _logit_index(graph: Any, node: Node, vocab: int) -> int:
    token = int(graph.logit_tokens[node.target])
    return token if token >= 0 else vocab + node.target  # a direction gets an index past the vocabulary


def node_record(graph: Any, i: int, node: Node, influence: float, vocab: int) -> dict[str, Any]:
    """The Neuronpedia record of ``node`` (row ``i`` of ``graph``)."""
    common = {"token_prob": 0.0, "is_target_logit": False, "run_idx": 0, "reverse_ctx_idx": 0, "clerp": ""}
    if node.kind == "feature":
        return {
            **common,
            "node_id": node_id(graph, node, vocab),
            "feature": FeatureId(node.layer, node.feature).index,
            "layer": str(node.layer),
            "ctx_idx": node.position,
            "feature_type": FEATURE,
            "jsNodeId": f"{node.layer}_{node.feature}-0",
            "influence": influence,
            "activation": float(graph.activations[i]),
        }
    if node.kind == "error":
        return {
            **common,
            "node_id": node_id(graph, node, vocab),
            "feature": -1,
            "layer": str(node.layer),
            "ctx_idx": node.position,
            "feature_type": ERROR,
            "jsNodeId": f"{node.layer}_{node.position}-0",
            "influence": influence,
            "activation": None,
        }
    if node.kind == "token":
        token = int(graph.input_tokens[node.position])
        return {
            **common,
            "node_id": node_id(graph, node, vocab),
            "feature": node.position,
            "layer": "E",
            "ctx_idx": node.position,
            "feature_type": EMBEDDING,
            "jsNodeId": f"E_{token}-{node.position}",
            "influence": influence,
            "activation": None,
        }
    token = _logit_index(graph, node, vocab)
    prob = float(graph.logit_probabilities[node.target])
    layer, pos = str(graph.n_layers + 1), graph.n_pos - 1
    return {
        **common,
        "node_id": node_id(graph, node, vocab),
        "feature": token,
        "layer": layer,
        "ctx_idx": pos,
        "feature_type": LOGIT,
        "token_prob": prob,
        "is_target_logit": node.target == 0,
        "jsNodeId": f"L_{token}-{pos}",
        "clerp": f'Output "{graph.logit_labels[node.target]}" (p={prob:.3f})',
        "influence": None,
        "activation": None,
    }


def pruned_parts(
    graph: Any, node_threshold: float, edge_threshold: float, vocab: int | None = None
) -> tuple[dict[int, dict[str, Any]], list[tuple[int, int, float]]]:
    """The records of the nodes pruning keeps, by row (each with ``uid``, the node's own name, unique where
    Neuronpedia's ids can coincide: an error's ``0_{layer}_{pos}`` is also a layer-0 feature's form), and the
    kept edges as ``(target row, source row, weight)``."""
    pruned = graph.prune(node_threshold, edge_threshold)
    vocab = vocab if vocab is not None else default_vocab(graph)
    records = {
        i: {
            **node_record(graph, i, graph.nodes[i], float(pruned.cumulative_scores[i]), vocab),
            "uid": str(graph.nodes[i]),
        }
        for i in pruned.node_mask.nonzero().flatten().tolist()
    }
    targets, sources = pruned.edge_mask.nonzero(as_tuple=True)
    edges = [
        (t, s, float(graph.adjacency[t, s]))
        for t, s in zip(targets.tolist(), sources.tolist(), strict=True)
        if s in records and t in records
    ]
    return records, edges


def shown_rows(
    graph: Any, records: dict[int, dict[str, Any]], edges: list[tuple[int, int, float]]
) -> list[int]:
    """The rows of ``records`` a file or page draws: those a kept edge touches, every token and logit, and every
    pinned node (kept by pruning even where no edge of its is)."""
    touched = {row for t, s, _ in edges for row in (t, s)}
    pinned = graph.pinned
    return [
        i
        for i, r in records.items()
        if i in touched or r["feature_type"] in (EMBEDDING, LOGIT) or bool(pinned[i])
    ]


def graph_json(
    graph: Any,
    *,
    node_threshold: float = 0.8,
    edge_threshold: float = 0.98,
    slug: str = "graph",
    prompt_tokens: list[str] | None = None,
    vocab: int | None = None,
    scan: str | None = None,
) -> dict[str, Any]:
    """The pruned graph as a Neuronpedia graph document; ``scan`` names where its features' dashboards are
    (``./data/features/SCAN`` for dashboards beside it; default: the transcoders it was made with)."""
    records, edges = pruned_parts(graph, node_threshold, edge_threshold, vocab)
    links = [
        {"source": records[s]["node_id"], "target": records[t]["node_id"], "weight": w} for t, s, w in edges
    ]
    nodes = [records[i] for i in shown_rows(graph, records, edges)]
    meta = graph.metadata
    return {
        "metadata": {
            "slug": slug,
            "scan": meta.get("transcoders", "") if scan is None else scan,
            "transcoder_list": [],
            "prompt_tokens": prompt_tokens or [str(int(t)) for t in graph.input_tokens],
            "prompt": meta.get("prompt", ""),
            "node_threshold": node_threshold,
            "schema_version": SCHEMA_VERSION,
        },
        "qParams": {"pinnedIds": [], "supernodes": [], "linkType": "both", "clickedId": "", "sg_pos": ""},
        "nodes": nodes,
        "links": links,
    }
