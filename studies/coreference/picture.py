"""The seed's picture: "The animal didn't cross the street because it was too tired / wide."

For the two sentences: the residual stream at "it" before and after each layer (its norm, and the twin
difference, which is exactly zero in a causal model because "tired"/"wide" comes later), the logit lens
there, and what the top heads write from each source token (per-source decomposition).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from interp.analysis import logit_lens_top, source_contributions
from interp.tokens import find_span
from studies.data.forward import has_lm_head, prepend_bos

SEED = (
    "The animal didn't cross the street because it was too tired.",
    "The animal didn't cross the street because it was too wide.",
)


@torch.no_grad()
def seed_picture(model, heads: Sequence[tuple[int, int]], bos: bool | None = None) -> dict:
    """Norms, twin differences, logit lens and source contributions for the seed pair.

    Returns a dict with ``tokens`` (both rows), ``positions`` (it, end), ``norms`` ``[2, n_layers + 1]``,
    ``twin_diff`` ``{role: [n_layers + 1]}``, ``lens`` (a frame or None), ``sources`` (a frame), and
    ``patterns`` ``{(layer, head): [2, pos, pos]}``.
    """
    tokens = model.to_tokens(list(SEED), prepend_bos=prepend_bos(model, bos), padding_side="right")
    ids, mask = tokens
    n = model.cfg.n_layers
    names = [f"blocks.{layer}.hook_resid_pre" for layer in range(n)] + [f"blocks.{n - 1}.hook_resid_post"]
    names += [f"blocks.{layer}.attn.hook_{leaf}" for layer, _ in heads for leaf in ("pattern", "v")]
    _, cache = model.run_with_cache(ids, mask, names_filter=sorted(set(names)), device="cpu")
    it = tokens.span_positions(*find_span(SEED[0], "it"), 0)[-1]
    end = int(mask[0].sum()) - 1 - (0 if model.cfg.causal else 1)  # the full stop (before [SEP])
    stream = torch.stack([cache[name] for name in names[: n + 1]]).float()  # [layer + 1, batch, pos, d]
    norms = stream[:, :, it].norm(dim=-1).T.numpy()  # [batch, layer + 1]
    twin_diff = {
        "it": (stream[:, 0, it] - stream[:, 1, it]).norm(dim=-1).numpy(),
        "end": (stream[:, 0, end] - stream[:, 1, end]).norm(dim=-1).numpy(),
    }
    lens = None
    if has_lm_head(model):
        lens = logit_lens_top(model, cache, it, k=3)
        lens = lens[lens["batch"] == 0].drop(columns="batch").reset_index(drop=True)
    str_tokens = [model.tokenizer.to_str_tokens(ids[b, : int(mask[b].sum())].cpu()) for b in range(2)]
    rows, patterns = [], {}
    for layer, head in heads:
        patterns[(layer, head)] = cache[f"blocks.{layer}.attn.hook_pattern"][:, head].float().numpy()
        for query_name, query in (("it", it), ("end", end)):
            contrib = source_contributions(model, cache, layer, head, query).float()  # [batch, key, d]
            size = contrib.norm(dim=-1)  # [batch, key]
            for b in range(2):
                share = size[b] / size[b].sum().clamp(min=1e-30)
                for key in torch.argsort(share, descending=True)[:3].tolist():
                    rows.append(
                        {
                            "sentence": ["tired", "wide"][b],
                            "layer": layer,
                            "head": head,
                            "query": query_name,
                            "source": str_tokens[b][key],
                            "source_position": key,
                            "norm": float(size[b, key]),
                            "share": float(share[key]),
                        }
                    )
    return {
        "tokens": str_tokens,
        "positions": {"it": it, "end": end},
        "norms": norms,
        "twin_diff": twin_diff,
        "lens": lens,
        "sources": pd.DataFrame(rows),
        "patterns": patterns,
        "max_twin_diff_it": float(np.max(twin_diff["it"])),
    }
