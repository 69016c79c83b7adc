"""A memory budget for :func:`~interp.circuits.features.attribute`: the reads per backward pass that fit it.

Attribution's own memory (above the model and the transcoders already loaded) is modelled from the shapes, in
bytes (``L`` layers, ``pos`` positions, ``d`` d_model, ``h`` heads, ``m`` the model's bytes per element,
``f`` the transcoders' features per layer, ``n`` active features, ``o`` decoder writes per feature: 1 for
per-layer transcoders, up to ``L`` for a cross-layer one):

- **the frozen forward pass**, kept for every backward pass: ``L * (16 pos d + h pos^2) * m`` (per layer the
  activations autograd saves, at most 16 vectors a position, and the attention pattern);
- **finding the sources** (once, before any backward): ``n d (2 + 2 o) * 4`` kept (encoder and decoder
  vectors, float32) plus ``L pos (2 f + 2 d) * 4`` while it runs (each layer's activations);
- **the graph's storage**, ``N = n + (L + 1) pos + t`` nodes for ``t`` logit targets: every feature kept,
  the adjacency ``N^2 * 4``; with ``max_feature_nodes = c``, the rows found ``R = (c + t) N * 4``, and beside
  them, between backward passes, the ranking's normalised copy of them (``R``) or, at the end, the compacted
  adjacency ``(c + (L + 1) pos + t)^2 * 4``;
- **per read in a backward pass**: ``(L + 1) pos d * (2 m + 4 [m != 4]) + 4 pos d m + 4 N``: the gradient at
  every write site (and the backward's working gradient of the stream beside it, plus a float32 copy for a
  narrower dtype), a margin of four vectors a position for the allocator, and the read's row. No read copies
  an attention pattern: the frozen pass mixes values with one 2-D product per key/value head, whose batched
  backward reads the pattern in place (``frozen._mix_by_head``).

The peak is the fixed part (forward pass, sources, storage) plus ``batch`` times the per-read part; the
largest ``batch`` within the budget (at most the ``batch_size`` asked) is used. The number of active features
is known only after the forward pass: before it the budget is checked with the least the prompt can need (no
active feature, one target), after it with the real counts, so a budget too small is refused before any
backward pass (and, where even the least is too much, before the forward pass). Under a budget glibc maps every
allocation of 1 MiB or more on its own, so that freed gradients leave the resident set (see
:mod:`interp.allocator`). Measured against the resident set of a fresh process in
``benchmarks/attribution.py --max-memory-gb`` (see ``benchmarks/README.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from interp.dictionary import SparseDictionary

GB = 2**30
F32 = 4


class MemoryBudgetError(ValueError):
    """The budget cannot hold even one read per backward pass (the message gives the least that can)."""


@dataclass(frozen=True)
class MemoryPlan:
    """The modelled bytes of one attribution and the reads per backward pass chosen for a budget.

    Attributes:
        batch_size: reads per backward pass.
        frozen: the frozen forward pass.
        sources: the source vectors kept (the transient of finding them is in ``setup``).
        setup: the peak before any backward pass (forward pass and finding the sources).
        storage: the graph's storage held during the backward passes.
        after: the peak after the backward passes (compaction, with ``max_feature_nodes``).
        per_read: one read in a backward pass.
        storage_label: what the storage is, for messages.
    """

    batch_size: int
    frozen: int
    sources: int
    setup: int
    storage: int
    after: int
    per_read: int
    storage_label: str

    def peak(self, batch_size: int | None = None) -> int:
        """The modelled peak with ``batch_size`` reads per pass (default: the chosen one)."""
        n = self.batch_size if batch_size is None else batch_size
        passes = self.frozen + self.sources + self.storage + n * self.per_read
        return max(self.setup, passes, self.frozen + self.sources + self.after)


def plan(
    model: Any,
    transcoders: SparseDictionary,
    n_pos: int,
    *,
    n_active: int,
    n_decoder_writes: int,
    n_logits: int,
    max_feature_nodes: int | None,
    batch_size: int,
    max_memory_gb: float | None,
) -> MemoryPlan:
    """The plan for these counts; raises :class:`MemoryBudgetError` (one line) when one read per pass does not
    fit the budget."""
    cfg = model.cfg
    n_layers, d, heads, pos = cfg.n_layers, cfg.d_model, cfg.n_heads, n_pos
    m = next(model.parameters()).element_size()
    frozen = n_layers * (16 * pos * d + heads * pos * pos) * m
    width = max(transcoders.n_features(layer) for layer in transcoders.layers)
    sources = (2 * n_active + 2 * n_decoder_writes) * d * F32 + (n_layers + 1) * pos * d * F32
    setup = frozen + sources + n_layers * pos * (2 * width + 2 * d) * F32
    offset = n_active + (n_layers + 1) * pos  # the first logit node
    nodes = offset + n_logits
    capped = max_feature_nodes is not None and max_feature_nodes < n_active
    if capped:
        kept = max_feature_nodes + (n_layers + 1) * pos + n_logits
        rows = (max_feature_nodes + n_logits) * nodes * F32
        storage, after = rows, rows + max(rows, kept * kept * F32)  # ranking's copy: between passes
        label = f"the rows of {max_feature_nodes + n_logits:,} nodes over {nodes:,}"
    else:
        storage = after = nodes * nodes * F32
        label = f"the adjacency of {nodes:,} nodes"
    wide = 2 * m + (F32 if m != F32 else 0)
    per_read = (n_layers + 1) * pos * d * wide + 4 * pos * d * m + F32 * nodes
    reads = (max_feature_nodes if capped else n_active) + n_logits  # no pass reads more than there are
    batch_size = min(batch_size, max(1, reads))
    draft = MemoryPlan(batch_size, frozen, sources, setup, storage, after, per_read, label)
    if max_memory_gb is None:
        return draft
    budget = int(max_memory_gb * GB)
    fixed = draft.peak(0)
    fits = (budget - frozen - sources - storage) // per_read
    if fixed > budget or fits < 1:
        need = max(fixed, draft.peak(1))
        raise MemoryBudgetError(_refusal(max_memory_gb, need, draft, pos, max_feature_nodes, capped))
    return MemoryPlan(min(batch_size, int(fits)), frozen, sources, setup, storage, after, per_read, label)


def _refusal(budget_gb: float, need: int, p: MemoryPlan, pos: int, cap: int | None, capped: bool) -> str:
    """One line: the least budget that works and what dominates it."""
    parts = {
        p.storage_label: p.storage if p.peak(0) < p.peak(1) else p.after,
        f"the frozen forward pass of {pos} tokens": p.frozen,
        "the source vectors": p.sources + max(0, p.setup - p.frozen - p.sources),
        "one read per backward pass": p.per_read,
    }
    label, size = max(parts.items(), key=lambda kv: kv[1])
    if "adjacency" in label or "rows" in label:
        advice = (
            f"pass a smaller max_feature_nodes (--max-feature-nodes; now {cap})"
            if capped
            else "pass max_feature_nodes (--max-feature-nodes) to cap the features"
        )
    else:
        advice = "shorten the prompt"
    return (
        f"max_memory_gb={budget_gb:g} is too small: this attribution needs at least {need / GB:.4g} GiB, "
        f"mostly {label} ({size / GB:.4g} GiB); raise the budget or {advice}"
    )
