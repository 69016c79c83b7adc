"""Influence, pruning and scores of attribution graphs, with circuit-tracer's definitions.

The adjacency ``A [N, N]`` has rows as targets and columns as sources. Row-normalising ``|A|`` (each row sums
to one, or zero) gives ``Â``; the *influence* of every node on the logits, weighted by their probabilities
``w``, is ``w (Â + Â² + ...)`` (a graph without cycles makes the series finite). Pruning keeps the nodes that
carry ``node_threshold`` of the total influence (tokens and logits always), then the edges whose share
``Â[t, s] * (influence[t] + w[t])`` carries ``edge_threshold`` of the total, and drops features and errors left
without outgoing edges and features left without incoming ones until nothing changes. Nodes a reader pinned
(``keep``) are kept like tokens and logits, with the edges the edge threshold keeps of theirs: a pinned node is
never pruned away from under its pin. The *replacement score*
is the influence of tokens over that of tokens and errors; the *completeness score* the influence-weighted
share of each node's normalised inputs that does not come from an error node.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


def normalise(adjacency: torch.Tensor) -> torch.Tensor:
    """``|A|`` with every row divided by its sum (rows summing to zero stay zero)."""
    a = adjacency.abs()
    return a.div_(a.sum(1, keepdim=True).clamp(min=1e-10))  # in place: one copy of the rows at a time


def influence(normalised: torch.Tensor, weights: torch.Tensor, max_iter: int = 1000) -> torch.Tensor:
    """``weights @ (Â + Â² + ...)``: each node's total influence on the weighted targets."""
    term = weights @ normalised
    total = term.clone()
    for _ in range(max_iter):
        if not term.any():
            return total
        term = term @ normalised
        total += term
    raise RuntimeError(f"influence did not converge in {max_iter} steps; the graph has a cycle")


def threshold_of(scores: torch.Tensor, fraction: float) -> torch.Tensor:
    """The smallest score among the top scores that together hold ``fraction`` of the total."""
    ordered = torch.sort(scores, descending=True).values
    cumulative = torch.cumsum(ordered, 0) / ordered.sum()
    index = min(int(torch.searchsorted(cumulative, fraction)), len(cumulative) - 1)
    return ordered[index]


class Pruned(NamedTuple):
    """Masks of the nodes ``[N]`` and edges ``[N, N]`` kept, and each node's cumulative influence rank."""

    node_mask: torch.Tensor
    edge_mask: torch.Tensor
    cumulative_scores: torch.Tensor


def prune_masks(
    adjacency: torch.Tensor,
    weights: torch.Tensor,
    n_features: int,
    n_tokens: int,
    n_logits: int,
    node_threshold: float = 0.8,
    edge_threshold: float = 0.98,
    keep: torch.Tensor | None = None,
) -> Pruned:
    """Which nodes and edges to keep (see the module docstring); ``weights [N]`` is zero but at the logits;
    ``keep [N]`` marks the nodes kept whatever their influence (pinned ones)."""
    for name, value in (("node_threshold", node_threshold), ("edge_threshold", edge_threshold)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be within [0, 1], got {value}")
    node_influence = influence(normalise(adjacency), weights)
    node_mask = node_influence >= threshold_of(node_influence, node_threshold)
    fixed = n_logits + n_tokens  # tokens and logits, the last nodes, are always kept
    node_mask[-fixed:] = True
    keep = torch.zeros_like(node_mask) if keep is None else keep.to(node_mask.device)
    node_mask |= keep
    kept = adjacency.clone()
    kept[~node_mask] = 0
    kept[:, ~node_mask] = 0
    normalised = normalise(kept)
    edge_scores = normalised * (influence(normalised, weights) + weights)[:, None]
    edge_mask = edge_scores >= threshold_of(edge_scores.flatten(), edge_threshold)
    before = node_mask.clone()
    _drop_dangling(node_mask, edge_mask, n_features, fixed, keep)
    while not torch.equal(before, node_mask):  # each pass may strand more nodes
        before = node_mask.clone()
        edge_mask[~node_mask] = False
        edge_mask[:, ~node_mask] = False
        _drop_dangling(node_mask, edge_mask, n_features, fixed, keep)
    ordered, order = torch.sort(node_influence, descending=True)
    cumulative = torch.zeros_like(node_influence)
    cumulative[order] = torch.cumsum(ordered, 0) / ordered.sum()
    return Pruned(node_mask, edge_mask, cumulative)


def _drop_dangling(
    node_mask: torch.Tensor, edge_mask: torch.Tensor, n_features: int, fixed: int, keep: torch.Tensor
) -> None:
    node_mask[:-fixed] &= edge_mask[:, :-fixed].any(0)  # features and errors need an outgoing edge
    node_mask[:n_features] &= edge_mask[:n_features].any(1)  # features need an incoming one
    node_mask |= keep


def graph_scores(
    adjacency: torch.Tensor, weights: torch.Tensor, n_features: int, n_errors: int, n_tokens: int
) -> tuple[float, float]:
    """``(replacement, completeness)`` of a graph (see the module docstring)."""
    errors = slice(n_features, n_features + n_errors)
    tokens = slice(errors.stop, errors.stop + n_tokens)
    normalised = normalise(adjacency)
    node_influence = influence(normalised, weights)
    token_influence = node_influence[tokens].sum()
    error_influence = node_influence[errors].sum()
    replacement = token_influence / (token_influence + error_influence)
    non_error = 1 - normalised[:, errors].sum(-1)
    output = node_influence + weights
    completeness = (non_error * output).sum() / output.sum()
    return float(replacement), float(completeness)


def partial_influence(
    rows: torch.Tensor, weights: torch.Tensor, row_nodes: torch.Tensor, max_iter: int = 128
) -> torch.Tensor:
    """Influence over a graph known only at some rows (``rows [r, N]``, row ``i`` is node ``row_nodes[i]``),
    the ranking by which features are visited when ``max_feature_nodes`` caps them; ``weights`` are the
    logits' (the last nodes)."""
    normalised = normalise(rows)
    total = torch.zeros(rows.shape[1])
    term = torch.zeros(rows.shape[1])
    term[-len(weights) :] = weights
    for _ in range(max_iter):
        term = term[row_nodes] @ normalised
        if not term.any():
            return total
        total += term
    raise RuntimeError(f"partial influence did not converge in {max_iter} steps")
