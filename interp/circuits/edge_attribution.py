"""Edge attribution: EAP and EAP-IG scores for every edge of the graph from a few forward and backward passes.

The score of an edge ``u -> v`` estimates how much the metric falls when that edge alone is patched from the
corrupted input (``m(clean) - m(clean without u -> v)``, which :func:`interp.circuits.exact_edge_scores`
measures). To first order that is the difference the edge carries times the gradient at the input it feeds:

    score(u -> v) = sum over positions of (out_u(clean) - out_u(corrupt)) . dm/d input_v

- **EAP** (Syed et al. 2023) takes the gradient on the clean run.
- **EAP-IG** (Hanna et al. 2024) averages it over ``steps`` runs whose input embeddings lie on the straight
  line from the corrupted to the clean ones, ``alpha = 1/steps, 2/steps, ..., 1`` (a right Riemann sum of the
  integrated gradient, so ``steps=1`` is EAP). The reference implementation uses the left sum, ``alpha = 0,
  ..., (steps-1)/steps``; both tend to the same integral, and the right one needs no separate clean run.

Cost per batch: one forward on the corrupted inputs, then ``steps`` forwards and ``steps`` backwards (the
``alpha = 1`` forward also records the clean outputs), so ``steps + 1`` forwards and ``steps`` backwards in
all; EAP is two forwards and one backward. Memory is bounded by the batch, whatever the number of pairs: the
differences ``[n_sources, positions, d_model]`` are kept once, at the batch's positions that can add to a
score (in a causal model, from each pair's first differing token to its read position), and the gradients
that reach the input hooks during the backward passes are summed over the steps and contracted with them a
few layers at a time, summed over those positions, into the ``[n_sources, n_inputs]`` score matrix; no
``[edges, batch, pos, d_model]`` tensor exists (:mod:`interp.circuits.edge_products` says how the passes are
kept close to bare ones). Batches are shared out among ``torchrun`` ranks and summed in batch order, so the
scores are the same for any number of ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from interp.analysis.metric import Metric, check_metric, check_signature
from interp.circuits.edge_products import (
    Differences,
    Pool,
    contraction_hooks,
    scored_positions,
    weights_without_grad,
)
from interp.circuits.graph import Graph
from interp.circuits.pairs import Pairs
from interp.circuits.patched_run import check_graph
from interp.circuits.shards import map_batches, ordered_sum
from interp.circuits.wiring import forward, split

METHODS = ("eap", "eap-ig")


@dataclass(frozen=True, eq=False)
class EdgeScores:
    """A score per edge of ``graph``.

    Attributes:
        graph: the graph scored.
        scores: ``[n_sources, n_inputs]`` float32, the mean over pairs; 0 where the graph has no edge.
        method: ``"eap"``, ``"eap-ig"`` or ``"exact"``.
        n_pairs: how many pairs the scores average.
        steps: interpolation points (EAP-IG), 1 for EAP.
        clean_metric, corrupt_metric: the metric's mean over the pairs on the clean and corrupted inputs.
    """

    graph: Graph
    scores: torch.Tensor
    method: str
    n_pairs: int
    steps: int | None = None
    clean_metric: float | None = None
    corrupt_metric: float | None = None

    def __repr__(self) -> str:
        steps = f", {self.steps} steps" if self.method == "eap-ig" else ""
        return f"EdgeScores({self.method}{steps}, {self.n_pairs} pairs, {self.graph})"

    def __getitem__(self, edge: tuple[str, str]) -> float:
        return float(self.scores[self.graph.edge_index(edge)])

    def values(self, edges: list[tuple[str, str]]) -> torch.Tensor:
        """``[len(edges)]`` scores of the named edges."""
        index = [self.graph.edge_index(e) for e in edges]
        return self.scores[[i for i, _ in index], [j for _, j in index]]

    def frame(self, top: int | None = None) -> pd.DataFrame:
        """Edges ``source, input, score`` by decreasing ``|score|`` (all of them, or the ``top``)."""
        flat = self.scores.masked_fill(~self.graph.allowed, float("nan")).flatten()
        valid = (~torch.isnan(flat)).nonzero().flatten()
        order = valid[torch.argsort(flat[valid].abs(), descending=True, stable=True)]
        if top is not None:
            order = order[:top]
        n_inputs = len(self.graph.inputs)
        return pd.DataFrame(
            {
                "source": [self.graph.sources[int(k) // n_inputs] for k in order],
                "input": [self.graph.inputs[int(k) % n_inputs] for k in order],
                "score": flat[order].tolist(),
            }
        )


def _interpolation(
    alpha: float, start: torch.Tensor, difference: torch.Tensor, positions: torch.Tensor | None, leaf: list
):
    """Forward hook on the stream entering block 0: the point ``start + alpha * difference`` (the clean input
    itself at ``alpha = 1``), made the leaf the backward pass differentiates towards. ``start`` and
    ``difference`` are ``[positions, d_model]`` at the scored positions; elsewhere the point is the clean input,
    which is the corrupted one before a pair's inputs differ, and after the read position reaches no metric."""

    def interpolate(x: torch.Tensor, hook) -> torch.Tensor:
        if alpha == 1:
            point = x.detach()
        elif positions is None:
            point = (start + alpha * difference).view_as(x).to(x.dtype)
        else:
            point = x.detach().clone()
            point.view(-1, x.shape[-1])[positions] = (start + alpha * difference).to(x.dtype)
        leaf.append(point.requires_grad_(True))
        return leaf[-1]

    return interpolate


