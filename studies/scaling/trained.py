"""The trained models: how widely their real attention scores spread within a query's row, per layer."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
import torch

from interp.analysis.stats import mean_interval
from studies.threads import single_thread

SENTENCES = (
    "The animal didn't cross the street because it was too tired.",
    "The animal didn't cross the street because it was too wide.",
    "When the committee finally met in the spring, it voted to close the old library.",
    "She poured the water from the bottle into the cup until it was full.",
    "Every morning the baker opens the shop before the sun rises over the hills.",
    "The trophy didn't fit into the brown suitcase because it was too big.",
    "Rivers carry sand and stones down to the sea, where they settle into new land.",
    "The program crashed because the file it tried to read had been deleted.",
)


@single_thread()
@torch.inference_mode()
def trained_score_spread(model, texts: Sequence[str]) -> pd.DataFrame:
    """Per layer: within-row spread of the real attention scores, before and after the division.

    Rows of a query with a single allowed key (the first query of a causal model) carry no spread and are
    left out. Each text runs alone, so no padding enters the statistics.
    """
    d_head = model.cfg.d_head
    acc: dict[int, dict[str, list[float]]] = {}
    for text in texts:
        tokens = model.tokenizer.to_tokens(text).ids.to(model.device)  # [1, pos]
        _, cache = model.run_with_cache(tokens, names_filter="blocks.*.attn.hook_attn_scores")
        for layer in range(model.cfg.n_layers):
            scores = cache["attn_scores", layer][0].double()  # [head, query, key]
            allowed = torch.isfinite(scores)
            n_allowed = allowed.sum(-1)  # [head, query]
            keep = n_allowed >= 2
            s = scores.masked_fill(~allowed, 0.0)
            mean = s.sum(-1) / n_allowed
            var = ((s - mean[..., None]).pow(2) * allowed).sum(-1) / (n_allowed - 1).clamp_min(1)
            std = var.sqrt()[keep]  # [rows]
            p = torch.softmax(scores, dim=-1)
            p_raw = torch.softmax(scores * math.sqrt(d_head), dim=-1)  # the pattern without the division
            ent = -(p * p.clamp_min(1e-300).log()).sum(-1)[keep]
            ent_raw = -(p_raw * p_raw.clamp_min(1e-300).log()).sum(-1)[keep]
            uniform = n_allowed[keep].double().log()
            a = acc.setdefault(layer, {k: [] for k in ("std", "ent", "ent_raw", "max", "max_raw", "uni")})
            a["std"].append(std)
            a["ent"].append(ent)
            a["ent_raw"].append(ent_raw)
            a["max"].append(p.max(-1).values[keep])
            a["max_raw"].append(p_raw.max(-1).values[keep])
            a["uni"].append(uniform)
    rows = []
    for layer, a in acc.items():
        cat = {k: torch.cat(v).numpy() for k, v in a.items()}
        std, std_low, std_high = mean_interval(cat["std"])
        rows.append(
            {
                "layer": layer,
                "score_row_std": std,
                "score_row_std_low": std_low,
                "score_row_std_high": std_high,
                "qk_row_std": std * math.sqrt(d_head),
                "sqrt_d_head": math.sqrt(d_head),
                "entropy": float(cat["ent"].mean()),
                "entropy_unscaled": float(cat["ent_raw"].mean()),
                "uniform_entropy": float(cat["uni"].mean()),
                "max_weight": float(cat["max"].mean()),
                "max_weight_unscaled": float(cat["max_raw"].mean()),
                "rows": len(cat["std"]),
            }
        )
    return pd.DataFrame(rows)
