"""A mixture-of-experts layer's output split into one write per expert: the part of the stream that routing makes.

The layer writes ``hook_mlp_out = sum over the chosen experts of weight * expert_out`` plus, where the family has
one, the shared expert's output times its gate (:mod:`interp.model.moe`). Expert ``e``'s write is its weighted
output at the tokens routed to it and 0 elsewhere; the shared expert's is its own output times its gate at every
token, as the layer computes it. Both are read from the layer's hooks (the routing, each expert's ``hook_out``
on its own tokens, the shared expert's ``hook_out`` and ``hook_shared_expert_weight``), whether a cache holds
them (expert attribution, :mod:`interp.analysis.expert_attribution`) or a forward pass hands them over as it
reaches them (the experts as circuit nodes, :mod:`interp.circuits.wiring`).

The shared expert's write is not taken as what the layer's output leaves once the routed writes are removed:
that rest would carry the rounding of every routed write and of the layer's sum (in bfloat16 a few units in the
last place of the whole output, not of the shared expert's write), and anything an edit added at
``hook_mlp_out``.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from interp.analysis.checks import require_hooks
from interp.analysis.routing import check_moe_layer
from interp.model.moe import expert_tokens


def expert_write_names(model: nn.Module, layer: int) -> list[str]:
    """The hooks :func:`expert_writes` reads for mixture-of-experts layer ``layer``, in forward order."""
    mlp = f"blocks.{layer}.mlp"
    names = [f"{mlp}.hook_expert_indices", f"{mlp}.hook_expert_weights"]
    names += [f"{mlp}.experts.{e}.hook_out" for e in range(model.cfg.n_experts)]
    if model.cfg.d_shared_expert is not None:
        names.append(f"{mlp}.shared_expert.hook_out")
        if model.cfg.shared_expert_gate:
            names.append(f"{mlp}.hook_shared_expert_weight")
    return names


@torch.no_grad()
def expert_writes(
    model: nn.Module, values: Mapping[str, torch.Tensor], layer: int
) -> tuple[list[int | None], torch.Tensor]:
    """Layer ``layer``'s output split into one term per expert (see the module docstring).

    Args:
        values: the hooks of :func:`expert_write_names` ``(model, layer)``: a cache, or any mapping from their
            names to their values.

    Returns:
        ``(experts, writes)``: the expert of each term (``None`` for the shared expert, last) and
        ``writes [term, batch, pos, d_model]`` in float32, ``weight * expert_out`` at the tokens routed to the
        expert and 0 elsewhere (the gated shared expert at every token); ``writes.sum(0)`` is the layer's
        ``hook_mlp_out`` up to its rounding.

    Raises:
        ValueError: the layer is dense, or a norm follows the MLP (``hook_mlp_out`` is then the normed sum, of
            which the experts' writes are not terms). MissingHooksError: ``values`` lacks a hook.
    """
    layer = check_moe_layer(model, layer)
    if model.blocks[layer].ln2_post is not None:
        raise ValueError(
            f"layer {layer} norms its MLP's output (norm_placement={model.cfg.norm_placement!r}), so "
            "hook_mlp_out is not the sum of its experts' writes; expert writes need a layer without ln2_post"
        )
    fix = "names_filter=expert_names(model)"  # interp.analysis.expert_names: every layer's, and the final norm's
    require_hooks(values, expert_write_names(model, layer), f"expert_writes(layer={layer})", fix)
    mlp = f"blocks.{layer}.mlp"
    indices, weights = values[f"{mlp}.hook_expert_indices"], values[f"{mlp}.hook_expert_weights"]
    batch, pos, _ = indices.shape
    shared = model.cfg.d_shared_expert is not None
    experts: list[int | None] = [*range(model.cfg.n_experts), *([None] if shared else [])]
    writes = torch.zeros(len(experts), batch, pos, model.cfg.d_model, device=indices.device)
    for e in range(model.cfg.n_experts):
        rows, at = expert_tokens(indices, e)  # the tokens of expert e's rows, in their order
        weight = weights[indices == e].float()  # [n_routed]: one slot per token, in the same flat order
        writes[e, rows, at] = values[f"{mlp}.experts.{e}.hook_out"].float() * weight[:, None]
    if shared:
        out = values[f"{mlp}.shared_expert.hook_out"].float()  # [batch, pos, d_model]
        if model.cfg.shared_expert_gate:
            out = out * values[f"{mlp}.hook_shared_expert_weight"].float()
        writes[-1] = out
    return experts, writes