def _batch_scores(
    model, graph: Graph, batch: Pairs, metric: Metric, steps: int, pool: Pool
) -> tuple[torch.Tensor, float, float]:
    """Summed (over pairs and steps) score matrix of one batch, and the batch's summed clean and corrupt metric."""
    batch = batch.to(model.device)
    positions = scored_positions(batch, model.cfg.causal)  # None: all batch * pos of them
    n_scored = batch.clean.numel() if positions is None else len(positions)
    # [n_sources, positions, d_model]: the corrupted outputs, then (from the clean run on) the differences
    flat, delta = pool.take((len(graph.sources), n_scored, model.cfg.d_model))
    differences = Differences(model, graph, delta, positions)
    with split(model), torch.no_grad():
        logits = forward(
            model,
            batch.corrupt,
            batch.attention_mask,
            batch.positions,
            fwd_hooks=differences.corrupt_hooks(),
        )
    corrupt_metric = float(check_metric(metric(logits, batch), batch, "on the corrupted inputs").sum())
    start = delta[0].clone()  # the corrupted input stream, where the interpolation starts
    scores = torch.zeros(len(graph.sources), len(graph.inputs), device=model.device)
    backward, finish = contraction_hooks(graph, delta, scores, passes=steps, pool=pool, positions=positions)
    clean_metric = 0.0
    for k in range(steps, 0, -1):  # alpha = 1 first: its forward records the clean outputs
        alpha = k / steps
        leaf: list[torch.Tensor] = []
        interpolate = _interpolation(alpha, start, delta[0], positions, leaf)
        hooks = [("blocks.0.hook_resid_pre", interpolate)]
        if k == steps:
            hooks += differences.clean_hooks()
        with split(model), torch.enable_grad():
            logits = forward(
                model, batch.clean, batch.attention_mask, batch.positions, fwd_hooks=hooks, bwd_hooks=backward
            )
            where = "on the clean inputs" if k == steps else f"at the interpolation point alpha={alpha:g}"
            values = check_metric(metric(logits, batch), batch, where)
            values.sum().backward(inputs=leaf)
        if k == steps:
            clean_metric = float(values.detach().sum())
    finish()
    scores.masked_fill_(~graph.allowed.to(scores.device), 0)  # the layer-wise products cover a few non-edges
    pool.give(flat)
    return scores.cpu(), clean_metric, corrupt_metric


