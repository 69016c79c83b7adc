"""Running a circuit: the model with every edge outside it patched from the corrupted input.

Each node input of the patched run receives the corrupted run's stream at that input plus, for every kept
edge, the difference between what the edge's source writes *in the patched run* and what it wrote in the
corrupted run::

    input_v = corrupt_stream_v + sum over kept edges (u -> v) of (out_u(patched) - out_u(corrupt))

Sources are recomputed in the patched run from their own patched inputs, so the effect of a removed edge
propagates downstream, and every input goes through the model's real norms, attention and MLPs (nothing is
linearised). An input whose every edge is kept is left as the patched run computes it, and one with no kept
edge is the corrupted stream itself, so the full circuit is the clean run and the empty one the corrupted run,
both exactly (to the bit, against the same forward with the model's inputs split; to float tolerance against
the plain forward, whose fused projections sum in another order).

The corrupted run is computed once per batch (:func:`corrupt_run`) and reused for every circuit evaluated on
it; it records the outputs of the sources those circuits read (:func:`sources_read`), no others. The patched run
keeps ``[n_sources, batch, pos, d_model]`` differences in float32, filled as the sources it reads are reached
(only when some input is partly kept), and forms each input as one matrix product with the circuit's column of
kept edges.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from interp.circuits.circuit import Circuit
from interp.circuits.graph import Graph
from interp.circuits.pairs import Pairs
from interp.circuits.wiring import (
    InputHook,
    SourceHook,
    forward,
    input_hooks,
    source_hooks,
    source_recorders,
    split,
)


@dataclass
class CorruptRun:
    """What the patched runs of one batch need from its corrupted run.

    Attributes:
        outputs: ``[n_sources, batch, pos, d_model]`` float32, the sources' outputs (rows not ``recorded`` are
            left unfilled).
        streams: the stream at every input hook, by the name of the hook that holds it (model dtype).
        logits: the corrupted run's logits (at the read positions when the pairs give them).
        recorded: ``[n_sources]`` bool, the rows of ``outputs`` that were recorded.
    """

    outputs: torch.Tensor
    streams: dict[str, torch.Tensor]
    logits: torch.Tensor
    recorded: torch.Tensor


def check_graph(model, graph: Graph | None) -> Graph:
    """The model's graph; a given graph must be the model's."""
    own = Graph.from_model(model)
    if graph is not None and graph != own:
        raise ValueError(f"the circuit or scores belong to {graph}, but the model's graph is {own}")
    return own


def record_sources(
    model,
    graph: Graph,
    store: torch.Tensor,
    minus: torch.Tensor | None = None,
    only: torch.Tensor | None = None,
) -> list:
    """Forward hooks writing every source's output (minus ``minus``, when given) into ``store``'s rows; with
    ``only`` (``[n_sources]`` bool), just the hooks holding some of those sources (a hook's every source is
    written: the heads of a layer are one hook). A hook left out costs nothing: the attention forms its
    per-head outputs only for a hook in use."""

    def recorder(spec: SourceHook):
        def record(rows: torch.Tensor) -> None:
            rows = rows.float()
            store[spec.rows] = rows if minus is None else rows - minus[spec.rows]

        return record

    return [hook for spec in _recorded(graph, only) for hook in source_recorders(model, spec, recorder(spec))]


def _recorded(graph: Graph, only: torch.Tensor | None) -> list[SourceHook]:
    """The source hooks that hold some of the sources ``only`` names (every one without ``only``)."""
    return [spec for spec in source_hooks(graph) if only is None or bool(only[spec.rows].any())]


def recorded_rows(graph: Graph, only: torch.Tensor | None) -> torch.Tensor:
    """``[n_sources]`` bool: the rows :func:`record_sources` with ``only`` writes."""
    rows = torch.zeros(len(graph.sources), dtype=torch.bool)
    for spec in _recorded(graph, only):
        rows[spec.rows] = True
    return rows


def new_store(graph: Graph, batch: Pairs, model) -> torch.Tensor:
    """Room for every source's output; left unfilled, since a forward pass records every row before any is read
    (a mixture-of-experts layer writes all its experts' rows, zeros where an expert has no tokens)."""
    n, n_pos = batch.clean.shape
    return torch.empty(len(graph.sources), n, n_pos, model.cfg.d_model, device=model.device)


@torch.no_grad()
def corrupt_run(
    model, batch: Pairs, graph: Graph | None = None, sources: torch.Tensor | None = None
) -> CorruptRun:
    """Run the corrupted inputs once, keeping the sources' outputs and the stream at every input.

    Args:
        sources: ``[n_sources]`` bool, the sources whose outputs the circuits to be run read
            (:func:`sources_read`); ``None``: every source's.
    """
    graph = check_graph(model, graph)
    batch = batch.to(model.device)
    if sources is not None:
        sources = torch.as_tensor(sources, dtype=torch.bool).cpu()
        if sources.shape != (len(graph.sources),):
            raise ValueError(
                f"sources has shape {tuple(sources.shape)}; give one flag per source of the graph: "
                f"({len(graph.sources)},)"
            )
    outputs = new_store(graph, batch, model)
    streams: dict[str, torch.Tensor] = {}

    def keep(x: torch.Tensor, hook) -> None:
        streams[hook.name] = x.detach()

    names = sorted({spec.stream for spec in input_hooks(graph)})
    with split(model):
        logits = forward(
            model,
            batch.corrupt,
            batch.attention_mask,
            batch.positions,
            fwd_hooks=[*record_sources(model, graph, outputs, only=sources), (names, keep)],
        )
    return CorruptRun(outputs, streams, logits, recorded_rows(graph, sources))


def _partly_kept(spec: InputHook, kept: torch.Tensor) -> bool:
    """Whether some of ``spec``'s inputs keep some edges but not all: only those read the sources' differences."""
    kept = kept[: spec.n_readable]
    return bool(kept.any()) and not bool(kept.all())


def _sources_of(kept: torch.Tensor) -> tuple[bool, torch.Tensor]:
    """For a partly kept input (``kept [n_readable, inputs]``): whether it is formed by adding the kept edges'
    differences to the corrupted stream (or by removing the removed ones' from the patched stream), and the
    sources whose differences that reads, whichever side names fewer."""
    adding = kept.any(1).nonzero().flatten()
    removing = (~kept[:, ~kept.all(0)]).any(1).nonzero().flatten()
    add = len(adding) <= len(removing)
    return add, adding if add else removing


def sources_read(circuits: Sequence[Circuit]) -> torch.Tensor:
    """``[n_sources]`` bool: the sources whose outputs the partly kept inputs of ``circuits`` read, all that a
    corrupted run shared by them must record (:func:`corrupt_run`'s ``sources``)."""
    graph = circuits[0].graph
    read = torch.zeros(len(graph.sources), dtype=torch.bool)
    for circuit in circuits:
        mask = circuit.mask.cpu()
        for spec in input_hooks(graph):
            kept = mask[: spec.n_readable, spec.cols]
            if _partly_kept(spec, kept):
                read[_sources_of(kept)[1]] = True
    return read


def _patch_input(spec: InputHook, kept: torch.Tensor, delta: torch.Tensor | None, corrupt: CorruptRun):
    """The forward hook that forms ``spec``'s inputs, or ``None`` when every edge into them is kept (the patched
    run's own stream is then the answer).

    Partly kept inputs are formed from whichever side names fewer sources: the corrupted stream plus the kept
    edges' differences, or the patched run's own stream (every source's patched output) minus the removed
    edges' differences. The two are equal; only the sources named enter the product, so a circuit of a few
    hundred edges costs little more than a plain forward pass.
    """
    kept = kept[: spec.n_readable]  # [n, inputs of the hook]
    complete = kept.all(0)
    if bool(complete.all()):
        return None
    if not bool(kept.any()):
        stream = corrupt.streams[spec.stream]  # [batch, pos, d_model]

        def corrupted(x: torch.Tensor, hook) -> torch.Tensor:  # laid out as the corrupted run had it
            return stream[:, :, None, :].expand_as(x) if spec.heads else stream

        return corrupted
    assert delta is not None, "a partly kept input needs the differences' store"
    add, rows = _sources_of(kept)
    weights = (kept if add else ~kept & ~complete[None, :])[rows].to(delta.dtype)  # [rows, inputs]
    stream = corrupt.streams[spec.stream] if add else None

    def patch(x: torch.Tensor, hook) -> torch.Tensor:
        x4 = x if spec.heads else x[:, :, None, :]  # [batch, pos, inputs, d_model]
        flat = delta[rows].reshape(len(rows), -1)  # [rows, batch * pos * d_model]
        terms = (weights.T @ flat).reshape(
            weights.shape[1], *delta.shape[1:]
        )  # [inputs, batch, pos, d_model]
        terms = terms.permute(1, 2, 0, 3)  # [batch, pos, inputs, d_model]
        base = stream.float()[:, :, None, :] if add else x4.float()
        new = (base + terms if add else base - terms).to(x.dtype)
        new = torch.where(complete.to(x.device)[None, None, :, None], x4, new)
        return new if spec.heads else new[:, :, 0]

    return patch


def circuit_hooks(model, circuit: Circuit, corrupt: CorruptRun) -> list:
    """Forward hooks that run ``circuit`` against ``corrupt``.

    The sources' differences (``[n_sources, batch, pos, d_model]`` float32) are stored and recorded only when
    some input is partly kept: the full and the empty circuit then run exactly the computation of the clean
    and the corrupted forward, and allocate nothing.
    """
    graph = circuit.graph
    mask = circuit.mask.to(corrupt.outputs.device)
    columns = [(spec, mask[:, spec.cols]) for spec in input_hooks(graph)]
    read = sources_read([circuit])
    missing = read & ~corrupt.recorded.cpu()
    if bool(missing.any()):
        names = [graph.sources[i] for i in missing.nonzero().flatten()[:4].tolist()]
        raise ValueError(
            f"the corrupted run did not record {int(missing.sum())} source(s) this circuit reads, such as "
            f"{names}; make it with corrupt_run(..., sources=sources_read(circuits)) for every circuit run on it"
        )
    reads = bool(read.any())
    delta = torch.empty_like(corrupt.outputs) if reads else None  # every row read is recorded first
    hooks = []
    for spec, kept in columns:
        fn = _patch_input(spec, kept, delta, corrupt)
        if fn is not None:
            hooks.append((spec.name, fn))
    return (record_sources(model, graph, delta, corrupt.outputs, only=read) if reads else []) + hooks


@torch.no_grad()
def run_circuit(model, circuit: Circuit, batch: Pairs, corrupt: CorruptRun | None = None) -> torch.Tensor:
    """Logits of the clean inputs with every edge outside ``circuit`` patched from the corrupted inputs.

    Args:
        model: a :class:`~interp.HookedTransformer` whose graph is ``circuit.graph``.
        circuit: the edges to keep.
        batch: the pairs (at most a batch's worth; see :func:`interp.circuits.evaluate`).
        corrupt: this batch's :func:`corrupt_run`, when several circuits are run on it.

    Returns:
        Logits ``[batch, pos, d_vocab]``, or ``[batch, 1, d_vocab]`` at the pairs' read positions.
    """
    graph = check_graph(model, circuit.graph)
    batch = batch.to(model.device)
    if corrupt is None:
        corrupt = corrupt_run(model, batch, graph, sources=sources_read([circuit]))
    with split(model):
        return forward(
            model,
            batch.clean,
            batch.attention_mask,
            batch.positions,
            fwd_hooks=circuit_hooks(model, circuit, corrupt),
        )
