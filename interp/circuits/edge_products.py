"""The two halves of an edge attribution pass: the sources' differences, recorded during the forward passes,
and the gradients at the node inputs, contracted with them during the backward pass.

Both are written for cost, since they run on top of bare forward and backward passes:

- Heads are recorded from ``hook_z [batch, pos, head, d_head]`` and projected through ``W_O`` here, which is
  what ``hook_result`` holds. Hooking the results instead would make every attention layer leave its fused
  kernel and keep patterns and per-head writes in the autograd graph of the clean run; ``hook_z`` does not.
  Only the difference of ``z`` is projected, once, straight into the store (:class:`Differences`).
- One store serves both runs: it holds the corrupted outputs of the input and the MLPs (the heads' are kept as
  ``z``), and the clean run overwrites each row, in place, with clean minus corrupted as it reaches it. So a
  batch holds one ``[n_sources, positions, d_model]`` float32 tensor, not two.
- The model's weights stop requiring gradients for the call (:func:`weights_without_grad`): the scores need
  gradients at the node inputs only, and autograd then keeps no activation for a weight's gradient, and the
  norm and the projections before attention are computed once for all heads
  (:func:`interp.model.head_norm.project_heads`).
- The gradients of the inputs of :data:`LAYERS_PER_PRODUCT` consecutive layers (their query, key and value
  heads, their MLPs, and the logits after the last layer) are gathered into one ``[inputs, positions,
  d_model]`` block and contracted with the differences in a single matrix product. A product with a few
  columns per hook would be bound by reading the differences, once per hook; a few dozen columns read them
  once per group and keep the arithmetic units busy. The product covers the rows the group's widest input
  reads; entries outside the graph's edges come out of it too, and :func:`contraction_hooks`'s caller clears
  them with the graph's ``allowed`` mask.
- The store and the gradient blocks come from a :class:`Pool` that every group and batch of a run reuses: on
  CPU, first writes to freshly allocated pages cost more than the copies into them.
- In a causal model only some positions can add to a score (:func:`scored_positions`): before the first token
  where a pair's clean and corrupted inputs differ, both runs compute the same thing, so every difference is
  0; after the position the metric reads, nothing reaches the metric, so every gradient is 0. The store and the
  gradient blocks hold the other positions only, ``[rows, positions, d_model]``: for pairs that differ in a
  word mid-sentence and are padded to the batch's longest, that is about half the positions, and half the
  contractions' work.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from itertools import groupby

import torch

from interp.circuits.graph import Graph
from interp.circuits.pairs import Pairs
from interp.circuits.wiring import InputHook, as_rows, input_hooks, source_hooks, source_recorders

LAYERS_PER_PRODUCT = 4  # 60-70 columns for SmolLM2: twice the throughput of one layer's 16, little waste


@contextlib.contextmanager
def weights_without_grad(model) -> Iterator[None]:
    """The model with no parameter requiring a gradient, restored on exit (also when the block raises)."""
    thawed = [p for p in model.parameters() if p.requires_grad]
    try:
        for p in thawed:
            p.requires_grad_(False)
        yield
    finally:
        for p in thawed:
            p.requires_grad_(True)


def scored_positions(batch: Pairs, causal: bool) -> torch.Tensor | None:
    """The positions where a difference times a gradient can be nonzero, as indices into ``[batch * pos]``
    (row ``r``, position ``p`` is ``r * pos + p``); ``None`` when that is every position.

    In a causal model a pair's row counts from the first position where its clean and corrupted tokens differ
    (before it both runs see the same tokens, and every difference is 0; a pair that does not differ at all
    has no position) up to the position its metric reads (after it nothing reaches the logits the metric
    sees; without read positions the metric may read any, so up to the last). Outside a causal model every
    position counts."""
    if not causal:
        return None
    n_pos = batch.clean.shape[1]
    at = torch.arange(n_pos, device=batch.clean.device)
    differs = batch.clean != batch.corrupt  # [batch, pos]
    first = torch.where(differs.any(1), differs.float().argmax(1), n_pos)  # [batch]
    last = batch.positions.to(at.device) if batch.positions is not None else torch.full_like(first, n_pos - 1)
    keep = (at >= first[:, None]) & (at <= last[:, None])  # [batch, pos]
    return None if bool(keep.all()) else keep.flatten().nonzero().flatten()


def _select(x: torch.Tensor, positions: torch.Tensor | None, out: torch.Tensor | None = None) -> torch.Tensor:
    """``x [batch, pos, ...]`` at the scored positions, ``[positions, ...]`` (all of them when ``None``), into
    ``out`` when given (which may be of another dtype: the store is float32 whatever the model's)."""
    return _gather(x.flatten(0, 1), 0, positions, out)


def _gather(x: torch.Tensor, dim: int, index: torch.Tensor | None, out: torch.Tensor | None) -> torch.Tensor:
    """``x`` at ``index`` along ``dim`` (all of it when ``None``), written into ``out`` when given."""
    if index is None:
        return x if out is None else out.copy_(x)
    if out is None:
        return x.index_select(dim, index)
    if out.dtype == x.dtype:
        return torch.index_select(x, dim, index, out=out)
    return out.copy_(x.index_select(dim, index))


class Differences:
    """Every source's output on the clean inputs minus the corrupted ones, recorded by two forward passes.

    ``store [n_sources, positions, d_model]`` (float32) ends up holding the differences at the scored positions
    (:func:`scored_positions`; all ``batch * pos`` of them when ``positions`` is ``None``). The corrupted run
    writes the input's and the MLPs' outputs into their rows and keeps each layer's ``z`` (``[positions, head,
    d_head]``, a ninth of the heads' writes for SmolLM2); the clean run subtracts in place, and projects each
    head's difference of ``z`` through its ``W_O`` straight into the head's rows (one projection per head, not
    one per run).
    """

    def __init__(self, model, graph: Graph, store: torch.Tensor, positions: torch.Tensor | None = None):
        self.model, self.store, self.positions = model, store, positions
        self.corrupt_z: dict[str, torch.Tensor] = {}
        # The attention module, not its W_O: under a device map with offloading, weights are real only while
        # their block runs, so W_O is read in the hook.
        self.specs = [
            (spec, model.get_submodule(spec.name.rpartition(".")[0]) if spec.heads else None)
            for spec in source_hooks(graph)
        ]

    def corrupt_hooks(self) -> list:
        """Forward hooks for the corrupted run."""
        return [hook for spec, attn in self.specs for hook in self._hooks(spec, attn, clean=False)]

    def clean_hooks(self) -> list:
        """Forward hooks for the clean run (after the corrupted one): the rows become the differences."""
        return [hook for spec, attn in self.specs for hook in self._hooks(spec, attn, clean=True)]

    def _hooks(self, spec, attn, *, clean: bool) -> list:
        if attn is None:  # the input, an MLP, a mixture of experts' experts: rows [rows, batch, pos, d_model]
            return source_recorders(self.model, spec, self._record_rows(spec, clean=clean))
        # heads are read at blocks.L.attn.hook_z, not at hook_result
        return [(spec.name.rpartition(".")[0] + ".hook_z", self._record(spec, attn, clean=clean))]

    def _record_rows(self, spec, *, clean: bool):
        target = self.store[spec.rows]  # [rows, positions, d_model]

        def record(rows: torch.Tensor) -> None:
            rows = rows.to(target.device).flatten(1, 2)  # [rows, batch * pos, d_model]
            if clean:
                torch.sub(_gather(rows, 1, self.positions, None).float(), target, out=target)
            else:
                _gather(rows, 1, self.positions, target)

        return record

    def _record(self, spec, attn, *, clean: bool):
        target = self.store[spec.rows]  # [rows, positions, d_model]

        def record(x: torch.Tensor, hook) -> None:
            x = x.detach().to(target.device)  # a block placed on another device than the store
            if not clean:
                self.corrupt_z[hook.name] = _select(x, self.positions)  # [positions, head, d_head]
            else:
                dz = _select(x, self.positions).float() - self.corrupt_z.pop(hook.name).float()
                w_o = attn.W_O.detach().to(target.device, torch.float32)  # [head, d_head, d_model]
                torch.bmm(dz.transpose(0, 1), w_o, out=target)  # [head, positions, d_model]

        return record


class Pool:
    """Float32 memory for a run's ``[rows, positions, d_model]`` tensors, handed back after use and reused.

    A tensor of tens of MiB gets pages of its own from the system, and on CPU every first write to a page costs
    a fault: written once per group of layers per batch, the gradient blocks spent more time faulting than
    copying. Every tensor is given room for the run's largest batch (``row_numel`` elements a row), so memory
    handed back fits any later batch, and the pool holds no more than the most tensors alive at once.
    """

    def __init__(self, device, row_numel: int) -> None:
        self.device, self.row_numel = device, row_numel
        self.free: list[torch.Tensor] = []

    def take(self, shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        """An uninitialised tensor of ``shape`` over pooled memory, and that memory (for :meth:`give`)."""
        need = math.prod(shape)
        fits = [t for t in self.free if t.numel() >= need]
        if fits:
            flat = min(fits, key=torch.Tensor.numel)
            self.free = [t for t in self.free if t is not flat]
        else:
            flat = torch.empty(max(need, shape[0] * self.row_numel), device=self.device)
        return flat, flat[:need].view(shape)

    def give(self, flat: torch.Tensor) -> None:
        self.free.append(flat)


def contraction_hooks(
    graph: Graph,
    delta: torch.Tensor,
    scores: torch.Tensor,
    passes: int = 1,
    pool: Pool | None = None,
    positions: torch.Tensor | None = None,
) -> tuple[list, Callable[[], None]]:
    """Backward hooks adding ``delta . grad``, summed over the scored ``positions`` (every batch row and position
    when ``None``) and ``passes`` backward passes, into ``scores [n_sources, n_inputs]`` (see the module
    docstring: entries outside the edges are not 0); ``delta [n_sources, positions, d_model]``. Also the function
    to call after the last pass, which contracts what is left: the layers some of whose inputs received no
    gradient in some pass (it counts as 0).

    The gradients are summed before the product, since ``sum_k delta . g_k = delta . sum_k g_k``: one product
    per group of layers however many passes there are. A group's block is made when its first gradient
    arrives and dropped when the last pass's last gradient has been contracted; so one pass holds a group's
    block or two, several passes every group's block (``[n_inputs, positions, d_model]`` in all).
    """
    group_of = lambda spec: int(spec.name.split(".")[1]) // LAYERS_PER_PRODUCT  # noqa: E731 - blocks.L.hook_...
    pool = pool or Pool(delta.device, delta[0].numel())
    groups = [
        _Group(list(specs), delta, scores, passes, pool, positions)
        for _, specs in groupby(input_hooks(graph), group_of)
    ]

    def finish() -> None:
        for group in groups:
            if group.block is not None:
                group.contract()

    return [hook for group in groups for hook in group.hooks()], finish


class _Group:
    """The node inputs of a few consecutive layers (and the logits, after the last layer): the gradients they
    receive at the scored positions, summed into one ``[inputs, positions, d_model]`` block, contracted once all
    ``passes`` have delivered."""

    def __init__(
        self,
        specs: list[InputHook],
        delta: torch.Tensor,
        scores: torch.Tensor,
        passes: int,
        pool: Pool,
        positions: torch.Tensor | None,
    ):
        self.specs, self.delta, self.scores, self.pool, self.positions = specs, delta, scores, pool, positions
        self.first, self.last = specs[0].cols.start, specs[-1].cols.stop  # the columns are contiguous
        self.n = max(spec.n_readable for spec in specs)
        self.expected = len(specs) * passes
        self.where = {
            spec.name: slice(spec.cols.start - self.first, spec.cols.stop - self.first) for spec in specs
        }
        self.block: torch.Tensor | None = None
        self.flat: torch.Tensor | None = None  # the pool's memory under the block
        self.received = dict.fromkeys(self.where, 0)  # gradients taken in the passes so far, by hook

    def hooks(self) -> list:
        def add(spec: InputHook):
            where = self.where[spec.name]

            def take(grad: torch.Tensor, hook) -> None:
                if self.block is None:
                    shape = (self.last - self.first, *self.delta.shape[1:])  # [inputs, positions, d_model]
                    self.flat, self.block = self.pool.take(shape)
                rows = as_rows(grad, spec.heads).flatten(1, 2)  # [inputs, batch * pos, d_model]
                if self.received[spec.name]:
                    self.block[where] += _gather(rows, 1, self.positions, None)
                else:
                    _gather(rows, 1, self.positions, self.block[where])
                self.received[spec.name] += 1
                if sum(self.received.values()) == self.expected:
                    self.contract()

            return take

        return [(spec.name, add(spec)) for spec in self.specs]

    def contract(self) -> None:
        for name, count in self.received.items():
            if not count:  # no gradient reached these inputs: they contribute 0
                self.block[self.where[name]] = 0
        n, flat = self.n, self.block.flatten(1)  # [inputs, batch * pos * d_model]
        self.scores[:n, self.first : self.last] += self.delta[:n].flatten(1) @ flat.T  # [sources, inputs]
        self.pool.give(self.flat)
        self.block, self.flat, self.received = None, None, dict.fromkeys(self.received, 0)
