"""interp's extension of the graph file: one top-level key, ``interp``, that Neuronpedia's and circuit-tracer's
frontends ignore (their schema, circuit-tracer's ``graph_models.Model``, reads ``metadata``, ``qParams``,
``nodes`` and ``links`` only), and the subgraph written into ``qParams`` where both frontends read it.

The extension, version 1::

    "interp": {
      "version": 1,
      "generation": id,                          # the save that wrote the file (graph_folder.py)
      "subgraph": {"pinned": [name, ...], "supernodes": [[label, name, ...], ...]},
      "supernode_criterion": {...},              # with proposed supernodes: the criterion and what it kept;
                                                 # "proposed": the names still awaiting a reader's decision
      "attention": [                             # one record per explained edge
        {"target": name, "source": name, "target_id": node_id, "source_id": node_id,
         "edge": A[target, source], "direct": the part through no head,
         "loadings": [[layer, head, loading], ...],           # the strongest, largest first
         "heads": [
           {"layer": L, "head": H, "query": q, "key": k, "loading": x, "score": s, "pattern": p,
            "query_nodes": [name, ...], "key_nodes": [name, ...],   # interp's names; "bias": no node
            "query_ids": [node_id, ...], "key_ids": [node_id, ...], # Neuronpedia ids ("bias" stays)
            "terms": [[i, j, value], ...],       # the largest terms, query_nodes[i] x key_nodes[j]
            "rest": score - sum(terms)},         # what the terms left out add up to
           ...],
         "differences": [...]}                   # as "heads", for a second key: "first_key", "second_key"
      ]
    }

Names are interp's node names (``L3.F417@5``, ``L3.error@5``, ``token@5``, ``logit.0``); ids are the
Neuronpedia ids the file's nodes carry, so a frontend can link a term to a drawn node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from interp.analysis.qk.difference import QKDifference
from interp.analysis.qk.matrix import QKMatrix, top_entries
from interp.circuits.features.attention import BIAS, AttentionExplanation, HeadScore
from interp.circuits.features.subgraph import Subgraph

VERSION = 1
TOP_TERMS = 40
TOP_LOADINGS = 8


def extend(
    doc: dict[str, Any],
    ids: dict[str, str],
    *,
    subgraph: Subgraph | None = None,
    attention: Sequence[AttentionExplanation] = (),
    criterion: dict[str, Any] | None = None,
    generation: str | None = None,
    top_terms: int = TOP_TERMS,
) -> dict[str, Any]:
    """``doc`` (a Neuronpedia graph document) with the subgraph in ``qParams`` and the ``interp`` extension;
    ``ids`` maps every node's name to its Neuronpedia id; ``generation`` is the save's
    (:mod:`~interp.circuits.features.graph_folder`). Without anything to add, ``doc`` is unchanged."""
    if subgraph is None and not attention and criterion is None and generation is None:
        return doc
    extension: dict[str, Any] = {"version": VERSION}
    if generation is not None:
        extension["generation"] = generation
    if subgraph is not None:
        doc["qParams"].update(subgraph.q_params(ids))
        extension["subgraph"] = subgraph.to_json()
    if criterion is not None:
        extension["supernode_criterion"] = criterion
    if attention:
        extension["attention"] = [attention_json(e, ids, top_terms) for e in attention]
    doc["interp"] = extension
    return doc


def attention_json(explained: AttentionExplanation, ids: dict[str, str], top_terms: int) -> dict[str, Any]:
    """The record of one explained edge (see the module docstring)."""
    loads = explained.loadings
    return {
        "target": explained.target,
        "source": explained.source,
        "target_id": ids[explained.target],
        "source_id": ids[explained.source],
        "edge": loads.edge,
        "direct": loads.direct,
        "loadings": [list(top) for top in loads.top(TOP_LOADINGS)],
        "heads": [_head_json(h, ids, top_terms) for h in explained.heads],
        "differences": [_difference_json(d, ids, top_terms) for d in explained.differences],
    }


def _terms(terms: QKMatrix, ids: dict[str, str], top: int) -> dict[str, Any]:
    matrix = terms.matrix  # formed once for the terms and the rest
    picked = top_entries(matrix, top)
    return {
        "query_nodes": list(terms.query_components),
        "key_nodes": list(terms.key_components),
        "query_ids": [_id(n, ids) for n in terms.query_components],
        "key_ids": [_id(n, ids) for n in terms.key_components],
        "terms": [list(entry) for entry in picked],
        "rest": float(matrix.double().sum()) - sum(v for _, _, v in picked),
    }


def _id(name: str, ids: dict[str, str]) -> str:
    return BIAS if name == BIAS else ids[name]


def _head_json(h: HeadScore, ids: dict[str, str], top: int) -> dict[str, Any]:
    return {
        "layer": h.layer,
        "head": h.head,
        "query": h.query,
        "key": h.key,
        "loading": h.loading,
        "score": h.score,
        "pattern": h.pattern,
        **_terms(h, ids, top),
    }


def _difference_json(d: QKDifference, ids: dict[str, str], top: int) -> dict[str, Any]:
    return {
        "layer": d.first.layer,
        "head": d.first.head,
        "query": d.first.query,
        "first_key": d.first.key,
        "second_key": d.second.key,
        "difference": d.difference,
        **_terms(d, ids, top),
    }
