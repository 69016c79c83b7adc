"""Testing a graph by intervention: zero its top features and measure the target, frozen and free.

*Frozen* (patterns, norms and every other feature held at their values on the prompt) the change of the target
must equal minus the sum of the ablated features' direct edges to it: the graph's linear prediction, exactly.
*Free* (the replacement model rerun, error terms kept, with the features clamped to zero) adds every indirect
effect through attention, norms and later features; it is reported beside the prediction. The baseline is
sets of the same size of other active features of the prompt, each matched to a top feature by activation
(drawn from the ``pool`` active features nearest in activation to it, at any layer and position but 0).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from interp.circuits.features import FeatureEdit, intervene
from interp.circuits.features.targets import token_id
from studies.attribution.prompts import Prompt

Triple = tuple[int, int, int]  # (layer, position, feature)


@torch.no_grad()
def active_features(model: Any, tc: Any, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every active feature of the prompt from position 1 on: ``[n, 3]`` (layer, position, feature) and
    ``[n]`` activations, as the model computes them (error terms kept, so each layer reads the real stream)."""
    names = [f"{tc.output_hook(layer)}.hook_sae_acts_post" for layer in tc.layers]
    with model.transcoders(tc, error=True):
        _, cache = model.run_with_cache(tokens[None].to(model.embed.W_E.device), names_filter=names)
    triples, values = [], []
    for layer, name in zip(tc.layers, names, strict=True):
        acts = cache[name][0, 1:].float().cpu()  # [pos - 1, d_transcoder]
        where = acts.nonzero()
        triples.append(torch.stack([torch.full((len(where),), layer), where[:, 0] + 1, where[:, 1]], 1))
        values.append(acts[where[:, 0], where[:, 1]])
    return torch.cat(triples), torch.cat(values)


def matched_random(
    top: list[Triple], active: torch.Tensor, values: torch.Tensor, draws: int, pool: int, seed: int
) -> list[list[Triple]]:
    """``draws`` sets, each with one feature per top feature, picked among the ``pool`` other active features
    nearest to it in activation (distinct within a set)."""
    rng = np.random.default_rng(seed)
    keys = [tuple(t) for t in active.tolist()]
    value_of = dict(zip(keys, values.tolist(), strict=True))
    others = [k for k in keys if k not in set(top)]
    if len(others) < len(top):
        raise ValueError(
            f"the prompt has {len(others)} other active features; {len(top)} are needed to match"
        )
    other_values = np.array([value_of[k] for k in others])
    sets = []
    for _ in range(draws):
        chosen: list[Triple] = []
        for t in top:
            order = np.argsort(np.abs(other_values - value_of.get(t, 0.0)), kind="stable")
            near = [others[i] for i in order if others[i] not in chosen][:pool]
            chosen.append(near[int(rng.integers(len(near)))])
        sets.append(chosen)
    return sets


def target_value(model: Any, logits: torch.Tensor, prompt: Prompt) -> float:
    """The logit difference ``a - b`` at the last position of ``logits [pos, d_vocab]``."""
    a, b = (token_id(model, t) for t in prompt.target)
    return float(logits[-1, a] - logits[-1, b])


def ablation(model: Any, tc: Any, prompt: Prompt, features: list[Triple]) -> dict[str, float]:
    """The change of the target when ``features`` are zeroed, frozen and free."""
    edits = [FeatureEdit(layer, feature, position, scale=0.0) for layer, position, feature in features]
    out = {}
    for mode, constrained in (("frozen", True), ("free", False)):
        base = target_value(
            model, intervene(model, tc, prompt.tokens, [], constrained=constrained).logits, prompt
        )
        cut = target_value(
            model, intervene(model, tc, prompt.tokens, edits, constrained=constrained).logits, prompt
        )
        out[mode] = cut - base
        out[f"{mode}_clean"] = base
    return out
