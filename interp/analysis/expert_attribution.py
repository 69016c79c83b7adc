"""Each expert's direct effect on the logits, token by token.

A mixture-of-experts layer's output splits exactly into one term per expert
(:func:`~interp.analysis.expert_writes.expert_writes`: expert ``e``'s weighted output at the tokens routed to
it, the gated shared expert's at every token). In a pre-norm block those terms are terms of the stream. Direct
logit attribution (:mod:`interp.analysis.logit_attribution`) freezes the final norm's scale at the run's value,
which makes the path stream -> norm -> unembedding linear; :func:`expert_logit_attribution` pushes each
expert's term through that same frozen norm and onto the logit direction, so a layer's experts' values sum to
the ``L{l}_mlp`` term of :func:`~interp.analysis.direct_logit_attribution` at the same token. Like every direct
attribution it leaves out what an expert does through later layers.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch
from torch import nn

from hooks import ActivationCache
from interp.analysis.checks import require_hooks
from interp.analysis.expert_writes import expert_write_names, expert_writes
from interp.analysis.logit_attribution import logit_direction
from interp.analysis.norms import linearise_norm
from interp.analysis.routing import check_expert, check_moe_layer, moe_layers
from interp.model.moe import expert_tokens


def expert_names(model: nn.Module, layers: Sequence[int] | None = None) -> list[str]:
    """The hooks :func:`~interp.analysis.expert_writes.expert_writes` and :func:`expert_logit_attribution` read
    (pass as ``names_filter``): each layer's routing and expert outputs, and the final norm's scale."""
    layers = moe_layers(model) if layers is None else [check_moe_layer(model, l) for l in layers]
    names = [name for l in layers for name in expert_write_names(model, l)]
    return names + (["ln_final.hook_scale"] if model.ln_final is not None else [])


def _check_pre_norm(model: nn.Module) -> None:
    if model.cfg.norm_placement != "pre":
        raise ValueError(
            f"expert attribution reads each expert's write as a term of the stream, which holds in pre-norm "
            f"blocks; this model has norm_placement={model.cfg.norm_placement!r}"
        )


def _directions(model: nn.Module, target, batch: int, pos: int) -> torch.Tensor:
    """``[batch, pos, d_model]`` logit directions: per token for ``[batch, pos]`` ids, else one per row."""
    if isinstance(target, torch.Tensor) and not target.is_floating_point() and target.ndim == 2:
        if tuple(target.shape) != (batch, pos):
            raise ValueError(
                f"per-token targets must be [batch, pos] = [{batch}, {pos}] token ids, got {list(target.shape)}"
            )
        rows = logit_direction(model, target.reshape(-1), batch * pos)[0]  # [batch * pos, d_model]
        return rows.view(batch, pos, -1)
    return logit_direction(model, target, batch)[0][:, None].expand(batch, pos, -1)


@torch.no_grad()
def expert_logit_attribution(
    model: nn.Module,
    cache: ActivationCache,
    tokens_or_direction: int | tuple[int, int] | torch.Tensor,
    *,
    layers: Sequence[int] | None = None,
    experts: Sequence[int] | None = None,
) -> pd.DataFrame:
    """Each expert's direct effect on a logit (or logit difference) at every token routed to it.

    Args:
        cache: holds :func:`expert_names` ``(model, layers)``.
        tokens_or_direction: as for :func:`~interp.analysis.direct_logit_attribution` (a token id, a
            ``(correct, incorrect)`` pair, ``[batch]`` ids or ``[batch, 2]`` pairs, a float direction
            ``[d_model]`` or ``[batch, d_model]``), or ``[batch, pos]`` ids: a target per token (the next
            token, for instance). Unembedding biases are not an expert's and are left out.
        layers: mixture-of-experts layers (default: all).
        experts: only these experts (default: all, and the shared expert where there is one).

    Returns:
        One row per (layer, expert, token routed to it): ``layer, expert`` (``<NA>`` for the shared expert,
        which every token passes through), ``batch, position, weight`` (the routing weight; the sigmoid gate
        for the shared expert, 1 when ungated) and ``value``, the expert's weighted write through the frozen
        final norm, on the direction. At a token, a layer's values sum to that layer's ``L{l}_mlp`` direct
        logit attribution.

    Raises:
        ValueError: an expert asked for received no token in this cache (its effect is 0 everywhere), the
            model is not pre-norm, or a target has the wrong shape. IndexError: an expert out of range.
    """
    _check_pre_norm(model)
    chosen = moe_layers(model) if layers is None else [check_moe_layer(model, l) for l in layers]
    require_hooks(
        cache, expert_names(model, chosen), "expert_logit_attribution", "names_filter=expert_names(model)"
    )
    wanted = None
    if experts is not None:
        wanted = {check_expert(model, e, chosen[0]) for e in experts}
        for l in chosen:
            routed = cache[f"blocks.{l}.mlp.hook_expert_indices"]
            idle = sorted(e for e in wanted if not bool((routed == e).any()))
            if idle:
                raise ValueError(
                    f"expert {idle[0]} of layer {l} received no token in this cache, so its direct effect is 0 "
                    f"everywhere; choose among the experts it routed to: {sorted(set(routed.flatten().tolist()))}"
                )
    frames = []
    for l in chosen:
        ids, writes = expert_writes(model, cache, l)  # [term, batch, pos, d_model]
        _, batch, pos, _ = writes.shape
        direction = _directions(model, tokens_or_direction, batch, pos).to(writes.device)
        if model.ln_final is not None:
            writes = linearise_norm(model, model.ln_final, cache["ln_final.hook_scale"], writes)
        values = torch.einsum("tbpd,bpd->tbp", writes, direction)  # [term, batch, pos]
        mlp = f"blocks.{l}.mlp"
        indices, weights = cache[f"{mlp}.hook_expert_indices"], cache[f"{mlp}.hook_expert_weights"]
        for t, e in enumerate(ids):
            if e is None:
                if wanted is not None:
                    continue
                b, p = (
                    x.flatten() for x in torch.meshgrid(torch.arange(batch), torch.arange(pos), indexing="ij")
                )
                gate = f"{mlp}.hook_shared_expert_weight"
                weight = cache[gate][..., 0].flatten().float() if gate in cache else torch.ones(batch * pos)
            elif wanted is not None and e not in wanted:
                continue
            else:
                b, p = expert_tokens(indices, e)
                if len(b) == 0:  # an idle expert has no row
                    continue
                weight = weights[indices == e].float()
            frames.append(
                pd.DataFrame(
                    {
                        "layer": l,
                        "expert": pd.array([e] * len(b), dtype="Int64"),
                        "batch": b.tolist(),
                        "position": p.tolist(),
                        "weight": weight.tolist(),
                        "value": values[t, b, p].tolist(),
                    }
                )
            )
    return pd.concat(frames, ignore_index=True)
