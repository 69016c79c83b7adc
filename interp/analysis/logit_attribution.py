"""Direct logit attribution: how much each component's write moves a logit (or a logit difference) directly.

The final stream is a sum of component writes (:func:`~interp.analysis.decompose_resid`). Freezing the final
norm's scale at the value the clean run had makes the path stream -> norm -> unembedding affine, so the logit
difference splits exactly into one term per component plus two bias terms: the final norm's bias
(``ln_final_bias``) and the unembedding's bias (``unembed_bias``). The terms add up to the difference
computed from the logits. This measures direct effects only: a head's influence through later layers is not
in its term. A model that soft-caps its logits (Gemma 2) is attributed before the cap, which is monotone but
not linear: the terms add up to the capped logits' argument, ``cap * atanh(logit / cap)``.
"""

from __future__ import annotations

import re

import pandas as pd
import torch
from torch import nn

from hooks import ActivationCache
from interp.analysis.checks import check_index, require_hooks
from interp.analysis.decompose import decompose_names, decompose_resid
from interp.analysis.lens import _at_position
from interp.analysis.norms import linearise_norm

_LABEL = re.compile(r"^L(\d+)(?:H(\d+))?")


def component_table(labels: list[str]) -> pd.DataFrame:
    """``component, layer, head`` for decomposition labels (``L3H1``: layer 3, head 3; ``embed``: NA, NA)."""
    layers, heads = [], []
    for label in labels:
        match = _LABEL.match(label)
        layers.append(int(match.group(1)) if match else None)
        heads.append(int(match.group(2)) if match and match.group(2) else None)
    return pd.DataFrame(
        {
            "component": labels,
            "layer": pd.array(layers, dtype="Int64"),
            "head": pd.array(heads, dtype="Int64"),
        }
    )


def logit_direction(model: nn.Module, target, batch: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(direction [batch, d], logit bias [batch] or None)`` for a token, a token pair, or a direction: what
    ``tokens_or_direction`` of :func:`direct_logit_attribution` (and of expert attribution) reads in the final
    stream."""
    d_vocab = model.cfg.d_vocab
    if isinstance(target, torch.Tensor) and target.is_floating_point():
        direction = target.detach().float()
        if direction.shape[-1] != model.cfg.d_model or direction.ndim > 2:
            raise ValueError(
                f"a direction must be [d_model] or [batch, d_model] with d_model={model.cfg.d_model}, "
                f"got shape {tuple(direction.shape)}"
            )
        return direction.expand(batch, -1), None
    if model.unembed is None or model.head is not None:
        raise ValueError(
            "direct logit attribution to tokens needs a linear path from the stream to the logits, but this "
            f"model has lm_head={model.cfg.lm_head!r}; pass a direction in the final stream ([d_model] float "
            "tensor) instead"
        )
    ids = torch.as_tensor(target)
    if ids.ndim == 0 or (ids.ndim == 1 and ids.shape[0] == 2 and not isinstance(target, torch.Tensor)):
        ids = ids.reshape(1, -1).expand(batch, -1)  # one token or one (correct, incorrect) pair for every row
    elif ids.ndim == 1:
        ids = ids[:, None]
    if ids.shape[0] != batch or ids.shape[1] not in (1, 2):
        raise ValueError(
            f"tokens_or_direction has shape {tuple(ids.shape)}; give a token id, a (correct, incorrect) "
            f"pair, [batch] ids or [batch, 2] pairs for a batch of {batch}"
        )
    for t in ids.flatten().tolist():
        check_index(t, d_vocab, "token id", f"a vocabulary of d_vocab={d_vocab}")
    w_u = model.unembed.weight.detach().float()  # [d_model, d_vocab]
    b_u = model.unembed.b_U.detach().float()
    direction, bias = w_u[:, ids[:, 0]].T, b_u[ids[:, 0]]  # [batch, d_model], [batch]
    if ids.shape[1] == 2:
        direction, bias = direction - w_u[:, ids[:, 1]].T, bias - b_u[ids[:, 1]]
    return direction, bias


def dla_names(model: nn.Module) -> list[str]:
    """Hooks :func:`direct_logit_attribution` needs (pass as ``names_filter``)."""
    names = decompose_names(model, model.cfg.n_layers, "pre")
    return names + (["ln_final.hook_scale"] if model.ln_final is not None else [])


@torch.no_grad()
def direct_logit_attribution(
    model: nn.Module,
    cache: ActivationCache,
    tokens_or_direction: int | tuple[int, int] | torch.Tensor,
    position: int | torch.Tensor,
    *,
    reduce: str = "mean",
) -> pd.DataFrame:
    """Each component's direct contribution to a logit or logit difference at ``position``.

    Args:
        cache: holds :func:`dla_names` ``(model)``.
        tokens_or_direction: a token id (its logit), a ``(correct, incorrect)`` pair (their logit
            difference), ``[batch]`` ids or ``[batch, 2]`` pairs per row, or a float direction ``[d_model]`` /
            ``[batch, d_model]`` in the space the unembedding reads (after the final norm).
        position: an index, or a ``[batch]`` tensor of indices.
        reduce: ``"mean"`` over the batch, or ``"none"`` for one row per batch item (a ``batch`` column).

    Returns:
        Columns ``component, layer, head, value``; the values sum to the logit (difference) computed from the
        logits, bias terms included.
    """
    if reduce not in ("mean", "none"):
        raise ValueError(f"reduce={reduce!r}; expected 'mean' or 'none'")
    names = dla_names(model)
    z_ok = [n for n in names if not (n.endswith("hook_result") and n.replace("result", "z") in cache)]
    require_hooks(cache, z_ok, "direct_logit_attribution", "names_filter=dla_names(model)")
    labels, parts = decompose_resid(model, cache, model.cfg.n_layers, "pre")
    parts = _at_position(parts, position)  # [component, batch, d_model]
    direction, bias = logit_direction(model, tokens_or_direction, parts.shape[1])
    direction = direction.to(parts.device)
    if model.ln_final is not None:
        scale = _at_position(cache["ln_final.hook_scale"][None], position)[0]  # [batch, 1]
        parts = linearise_norm(model, model.ln_final, scale, parts)
        if model.ln_final.b is not None:
            labels = labels + ["ln_final_bias"]
            norm_bias = model.ln_final.b.detach().to(parts.device, torch.float32).expand_as(parts[0])
            parts = torch.cat([parts, norm_bias[None]])
    values = torch.einsum("cbd,bd->cb", parts, direction)  # [component, batch]
    if bias is not None:
        labels = labels + ["unembed_bias"]
        values = torch.cat([values, bias[None].to(values.device)])
    table = component_table(labels)
    if reduce == "mean":
        table["value"] = values.mean(1).tolist()
        return table
    frames = [table.assign(batch=b, value=values[:, b].tolist()) for b in range(values.shape[1])]
    return pd.concat(frames, ignore_index=True)
