"""The trained models: how far shuffling a sentence moves each token's vector, with and without positions."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from interp import HookedTransformer
from interp.analysis.stats import bootstrap_mean_interval
from studies.position.config import PositionConfig
from studies.threads import single_thread

SENTENCES = (
    "The animal didn't cross the street because it was too tired.",
    "The dog chased the cat across the garden and over the fence.",
    "She gave her brother the book that he had asked for last week.",
    "Before the storm arrived, the farmers brought the cattle into the barn.",
    "The teacher who the students admired retired after forty years.",
    "A small boat drifted slowly toward the rocks near the harbour.",
    "He forgot his keys, so he climbed in through the kitchen window.",
    "Prices rose sharply after the factory closed and the workers left town.",
)


def remove_positions_hooks(model: HookedTransformer) -> list:
    """Forward hooks that take position out of a model without touching its weights.

    Additive positions: every position's vector becomes the mean over the positions in use, so whatever is
    common to all positions (BERT folds its token-type vector in here) stays. Rotary: the rotated queries and
    keys are replaced by the unrotated ones.
    """
    if model.cfg.positional in ("learned", "sinusoidal"):

        def flatten(pos: torch.Tensor, hook) -> torch.Tensor:
            return pos.mean(dim=1, keepdim=True).expand_as(pos).contiguous()  # [batch, pos, d_model]

        return [("hook_pos_embed", flatten)]
    if model.cfg.positional == "rotary":
        saved: dict[str, torch.Tensor] = {}

        def keep(x: torch.Tensor, hook) -> None:
            saved[hook.name.rsplit("_", 1)[-1]] = x  # "q" or "k"

        def unrotate(x: torch.Tensor, hook) -> torch.Tensor:
            return saved[hook.name.rsplit("_", 1)[-1]]

        return [
            (lambda n: n.endswith(("attn.hook_q", "attn.hook_k")), keep),
            (lambda n: n.endswith(("hook_rot_q", "hook_rot_k")), unrotate),
        ]
    return []


def shuffle_positions(special: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """A permutation ``[pos]`` that shuffles the ordinary tokens and leaves special tokens in place."""
    n = len(special)
    perm = torch.arange(n)
    movable = torch.nonzero(~special).flatten()
    perm[movable] = movable[torch.randperm(len(movable), generator=gen)]
    return perm


@torch.inference_mode()
def shuffle_change(
    model: HookedTransformer, texts: Sequence[str], n_shuffles: int, seed: int, fwd_hooks: list = ()
) -> np.ndarray:
    """1 - cos between each token's stream vector before and after shuffling, ``[layer + 1, n_tokens]``.

    Row 0 is the embedding stream (``blocks.0.hook_resid_pre``), row L + 1 the output of block L. A sentence
    and its shuffles run as one batch: they have the same length, so no padding enters.
    """
    gen = torch.Generator().manual_seed(seed)
    names = ["blocks.0.hook_resid_pre"] + [f"blocks.{i}.hook_resid_post" for i in range(model.cfg.n_layers)]
    columns = []
    for text in texts:
        enc = model.tokenizer.to_tokens(text)
        ids, special = enc.ids.to(model.device), enc.special[0]  # [1, pos], [pos]
        perms = [shuffle_positions(special, gen).to(model.device) for _ in range(n_shuffles)]
        batch = torch.cat([ids] + [ids[:, perm] for perm in perms])  # [1 + n_shuffles, pos]
        _, cache = model.run_with_cache(batch, names_filter=names, fwd_hooks=fwd_hooks)
        ordinary = ~special.to(model.device)
        for i, perm in enumerate(perms, start=1):
            layers = []
            for name in names:
                h = cache[name][0, perm].double()  # original vectors of the tokens now at each position
                h_shuf = cache[name][i].double()  # [pos, d_model]
                cos = torch.nn.functional.cosine_similarity(h, h_shuf, dim=-1)
                layers.append((1 - cos)[ordinary])
            columns.append(torch.stack(layers))  # [layer + 1, tokens]
    return torch.cat(columns, dim=1).cpu().numpy()


def sentence_labels(model: HookedTransformer, texts: Sequence[str], n_shuffles: int) -> np.ndarray:
    """``[n_tokens]``: the sentence each column of :func:`shuffle_change` comes from. The tokens of one sentence
    and its shuffles are not independent draws, so the intervals resample whole sentences."""
    counts = [int((~model.tokenizer.to_tokens(text).special[0]).sum()) for text in texts]
    return np.repeat(np.arange(len(texts)), [n_shuffles * c for c in counts])


@single_thread()
def trained_table(model, name: str, cfg: PositionConfig, seed: int) -> pd.DataFrame:
    """Per layer: mean 1 - cos under shuffling, as trained and with positions removed, with 95% intervals that
    resample sentences (a sentence's tokens and shuffles together)."""
    rows = []
    for variant, hooks in (("as trained", []), ("positions removed", remove_positions_hooks(model))):
        change = shuffle_change(model, SENTENCES, cfg.n_shuffles, seed, fwd_hooks=hooks)
        sentences = sentence_labels(model, SENTENCES, cfg.n_shuffles)
        for layer, values in enumerate(change):
            mean, low, high = bootstrap_mean_interval(values, cfg.n_boot, seed + layer, groups=sentences)
            rows.append(
                {
                    "model": name,
                    "variant": variant,
                    "stream": "embed" if layer == 0 else f"after block {layer - 1}",
                    "depth": layer,
                    "one_minus_cos": mean,
                    "low": low,
                    "high": high,
                    "max": float(values.max()),
                    "tokens": len(values),
                }
            )
    return pd.DataFrame(rows)
