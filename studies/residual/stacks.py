"""Seeded random deep stacks: the gradient at the first block, with and without skip paths and norms.

Every stack is built in float64 from its seed, so the gradients that underflow float32 are still measured;
hooks cut the skip path or the norms without touching the weights.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from tqdm import tqdm

from interp import HookedTransformer, TransformerConfig
from interp.analysis.stats import mean_interval
from studies.residual.config import SETTINGS, ResidualConfig
from studies.threads import single_thread


def stack(cfg: ResidualConfig, depth: int, placement: str, seed: int) -> HookedTransformer:
    """A seeded random stack of ``depth`` blocks, LayerNorm, learned positions, in float64."""
    tcfg = TransformerConfig(
        n_layers=depth,
        d_model=cfg.d_model,
        n_heads=cfg.n_heads,
        d_vocab=cfg.d_vocab,
        n_ctx=cfg.seq_len,
        norm_placement=placement,
        seed=seed,
    )
    return HookedTransformer(tcfg).double()


def cut_skip_hooks() -> list:
    """Forward hooks that remove the identity path around every sublayer, pre-norm or post-norm.

    The block adds a sublayer's output to the stream it read (``resid_pre + attn_out``, ``resid_mid +
    mlp_out``); returning ``attn_out - resid_pre`` and ``mlp_out - resid_mid`` leaves the sublayer's output
    alone in that sum (then normed, in post-norm blocks), and the gradient through the identity cancels.
    """
    stream: dict[int, torch.Tensor] = {}

    def keep(x: torch.Tensor, hook) -> None:
        stream[hook.layer] = x

    def cut(x: torch.Tensor, hook) -> torch.Tensor:
        return x - stream[hook.layer]

    return [
        ("blocks.*.hook_resid_pre", keep),
        ("blocks.*.hook_attn_out", cut),
        ("blocks.*.hook_resid_mid", keep),
        ("blocks.*.hook_mlp_out", cut),
    ]


def remove_norm_hooks() -> list:
    """Forward hooks that turn every LayerNorm into plain centring: each ``hook_scale`` becomes 1."""
    return [(lambda name: name.endswith("hook_scale"), lambda x, hook: torch.ones_like(x))]


def first_layer_gradient(
    model: HookedTransformer,
    tokens: torch.Tensor,
    targets: torch.Tensor,
    *,
    residual: bool,
    norms: bool = True,
) -> dict[str, float]:
    """Gradient norms at the first and the last block's input, and the token diversity of the final stream.

    Returns:
        ``grad_first`` and ``grad_last`` (mean norm over tokens of dL/d stream), and ``diversity``:
        |x - mean over positions of x| / |x| for the final stream (0 when every position holds the same
        vector, the rank collapse of deep attention without skip paths).
    """
    saved: dict[str, torch.Tensor] = {}

    def keep(x: torch.Tensor, hook) -> None:
        saved[hook.name] = x  # the stream tensor itself, to differentiate the loss against

    n = model.cfg.n_layers
    last, final = f"blocks.{n - 1}.hook_resid_pre", f"blocks.{n - 1}.hook_resid_post"
    # The editing hooks come first so that the captured streams are the ones the blocks use.
    fwd = ([] if norms else remove_norm_hooks()) + ([] if residual else cut_skip_hooks())
    with model.hooks([*fwd, ("blocks.0.hook_resid_pre", keep), (last, keep), (final, keep)]):
        logits = model(tokens)  # [batch, pos, d_vocab]
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    g_first, g_last = torch.autograd.grad(loss, [saved["blocks.0.hook_resid_pre"], saved[last]])
    x = saved[final].detach()  # [batch, pos, d_model]
    norm = float(x.norm())
    diversity = float((x - x.mean(1, keepdim=True)).norm()) / norm if norm > 0 else 0.0
    return {
        "grad_first": float(g_first.norm(dim=-1).mean()),
        "grad_last": float(g_last.norm(dim=-1).mean()),
        "diversity": diversity,
    }


def _log10(x: float) -> float:
    return math.log10(max(x, 1e-300))


def gradient_table(cfg: ResidualConfig, seed: int, quiet: bool = True) -> pd.DataFrame:
    """One row per (setting, depth): means over seeds of log10 gradient norms, ratio and diversity.

    Gradients below 1e-300 (they underflow even in float64) count as 1e-300. Settings that share a norm
    placement differ only in hooks, so each (placement, depth, seed) stack is built once and serves them all.
    """
    measured: dict[tuple[str, int], list[dict[str, float]]] = {}
    placements = dict.fromkeys(placement for _, placement, _, _ in SETTINGS)  # in order, once each
    stacks = [(p, d, s) for p in placements for d in cfg.depths for s in range(cfg.seeds)]
    for placement, depth, s in tqdm(stacks, desc="random stacks", disable=quiet):
        with single_thread():
            model = stack(cfg, depth, placement, seed * 1000 + s)
            gen = torch.Generator().manual_seed(seed * 1000 + s)
            tokens = torch.randint(0, cfg.d_vocab, (cfg.batch, cfg.seq_len), generator=gen)
            targets = torch.randint(0, cfg.d_vocab, (cfg.batch, cfg.seq_len), generator=gen)
            for label, setting_placement, norms, residual in SETTINGS:
                if setting_placement == placement:
                    out = first_layer_gradient(model, tokens, targets, residual=residual, norms=norms)
                    measured.setdefault((label, depth), []).append(out)
    rows = []
    for label, placement, norms, residual in SETTINGS:
        for depth in cfg.depths:
            outs = measured[(label, depth)]
            firsts = [_log10(o["grad_first"]) for o in outs]
            ratios = [_log10(o["grad_first"]) - _log10(o["grad_last"]) for o in outs]
            ratio, ratio_low, ratio_high = mean_interval(ratios)
            rows.append(
                {
                    "setting": label,
                    "placement": placement,
                    "norms": norms,
                    "residual": residual,
                    "depth": depth,
                    "log10_grad_first": float(np.mean(firsts)),
                    "log10_ratio_first_to_last": ratio,
                    "log10_ratio_low": ratio_low,
                    "log10_ratio_high": ratio_high,
                    "final_token_diversity": float(np.mean([o["diversity"] for o in outs])),
                    "seeds": cfg.seeds,
                }
            )
    return pd.DataFrame(rows)


@torch.no_grad()
def stream_sum_error(model: HookedTransformer, tokens: torch.Tensor) -> float:
    """Largest |final stream - (embeddings + every attention and MLP write)| in a pre-norm model."""
    if model.cfg.norm_placement != "pre":
        raise ValueError("the stream is a plain sum of writes only in pre-norm models")
    n = model.cfg.n_layers
    _, cache = model.run_with_cache(tokens)
    total = cache["hook_embed"] + (cache["hook_pos_embed"] if "hook_pos_embed" in cache else 0)
    for layer in range(n):
        total = total + cache["attn_out", layer] + cache["mlp_out", layer]
    return float((cache["resid_post", n - 1] - total).abs().max())
