"""attribute(): the attribution graph of a prompt on the local replacement model.

One frozen forward pass of the prompt (:mod:`.frozen`) finds the active features and the source vectors
(:mod:`.node_vectors`). Each backward pass then injects ``batch_size`` reads at once, one per row of a batched
gradient (a logit target's direction at ``unembed.hook_in`` of the last position, or a feature's encoder vector
at its input hook), and contracts the gradient at every write site with the vectors written there: those rows
of the adjacency. Logit rows come first; feature rows follow, all of them, or, when ``max_feature_nodes`` caps
them, in the order of their influence over the rows found so far (re-ranked every ``update_interval`` batches),
as circuit-tracer does; features a reader pinned (``keep``) are read first and always kept.

With ``max_memory_gb`` the reads per backward pass are chosen so that attribution's own peak memory stays
within the budget (the memory model is in :mod:`.memory_budget`); the re-ranking still happens every
``update_interval * batch_size`` reads, so the graph does not depend on how many reads share a pass.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from tqdm.auto import tqdm

from interp.allocator import mapped_allocations
from interp.circuits.features.frozen import FrozenRun, frozen_run
from interp.circuits.features.graph import AttributionGraph
from interp.circuits.features.influence import partial_influence
from interp.circuits.features.inputs import check_fit, prompt_ids
from interp.circuits.features.memory_budget import plan
from interp.circuits.features.node_vectors import Sources, find_sources
from interp.circuits.features.targets import Target, check_targets, select
from interp.dictionary import SparseDictionary

LOGITS = -1  # the "layer" of a logit read


def attribute(
    model: Any,
    transcoders: SparseDictionary,
    prompt: str | torch.Tensor | Sequence[int],
    *,
    targets: Sequence[str | int | Target] | None = None,
    max_logits: int = 10,
    logit_probability: float = 0.95,
    max_feature_nodes: int | None = None,
    batch_size: int = 256,
    update_interval: int = 4,
    max_memory_gb: float | None = None,
    keep: Sequence[str] = (),
    progress: bool | Callable[[int, int], Any] = True,
) -> AttributionGraph:
    """The attribution graph of ``prompt`` (see the module docstring and :class:`AttributionGraph`).

    Args:
        model: a :class:`~interp.HookedTransformer`.
        transcoders: a transcoder set or cross-layer transcoder with features at every layer.
        prompt: text (tokenised with the model's tokenizer, which should put a special token first) or ids.
        targets: tokens (single-token texts or ids) or :class:`Target` directions; ``None``: the likeliest
            tokens until their probability reaches ``logit_probability``, at most ``max_logits``.
        max_feature_nodes: at most this many feature nodes, the most influential; ``None``: every active one.
        batch_size: reads per backward pass (rows of one batched gradient).
        update_interval: batches of ``batch_size`` reads between re-rankings when ``max_feature_nodes`` caps
            the features.
        max_memory_gb: a budget (GiB) for attribution's own peak memory, above the model and transcoders:
            fewer reads per backward pass where ``batch_size`` would not fit (the graph is the same);
            ``MemoryBudgetError`` (a ``ValueError``) before any backward pass (and before the forward pass
            where it can tell) when one read per pass does not fit. ``None``: ``batch_size`` reads per pass.
        keep: feature nodes (``"L3.F417@5"``) kept whatever ``max_feature_nodes`` (pinned nodes: see
            :mod:`~interp.circuits.features.pins`); each must be active, and they count towards the cap.
        progress: show a progress bar; or a function ``(feature rows done, in all)`` called once the forward
            pass is done and after each backward pass over features: a server's progress report, and where it
            stops the work (an exception it raises ends the attribution there and propagates).
    """
    tokens = _check(model, transcoders, prompt, max_feature_nodes, batch_size, max_logits, max_memory_gb)
    if targets is not None:
        check_targets(model, targets)
    budget = dict(max_feature_nodes=max_feature_nodes, batch_size=batch_size, max_memory_gb=max_memory_gb)
    if max_memory_gb is not None:  # the least this prompt can need: no active feature, the fewest targets
        plan(model, transcoders, len(tokens), n_active=0, n_decoder_writes=0,
             n_logits=1 if targets is None else len(targets), **budget)  # fmt: skip
    was_training = model.training
    model.eval()
    try:
        run = frozen_run(model, tokens, transcoders)
        sources = find_sources(run, transcoders, model.cfg.n_layers)
        kept = _kept_features(sources, keep, max_feature_nodes)
        chosen = select(model, run.logits, targets, max_logits, logit_probability)
        writes = sum(dec.shape[0] * dec.shape[1] for _, dec in sources.decoders.values())
        passes = plan(model, transcoders, len(tokens), n_active=len(sources.features),
                      n_decoder_writes=writes, n_logits=len(chosen), **budget).batch_size  # fmt: skip
        sizes = (batch_size, passes)
        adjacency, selected = _adjacency(
            run,
            sources,
            transcoders,
            chosen,
            max_feature_nodes,
            sizes,
            update_interval,
            progress,
            budgeted=max_memory_gb is not None,
            keep=kept,
        )
    finally:
        model.train(was_training)
    cfg = getattr(model, "cfg", None)
    return AttributionGraph(
        adjacency=adjacency,
        features=sources.features[selected],
        activations=sources.activations[selected].cpu(),
        input_tokens=tokens.cpu(),
        logit_tokens=torch.tensor([-1 if t.token is None else t.token for t in chosen]),
        logit_probabilities=torch.tensor([t.weight for t in chosen]),
        n_layers=model.cfg.n_layers,
        logit_labels=tuple(t.label for t in chosen),
        metadata={
            "model": str(getattr(cfg, "name", "") or ""),
            "transcoders": type(transcoders).__name__,
            "prompt": prompt if isinstance(prompt, str) else "",
        },
    )


def _adjacency(
    run: FrozenRun,
    sources: Sources,
    transcoders: SparseDictionary,
    chosen: list[Target],
    max_feature_nodes: int | None,
    batch_sizes: tuple[int, int],
    update_interval: int,
    progress: bool | Callable[[int, int], Any],
    budgeted: bool = False,
    keep: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The adjacency ``[n, n]`` in node order (features, errors, tokens, logits) and the features kept.

    Logit rows come first, then feature rows: every active feature's, straight into the adjacency, or, when
    ``max_feature_nodes`` keeps fewer, the most influential ones, found in order and then compacted.
    ``batch_sizes``: the reads between re-rankings are ``update_interval`` times the first; a backward pass
    reads at most the second."""
    n_active = len(sources.features)
    capped = max_feature_nodes is not None and max_feature_nodes < n_active
    # Under a budget glibc maps large allocations on their own for as long as this runs, and the heap is trimmed
    # after each pass: otherwise it serves a backward pass's gradients from its heap and keeps them when freed,
    # and the resident set drifts above what is live (by a quarter, measured).
    memory = mapped_allocations() if budgeted else contextlib.nullcontext(None)
    with memory as trim:
        reads = _Reads(run, sources, transcoders, chosen, *batch_sizes, trim=trim)
        bar = _Progress(progress, max_feature_nodes if capped else n_active)
        try:
            if not capped:
                return _every_feature(reads, bar), torch.arange(n_active)
            weights = torch.tensor([t.weight for t in chosen])
            rows, row_nodes, selected = _most_influential(
                reads, weights, max_feature_nodes, update_interval, bar, keep
            )
            return _compacted(rows, row_nodes, selected, reads), selected
        finally:
            bar.close()


class _Progress:
    """Rows done: a tqdm bar, or the caller's function ``(done, total)`` (see :func:`attribute`)."""

    def __init__(self, progress: bool | Callable[[int, int], Any], total: int) -> None:
        self.report = progress if callable(progress) else None
        self.done, self.total = 0, total
        self.bar = tqdm(
            total=total, desc="attribution", disable=self.report is not None or not progress, leave=False
        )
        if self.report is not None:
            self.report(0, total)

    def update(self, n: int) -> None:
        self.done += n
        self.bar.update(n)
        if self.report is not None:
            self.report(self.done, self.total)

    def close(self) -> None:
        self.bar.close()


class _Reads:
    """The rows of the adjacency, read a batch at a time: node layout, logit reads, feature reads."""

    def __init__(
        self,
        run: FrozenRun,
        sources: Sources,
        transcoders: SparseDictionary,
        chosen: list[Target],
        ranking_batch: int,
        batch_size: int,
        trim: Callable[[int], int] | None = None,
    ) -> None:
        self.run, self.sources, self.transcoders, self.batch_size = run, sources, transcoders, batch_size
        self.ranking_batch = ranking_batch  # re-ranking every update_interval batches of this many reads
        self.trim = trim  # under a budget: the heap trimmed after each pass (interp.allocator)
        self.n_active, n_pos = len(sources.features), sources.tokens.shape[0]
        self.n_logits = len(chosen)
        self.logit_offset = self.n_active + (sources.errors.shape[0] + 1) * n_pos  # the first logit node
        vectors = torch.stack([t.vector for t in chosen])  # [n_logits, d_model]
        self.vectors = vectors.to(sources.tokens.device)
        self.n_pos = n_pos

    def logit_rows(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """``(logit indices, rows [n, logit_offset])`` a batch at a time: each target's direction read at the
        unembedding's input of the last position."""
        for i in range(0, self.n_logits, self.batch_size):
            v = self.vectors[i : i + self.batch_size]
            layers, positions = torch.full((len(v),), LOGITS), torch.full((len(v),), self.n_pos - 1)
            yield (
                torch.arange(i, i + len(v)),
                _rows(self.run, self.sources, self.transcoders, layers, positions, v),
            )

    def feature_rows(self, features: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """``(feature indices, rows [n, logit_offset])`` a batch at a time: each feature's encoder vector read
        at its input hook and position."""
        s = self.sources
        for batch in features.split(self.batch_size) if len(features) else ():
            layers, positions = s.features[batch, 0], s.features[batch, 1]
            encoders = s.encoders[batch.to(s.encoders.device)]
            yield batch, _rows(self.run, s, self.transcoders, layers, positions, encoders)
            if self.trim is not None:
                self.trim(0)


def _every_feature(reads: _Reads, bar: Any) -> torch.Tensor:
    """The adjacency with every active feature kept, each row written straight into it (the graph is held
    once)."""
    n = reads.logit_offset + reads.n_logits
    adjacency = torch.zeros(n, n)
    for logits, rows in reads.logit_rows():
        adjacency[logits + reads.logit_offset, : reads.logit_offset] = rows
    for batch, rows in reads.feature_rows(torch.arange(reads.n_active)):
        adjacency[batch, : reads.logit_offset] = rows
        bar.update(len(batch))
    return adjacency


def _most_influential(
    reads: _Reads,
    weights: torch.Tensor,
    cap: int,
    update_interval: int,
    bar: Any,
    keep: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rows over every node, in the order found (logits, the features in ``keep``, then features by their
    influence over the rows found so far, re-ranked every ``update_interval`` batches), the node of each row,
    and the ``cap`` features kept. Ranking needs every active feature's column, so rows are kept whole until the
    last feature is chosen."""
    n_active, n_logits, offset = reads.n_active, reads.n_logits, reads.logit_offset
    rows = torch.zeros(cap + n_logits, offset + n_logits)
    row_nodes = torch.zeros(cap + n_logits, dtype=torch.long)  # the node of each row found, in order
    filled = 0
    for logits, found in reads.logit_rows():
        rows[filled : filled + len(logits), :offset] = found
        row_nodes[filled : filled + len(logits)] = logits + offset
        filled += len(logits)
    visited = torch.zeros(n_active, dtype=torch.bool)
    for batch, found in reads.feature_rows(keep if keep is not None else torch.zeros(0, dtype=torch.long)):
        rows[filled : filled + len(batch), :offset] = found
        row_nodes[filled : filled + len(batch)] = batch
        visited[batch] = True
        filled += len(batch)
        bar.update(len(batch))
    while int(visited.sum()) < cap:
        influence = partial_influence(rows[:filled], weights, row_nodes[:filled])[:n_active]
        ranked = influence.argsort(descending=True)
        room = min(update_interval * reads.ranking_batch, cap - int(visited.sum()))
        chosen = ranked[~visited[ranked]][:room]
        # The chunk's reads in layer order: a backward pass then injects at few layers (one cotangent
        # [reads, pos, d_model] per layer it touches), not at every layer the ranking interleaves.
        chosen = chosen[torch.sort(reads.sources.features[chosen, 0], stable=True).indices]
        for batch, found in reads.feature_rows(chosen):
            rows[filled : filled + len(batch), :offset] = found
            row_nodes[filled : filled + len(batch)] = batch
            visited[batch] = True
            filled += len(batch)
            bar.update(len(batch))
    return rows, row_nodes, visited.nonzero().flatten()


def _kept_features(sources: Sources, keep: Sequence[str], cap: int | None) -> torch.Tensor:
    """The indices among the active features of the feature nodes ``keep``, in the active features' order.

    Raises:
        ValueError: a node that is not an active feature, or more of them than ``cap``.
    """
    from interp.analysis.node import Node

    index = {tuple(row): i for i, row in enumerate(sources.features.tolist())}
    found = []
    for name in keep:
        node = Node.parse(name)
        at = (node.layer, node.position, node.feature) if node.kind == "feature" else None
        if at not in index:
            raise ValueError(f"keep: {name} is not an active feature of the prompt; only those can be kept")
        found.append(index[at])
    if cap is not None and len(set(found)) > cap:
        raise ValueError(f"keep names {len(set(found))} features, more than max_feature_nodes={cap}")
    return torch.tensor(sorted(set(found)), dtype=torch.long)


def _compacted(
    rows: torch.Tensor, row_nodes: torch.Tensor, selected: torch.Tensor, reads: _Reads
) -> torch.Tensor:
    """The adjacency over the kept features: the columns kept, in node order, and each found row moved to its
    node's index among them, a block at a time (at most the rows and the adjacency are held at once)."""
    keep = torch.cat([selected, torch.arange(reads.n_active, reads.logit_offset + reads.n_logits)])
    rank = torch.full((reads.logit_offset + reads.n_logits,), -1, dtype=torch.long)
    rank[keep] = torch.arange(len(keep))
    dest = rank[row_nodes]
    adjacency = torch.zeros(len(keep), len(keep))
    for start in range(0, len(rows), reads.batch_size):
        adjacency[dest[start : start + reads.batch_size]] = rows[start : start + reads.batch_size][:, keep]
    return adjacency


def _rows(
    run: FrozenRun,
    sources: Sources,
    transcoders: SparseDictionary,
    layers: torch.Tensor,
    positions: torch.Tensor,
    vectors: torch.Tensor,
) -> torch.Tensor:
    """``[n, n_active + (n_layers + 1) * n_pos]``: the direct effects on read ``i`` (``vectors[i]`` at the
    input of ``layers[i]``, or at the unembedding's input for ``LOGITS``, at ``positions[i]``)."""
    n = len(vectors)
    outputs, injected = [], []
    for layer in layers.unique().tolist():
        mask = layers == layer
        t = run.unembed_in if layer == LOGITS else run.inputs[layer]  # [1, pos, d_model]
        g = torch.zeros(n, *t.shape, dtype=t.dtype, device=t.device)  # one cotangent per read: [n, 1, pos, d]
        rows = torch.arange(n)[mask].to(t.device)
        g[rows, 0, positions[mask].to(t.device)] = vectors[mask.to(vectors.device)].to(t.device, t.dtype)
        outputs.append(t)
        injected.append(g)
    grads = torch.autograd.grad(
        outputs, run.leaves, injected, retain_graph=True, allow_unused=True, is_grads_batched=True
    )
    # A leaf no read depends on (a write at or after every read's layer) has no gradient: its columns stay 0.
    grads = [None if g is None else g[:, 0].float() for g in grads]
    embed_grad, out_grads = grads[0], dict(zip(sorted(run.outputs), grads[1:], strict=True))
    n_active, (n_layers, n_pos, _) = len(sources.features), sources.errors.shape
    out = torch.zeros(n, n_active + (n_layers + 1) * n_pos, device=sources.tokens.device)
    for layer, (first, dec) in sources.decoders.items():
        # The features at one position are one run of columns: a matrix product per position, with no
        # gathered copy of the gradient.
        for j, out_layer in enumerate(transcoders.output_layers(layer)):
            g = out_grads[out_layer]  # [n, pos, d_model]
            if g is None:
                continue
            for p, start, end in sources.runs[layer]:
                out[:, start:end] += g[:, p] @ dec[start - first : end - first, j].T  # [n, features at p]
    for layer in range(n_layers):
        start = n_active + layer * n_pos
        if out_grads.get(layer) is not None:
            out[:, start : start + n_pos] = torch.einsum(
                "bpd,pd->bp", out_grads[layer], sources.errors[layer]
            )
    if embed_grad is not None:
        start = n_active + n_layers * n_pos
        out[:, start : start + n_pos] = torch.einsum("bpd,pd->bp", embed_grad, sources.tokens)
    return out.detach().cpu()


def _check(
    model: Any,
    transcoders: SparseDictionary,
    prompt: Any,
    max_feature_nodes: int | None,
    batch_size: int,
    max_logits: int,
    max_memory_gb: float | None,
) -> torch.Tensor:
    """The prompt's ids ``[pos]``, after checking every argument (one line per problem)."""
    cfg = model.cfg
    if max_memory_gb is not None and (
        isinstance(max_memory_gb, bool)
        or not isinstance(max_memory_gb, int | float)
        or not 0 < max_memory_gb < float("inf")
    ):
        raise ValueError(f"max_memory_gb must be a positive number of GiB or None, got {max_memory_gb!r}")
    for name, value in (("batch_size", batch_size), ("max_logits", max_logits)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if max_feature_nodes is not None and (
        isinstance(max_feature_nodes, bool) or not isinstance(max_feature_nodes, int) or max_feature_nodes < 1
    ):
        raise ValueError(f"max_feature_nodes must be a positive integer or None, got {max_feature_nodes!r}")
    check_fit(model, transcoders)
    tokens = prompt_ids(model, prompt)
    if len(tokens) < 2:
        raise ValueError(
            f"the prompt has {len(tokens)} token(s); it needs a special token first and at least one more"
        )
    if len(tokens) > cfg.n_ctx:
        raise ValueError(f"the prompt has {len(tokens)} tokens but the model's context is n_ctx={cfg.n_ctx}")
    return tokens
