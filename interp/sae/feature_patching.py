"""Attributing a metric to an SAE's features and its error node, and checking the estimate by exact patching.

With the SAE spliced in with its error term, the activation at the hook is exactly ``recons + error``, and
``recons`` is linear in the features. Attribution patching (one forward and one backward pass of the corrupt
run) estimates the effect of patching each feature from the clean run as
``sum over positions of (a_clean - a_corrupt) * d metric / d a``, and the error node's the same way; for a
linear decoder the estimates add up to the estimate for the whole activation. :func:`patch_features` measures
the real effect of patching a set of features, for :func:`feature_attribution`'s strongest ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import torch

from interp.analysis.conditions import run_conditions
from interp.analysis.effect import normalised_effect
from interp.analysis.metric import Metric, check_signature, mean_metric, run_batches
from interp.sae.module import SAE


def _names(sae: SAE) -> tuple[str, str]:
    return f"{sae.hook_name_out}.hook_sae_acts_post", f"{sae.hook_name_out}.hook_sae_error"


def feature_attribution(
    model: Any,
    sae: SAE,
    clean_tokens: torch.Tensor,
    corrupt_tokens: torch.Tensor,
    metric: Metric,
    *,
    attention_mask: torch.Tensor | None = None,
    labels: Mapping[str, torch.Tensor] | None = None,
) -> pd.DataFrame:
    """Attribution-patching estimates for every feature of ``sae`` and for its error node.

    ``metric(logits, batch) -> [batch]`` is averaged over the rows (see :func:`~interp.analysis.patch`, whose
    ``labels`` this takes too).

    Returns:
        One row per feature (``node="feature"``, ``feature``, ``delta``) and a last row ``node="error"``; ``value``
        is ``delta / (clean - corrupt)``. ``frame.attrs`` holds ``clean_metric`` and ``corrupt_metric``.
    """
    check_signature(metric)
    clean_run, corrupt_run = run_batches(clean_tokens, corrupt_tokens, attention_mask, labels)
    acts_name, error_name = _names(sae)
    with model.saes([sae], use_error_term=True):
        with torch.no_grad():
            clean_logits, cache = model.run_with_cache(
                clean_tokens, attention_mask, names_filter=[acts_name, error_name]
            )
            clean = float(mean_metric(metric, clean_logits, clean_run, "on the clean run"))
        kept: dict[str, torch.Tensor] = {}

        def keep(act: torch.Tensor, hook) -> torch.Tensor:
            act = act.detach().requires_grad_(True)
            kept[hook.name] = act
            return act

        with torch.enable_grad():
            logits = model.run_with_hooks(
                corrupt_tokens, attention_mask, fwd_hooks=[(acts_name, keep), (error_name, keep)]
            )
            value = mean_metric(metric, logits, corrupt_run, "on the corrupt run")
            grads = torch.autograd.grad(value, [kept[acts_name], kept[error_name]])
    diff_a = cache[acts_name] - kept[acts_name].detach()
    diff_e = cache[error_name] - kept[error_name].detach()
    per_feature = (diff_a * grads[0]).flatten(0, -2).sum(0).double()  # [d_sae]
    error = float((diff_e * grads[1]).sum())
    corrupt = float(value.detach())
    frame = pd.DataFrame(
        {
            "node": ["feature"] * sae.d_sae + ["error"],
            "feature": pd.array([*range(sae.d_sae), None], dtype="Int64"),
            "delta": [*per_feature.tolist(), error],
        }
    )
    frame["value"] = normalised_effect(frame["delta"], clean, corrupt, what="the normalised attribution")
    frame.attrs.update(clean_metric=clean, corrupt_metric=corrupt)
    return frame


@torch.no_grad()
def patch_features(
    model: Any,
    sae: SAE,
    clean_tokens: torch.Tensor,
    corrupt_tokens: torch.Tensor,
    metric: Metric,
    feature_sets: Sequence[Sequence[int]],
    *,
    attention_mask: torch.Tensor | None = None,
    labels: Mapping[str, torch.Tensor] | None = None,
) -> list[float]:
    """The metric of the corrupt run with each set of features taken from the clean run (at every position,
    the error term of the corrupt run kept), all sets in one batched forward pass; the metric is averaged over
    the rows, as in :func:`feature_attribution`."""
    check_signature(metric)
    _, corrupt_run = run_batches(clean_tokens, corrupt_tokens, attention_mask, labels)
    acts_name, _ = _names(sae)
    with model.saes([sae], use_error_term=True):
        _, cache = model.run_with_cache(clean_tokens, attention_mask, names_filter=acts_name)
        source = cache[acts_name]  # [batch, pos, d_sae]
        n = len(feature_sets)
        mask = torch.zeros(n, sae.d_sae, dtype=torch.bool)
        for i, features in enumerate(feature_sets):
            mask[i, list(features)] = True

        def take(act: torch.Tensor, hook) -> torch.Tensor:
            # act: [set, batch, pos, d_sae]
            m = mask.to(act.device)[:, None, None, :]
            return torch.where(m, source.to(act.device)[None], act)

        parts = run_conditions(
            model, corrupt_tokens, [(acts_name, take)], copies=n, attention_mask=attention_mask
        )
    return [
        float(mean_metric(metric, part, corrupt_run, f"with the features {list(features)} patched"))
        for part, features in zip(parts, feature_sets, strict=True)
    ]