def edge_attribution(
    model,
    pairs: Pairs,
    metric: Metric,
    *,
    method: str = "eap-ig",
    steps: int = 5,
    batch_size: int = 16,
    progress: bool = False,
) -> EdgeScores:
    """Score every edge of the model's graph by EAP or EAP-IG over ``pairs`` (see the module docstring).

    Args:
        model: a pre-norm :class:`~interp.HookedTransformer` (the graph refuses others, saying why).
        pairs: the clean and corrupted inputs.
        metric: ``metric(logits, batch) -> [batch]``, e.g. :func:`~interp.circuits.logit_difference`.
        method: ``"eap-ig"`` (default) or ``"eap"``.
        steps: EAP-IG's interpolation points (default 5); EAP ignores it.
        batch_size: pairs per forward pass.
        progress: show a progress bar (rank 0).

    Returns:
        :class:`EdgeScores` averaged over the pairs.

    Raises:
        ValueError: an unknown method, ``steps < 1``, a metric that is not one number per pair (checked on
            the first forward pass), or a model the graph cannot express.
    """
    if method not in METHODS:
        raise ValueError(f"method={method!r}; expected one of {list(METHODS)}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps={steps!r}; EAP-IG needs a positive number of interpolation points")
    check_signature(metric)
    graph = check_graph(model, None)
    pairs.batches(batch_size)  # checks batch_size before any work
    steps = 1 if method == "eap" else steps
    # the differences' and the gradient blocks' memory, reused by every batch: rows sized for the largest
    largest = max((len(s) * pairs[s.start : s.stop].n_pos for s in pairs.batches(batch_size)), default=1)
    pool = Pool(model.device, largest * model.cfg.d_model)
    with weights_without_grad(model):
        parts = map_batches(
            pairs,
            batch_size,
            lambda b: _batch_scores(model, graph, b, metric, steps, pool),
            progress=progress,
            desc=method,
        )
    total = ordered_sum([p[0] for p in parts])
    n = len(pairs)
    return EdgeScores(
        graph=graph,
        scores=total / (n * steps),
        method=method,
        n_pairs=n,
        steps=steps,
        clean_metric=ordered_sum([p[1] for p in parts]) / n,
        corrupt_metric=ordered_sum([p[2] for p in parts]) / n,
    )


def merge_scores(parts: list[EdgeScores]) -> EdgeScores:
    """Scores of disjoint sets of pairs as the scores of all of them: means weighted by their pairs."""
    if not parts:
        raise ValueError("no scores to merge")
    first = parts[0]
    for part in parts[1:]:
        if (part.graph, part.method, part.steps) != (first.graph, first.method, first.steps):
            raise ValueError(
                f"cannot merge {part.method} scores (steps={part.steps}) of {part.graph} with {first.method} "
                f"scores (steps={first.steps}) of {first.graph}"
            )
    n = sum(p.n_pairs for p in parts)

    def mean(values: list) -> float | None:
        return (
            None
            if any(v is None for v in values)
            else sum(v * p.n_pairs for v, p in zip(values, parts, strict=True)) / n
        )

    return EdgeScores(
        graph=first.graph,
        scores=ordered_sum([p.scores * p.n_pairs for p in parts]) / n,
        method=first.method,
        n_pairs=n,
        steps=first.steps,
        clean_metric=mean([p.clean_metric for p in parts]),
        corrupt_metric=mean([p.corrupt_metric for p in parts]),
    )


def eap(model, pairs: Pairs, metric: Metric, *, batch_size: int = 16, progress: bool = False) -> EdgeScores:
    """EAP scores: :func:`edge_attribution` with ``method="eap"``."""
    return edge_attribution(model, pairs, metric, method="eap", batch_size=batch_size, progress=progress)


def eap_ig(
    model, pairs: Pairs, metric: Metric, *, steps: int = 5, batch_size: int = 16, progress: bool = False
) -> EdgeScores:
    """EAP-IG scores: :func:`edge_attribution` with ``method="eap-ig"``."""
    return edge_attribution(
        model, pairs, metric, method="eap-ig", steps=steps, batch_size=batch_size, progress=progress
    )
