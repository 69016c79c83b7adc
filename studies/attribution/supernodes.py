"""Automatic supernodes on every graph the study draws: how much the grouping shrinks the graph, and how much of
the influence on the target the collapsed graph keeps.

The proposal is the one ``interp attribute --supernodes auto`` makes
(:func:`interp.circuits.features.reading.readable`): among the feature nodes the pruned graph keeps, nodes at one
position with aligned decoders and interchangeable outgoing edges are grouped
(:mod:`interp.circuits.features.supernodes`), and groups are dissolved until the graph collapsed onto them keeps
its influence within the criterion's tolerance. Per graph: the feature nodes before (those the pruned graph
keeps, the candidates) and after (each group one node), the groups, and the criterion's own *influence kept*
(``1 - sum |I' - I| / sum I`` over the collapsed graph's units). Over graphs: means with 95% intervals resampling
schemas (twins together).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from studies.attribution.measure import interval


def propose(graph: Any, model: Any, tc: Any) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """``(graph with the proposed supernodes, the proposal's report for the graph file, the study's row)``."""
    from interp.circuits.features.neuronpedia import pruned_parts
    from interp.circuits.features.reading import readable

    vocab = getattr(getattr(model, "cfg", None), "d_vocab", None)
    records, _ = pruned_parts(graph, 0.8, 0.98, vocab)  # the defaults readable() prunes with
    before = sum(graph.nodes[i].kind == "feature" for i in records)
    grouped, _, report = readable(graph, model, tc, supernodes="auto")
    groups = grouped.selection.supernodes if grouped.selection is not None else ()
    merged = sum(len(members) - 1 for _, members in groups)  # (name, members) pairs
    row = {
        "feature_nodes_before": int(before),
        "feature_nodes_after": int(before - merged),
        "shrink": float((before - merged) / before) if before else 1.0,
        "n_groups": len(groups),
        "grouped_nodes": sum(len(members) for _, members in groups),
        "influence_kept": float(report["influence_kept"]),
        "tolerance": float(report["tolerance"]),
        "n_nodes": int(report["n_nodes"]),
        "n_units": int(report["n_units"]),
    }
    return grouped, report, row


def summarise(rows: Sequence[dict[str, Any]], schemas: Sequence[str], seed: int) -> dict[str, Any]:
    """Over one group's graphs: feature nodes before and after, the fraction left, the influence kept (means with
    intervals over schemas), the smallest influence kept and the graphs whose proposal has no group."""
    if not rows:
        return {"n_graphs": 0}
    groups = list(schemas)
    return {
        "n_graphs": len(rows),
        "feature_nodes_before": interval([r["feature_nodes_before"] for r in rows], seed, groups),
        "feature_nodes_after": interval([r["feature_nodes_after"] for r in rows], seed, groups),
        "shrink": interval([r["shrink"] for r in rows], seed, groups),
        "influence_kept": interval([r["influence_kept"] for r in rows], seed, groups),
        "min_influence_kept": float(min(r["influence_kept"] for r in rows)),
        "graphs_without_groups": sum(r["n_groups"] == 0 for r in rows),
        "tolerance": rows[0]["tolerance"],
    }
