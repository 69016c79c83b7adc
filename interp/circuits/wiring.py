"""Where a graph's nodes live in the model: the hook that holds each source's output and each input's stream.

Sources: ``input`` is the stream entering block 0 (``blocks.0.hook_resid_pre``: the token embeddings, plus the
positional ones where the family learns them), a layer's heads are ``blocks.L.attn.hook_result [batch, pos,
head, d_model]`` (their sum plus ``b_O`` is ``hook_attn_out``), its MLP ``blocks.L.hook_mlp_out``. Inputs, read
before the norm while the model's inputs are split (:meth:`~interp.HookedTransformer.split_inputs`):
``blocks.L.hook_q_input [batch, pos, head, d_model]``, ``hook_k_input`` and ``hook_v_input`` ``[batch, pos,
kv_head, d_model]``, ``hook_mlp_in`` and, for the logits, the final stream ``blocks.{n-1}.hook_resid_post``
(before ``ln_final``). Each hook covers a contiguous block of rows (sources) or columns (inputs) of the
graph's matrices; that block, and how many sources its inputs read, is all the scoring and patching code needs.

A mixture-of-experts layer's sources are its experts: no single hook holds them, so :func:`source_recorders`
gathers the hooks their writes are made from (the routing, each expert's ``hook_out``, which makes the experts
run one by one, each on its own tokens, and the shared expert's output and gate) and, when the forward reaches
``hook_mlp_out``, hands over the writes :func:`~interp.analysis.expert_writes.expert_writes` makes of them, the
one computation of an expert's write that expert attribution uses too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch

from interp.analysis.expert_writes import expert_write_names, expert_writes
from interp.circuits.graph import Graph


@dataclass(frozen=True)
class SourceHook:
    """A hook holding sources ``rows``; ``heads`` when it has a head axis (``[batch, pos, head, d_model]``);
    ``experts`` routed experts (and the shared expert, when ``rows`` has one more) when the hook is a mixture of
    experts' ``hook_mlp_out``."""

    name: str
    rows: slice
    heads: bool
    experts: int = 0


@dataclass(frozen=True)
class InputHook:
    """A hook holding inputs ``cols``, which read the first ``n_readable`` sources; ``stream`` is the hook that
    holds the undivided stream the inputs are copies of (in a run without edits)."""

    name: str
    cols: slice
    n_readable: int
    heads: bool
    stream: str


def source_hooks(graph: Graph) -> list[SourceHook]:
    """The hooks of every source, in forward order."""
    hooks = [SourceHook("blocks.0.hook_resid_pre", slice(0, 1), False)]
    for layer in range(graph.n_layers):
        base, end = graph.layer_starts[layer], graph.layer_starts[layer + 1]
        experts = graph.experts[layer] if graph.experts else 0
        hooks.append(SourceHook(f"blocks.{layer}.attn.hook_result", slice(base, base + graph.n_heads), True))
        hooks.append(
            SourceHook(f"blocks.{layer}.hook_mlp_out", slice(base + graph.n_heads, end), False, experts)
        )
    return hooks


def source_recorders(model, spec: SourceHook, record: Callable[[torch.Tensor], None]) -> list:
    """Forward hooks that call ``record(rows)`` with ``spec``'s sources, ``[rows, batch, pos, d_model]``
    (detached), as the forward pass reaches them; for a mixture of experts, each expert's weighted write at its
    tokens (see the module docstring)."""
    if not spec.experts:
        return [(spec.name, lambda x, hook: record(as_rows(x.detach(), spec.heads)))]
    layer = int(spec.name.split(".")[1])
    names = expert_write_names(model, layer)
    seen: dict[str, torch.Tensor] = {}

    def keep(x: torch.Tensor, hook) -> None:
        seen[hook.name] = x.detach()

    def finish(x: torch.Tensor, hook) -> None:
        _, rows = expert_writes(model, seen, layer)  # [rows, batch, pos, d_model]
        seen.clear()
        record(rows)

    return [(names, keep), (spec.name, finish)]


def input_hooks(graph: Graph) -> list[InputHook]:
    """The hooks of every input, in forward order."""
    h, g = graph.n_heads, graph.n_kv_heads
    hooks = []
    for layer in range(graph.n_layers):
        base = layer * graph.inputs_per_layer
        resid = f"blocks.{layer}.hook_resid_pre"
        attn_reads = graph.n_readable(base)
        hooks.append(
            InputHook(f"blocks.{layer}.hook_q_input", slice(base, base + h), attn_reads, True, resid)
        )
        hooks.append(
            InputHook(f"blocks.{layer}.hook_k_input", slice(base + h, base + h + g), attn_reads, True, resid)
        )
        hooks.append(
            InputHook(
                f"blocks.{layer}.hook_v_input", slice(base + h + g, base + h + 2 * g), attn_reads, True, resid
            )
        )
        mlp = base + h + 2 * g
        hooks.append(
            InputHook(
                f"blocks.{layer}.hook_mlp_in",
                slice(mlp, mlp + 1),
                graph.n_readable(mlp),
                False,
                f"blocks.{layer}.hook_mlp_in",
            )
        )
    last = f"blocks.{graph.n_layers - 1}.hook_resid_post"
    n_inputs = len(graph.inputs)
    hooks.append(InputHook(last, slice(n_inputs - 1, n_inputs), len(graph.sources), False, last))
    return hooks


def as_rows(x: torch.Tensor, heads: bool) -> torch.Tensor:
    """A hook's activation as ``[rows, batch, pos, d_model]`` (one row per head, or a single row)."""
    return x.permute(2, 0, 1, 3) if heads else x[None]


def forward(
    model,
    tokens: torch.Tensor,
    attention_mask: torch.Tensor | None,
    positions: torch.Tensor | None,
    *,
    fwd_hooks: Sequence = (),
    bwd_hooks: Sequence = (),
) -> torch.Tensor:
    """Logits of ``tokens`` with hooks attached: at every position, or at ``positions [batch]`` only.

    For read positions the final stream (``stop_at_layer=n_layers``) goes through the model's own final norm,
    head and unembedding at those positions, which is what the forward pass does at every position.
    """
    if positions is None:
        return model.run_with_hooks(tokens, attention_mask, fwd_hooks=fwd_hooks, bwd_hooks=bwd_hooks)
    with model.hooks(fwd_hooks, bwd_hooks):
        stream = model(tokens, attention_mask, stop_at_layer=model.cfg.n_layers)  # [batch, pos, d_model]
        rows = torch.arange(stream.shape[0], device=stream.device)
        x = stream[rows, positions.to(stream.device)][:, None]  # [batch, 1, d_model]
        if model.ln_final is not None:
            x = model.ln_final(x)
        if model.head is not None:
            x = model.head(x)
        return model.unembed(x) if model.unembed is not None else x


@contextlib.contextmanager
def split(model) -> Iterator[None]:
    """The model with split inputs for the block (a no-op when they are already split)."""
    if model.blocks[0].split:
        yield
        return
    with model.split_inputs():
        yield
