"""The two halves of an edge attribution pass: the sources' differences, recorded during the forward passes,
and the gradients at the node inputs, contracted with them during the backward pass.

Both are written for cost, since they run on top of bare forward and backward passes:

- Heads are recorded from ``hook_z [batch, pos, head, d_head]`` and projected through ``W_O`` here, which is
  what ``hook_result`` holds. Hooking the results instead would make every attention layer leave its fused
  kernel and keep patterns and per-head writes in the autograd graph of the clean run; ``hook_z`` does not.
- One store serves both runs: it holds the corrupted outputs, and the clean run overwrites each row, in place,
  with clean minus corrupted as it reaches it. So a batch holds one ``[n_sources, batch, pos, d_model]`` float32
  tensor, not two.
- The model's weights stop requiring gradients for the call (:func:`frozen`): the scores need gradients at the
  node inputs only, and autograd then keeps no activation for a weight's gradient, and the norm before
  attention is computed once for all heads (:func:`interp.model.head_norm.norm_heads`).
- The gradients of one layer's inputs (its query, key and value heads, its MLP, and the logits after the last
  layer) are gathered into one ``[inputs, batch, pos, d_model]`` block and contracted with the differences in a
  single matrix product, which reads the differences once per layer rather than once per hook. The product
  covers the rows the layer's widest input reads; entries outside the graph's edges come out of it too, and
  :func:`contraction_hooks`'s caller clears them with the graph's ``allowed`` mask.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from itertools import groupby

import torch

from interp.circuits.graph import Graph
from interp.circuits.wiring import InputHook, as_rows, input_hooks, source_hooks


@contextlib.contextmanager
def frozen(model) -> Iterator[None]:
    """The model with no parameter requiring a gradient, restored on exit (also when the block raises)."""
    thawed = [p for p in model.parameters() if p.requires_grad]
    try:
        for p in thawed:
            p.requires_grad_(False)
        yield
    finally:
        for p in thawed:
            p.requires_grad_(True)


def record_outputs(model, graph: Graph, store: torch.Tensor, *, difference: bool = False) -> list:
    """Forward hooks writing every source's output (float32) into ``store``'s rows; with ``difference``, each
    row becomes this run's output minus what the row held (the corrupted run's, recorded earlier)."""

    def recorder(rows: slice, project: torch.Tensor | None):
        def record(x: torch.Tensor, hook) -> None:
            x = x.detach()
            if (
                project is not None
            ):  # z [batch, pos, head, d_head] -> each head's write, as hook_result has it
                x = torch.einsum("bphe,hed->bphd", x, project)  # [batch, pos, head, d_model]
            value = as_rows(x, project is not None).float()  # [rows, batch, pos, d_model]
            if difference:
                torch.sub(value, store[rows], out=store[rows])
            else:
                store[rows] = value

        return record

    hooks = []
    for spec in source_hooks(graph):
        if spec.heads:  # blocks.L.attn.hook_result -> blocks.L.attn.hook_z
            attn = spec.name.rpartition(".")[0]
            hooks.append((f"{attn}.hook_z", recorder(spec.rows, model.get_submodule(attn).W_O.detach())))
        else:
            hooks.append((spec.name, recorder(spec.rows, None)))
    return hooks


def contraction_hooks(
    graph: Graph, delta: torch.Tensor, scores: torch.Tensor, passes: int = 1
) -> tuple[list, Callable[[], None]]:
    """Backward hooks adding ``delta . grad``, summed over batch, positions and ``passes`` backward passes, into
    ``scores [n_sources, n_inputs]`` (see the module docstring: entries outside the edges are not 0); and the
    function to call after the last pass, which contracts what is left: the layers some of whose inputs
    received no gradient in some pass (it counts as 0).

    The gradients are summed before the product, since ``sum_k delta . g_k = delta . sum_k g_k``: one product
    per layer however many passes there are. Each layer's block is made when its first gradient arrives and
    dropped when the last pass's last gradient has been contracted; so one pass holds a layer's block or two,
    several passes every layer's block (``[n_inputs, batch, pos, d_model]`` in all).
    """
    layer_of = lambda spec: spec.name.split(".")[1]  # noqa: E731 - blocks.L.hook_...
    layers = [
        _LayerSum(list(specs), delta, scores, passes) for _, specs in groupby(input_hooks(graph), layer_of)
    ]

    def finish() -> None:
        for layer in layers:
            if layer.block is not None:
                layer.contract()

    return [hook for layer in layers for hook in layer.hooks()], finish


class _LayerSum:
    """One layer's node inputs (and the logits, after the last layer): the gradients they receive, summed
    into one ``[inputs, batch, pos, d_model]`` block and contracted once all ``passes`` have delivered."""

    def __init__(self, specs: list[InputHook], delta: torch.Tensor, scores: torch.Tensor, passes: int):
        self.specs, self.delta, self.scores = specs, delta, scores
        self.first, self.last = specs[0].cols.start, specs[-1].cols.stop  # the layer's columns are contiguous
        self.n = max(spec.n_readable for spec in specs)
        self.expected = len(specs) * passes
        self.block: torch.Tensor | None = None
        self.received = 0

    def hooks(self) -> list:
        def add(spec: InputHook):
            where = slice(spec.cols.start - self.first, spec.cols.stop - self.first)

            def take(grad: torch.Tensor, hook) -> None:
                if self.block is None:
                    shape = (self.last - self.first, *self.delta.shape[1:])  # [inputs, batch, pos, d_model]
                    self.block = torch.zeros(shape, device=self.delta.device)
                self.block[where] += as_rows(grad, spec.heads)
                self.received += 1
                if self.received == self.expected:
                    self.contract()

            return take

        return [(spec.name, add(spec)) for spec in self.specs]

    def contract(self) -> None:
        n, flat = self.n, self.block.flatten(1)  # [inputs, batch * pos * d_model]
        self.scores[:n, self.first : self.last] += self.delta[:n].flatten(1) @ flat.T  # [sources, inputs]
        self.block, self.received = None, 0
