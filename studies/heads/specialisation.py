"""Do different heads track different relations: overlap and rank correlation of the scores across heads."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from interp.analysis.stats import bootstrap_mean_interval
from studies.heads.config import SCORES


def specialisation(scores: dict[str, torch.Tensor], top_k: int) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Top-k overlap (Jaccard) and Spearman correlation between scores across heads, and summary numbers."""
    names = [n for n in SCORES if n in scores]
    flat = pd.DataFrame({n: scores[n].flatten().numpy() for n in names})
    spearman = flat.rank().corr()
    tops = {n: set(np.argsort(-flat[n].to_numpy())[:top_k]) for n in names}
    jaccard = pd.DataFrame(
        [[len(tops[a] & tops[b]) / len(tops[a] | tops[b]) for b in names] for a in names],
        index=names,
        columns=names,
    )
    off = ~np.eye(len(names), dtype=bool)
    # A head "specialises" when its best score, as a percentile among all heads, beats its next by 0.25.
    pct = flat.rank(pct=True).to_numpy()  # [head, score]
    srt = np.sort(pct, axis=1)
    specialist = (srt[:, -1] - srt[:, -2]) > 0.25
    summary = {
        "mean_offdiag_spearman": float(spearman.to_numpy()[off].mean()),
        "max_offdiag_spearman": float(np.abs(spearman.to_numpy()[off]).max()),
        "mean_offdiag_jaccard": float(jaccard.to_numpy()[off].mean()),
        "heads_in_two_top_k": int(
            sum(sum(h in t for t in tops.values()) >= 2 for h in set().union(*tops.values()))
        ),
        "top_k_heads": int(len(set().union(*tops.values()))),
        "share_specialist": float(specialist.mean()),
    }
    return spearman, jaccard, summary


def coreference_holdout(items: torch.Tensor, n_boot: int, seed: int, schemas=None) -> dict:
    """Pick the best coreference head on the sentences of the even-numbered schemas, measure it on the others
    (95% bootstrap CI over schemas: sentences of one schema, such as a mirrored pair, stay on one side and are
    resampled together). Without ``schemas`` every sentence is its own."""
    schemas = np.arange(len(items)) if schemas is None else np.asarray(schemas)
    order = list(dict.fromkeys(schemas.tolist()))  # schemas in order of first appearance
    fitting = np.isin(schemas, order[0::2])
    fit, test = items[fitting].mean(0), items[~fitting]  # [layer, head], [item, layer, head]
    layer, head = divmod(int(fit.argmax()), fit.shape[1])
    values = test[:, layer, head].numpy()
    mean, low, high = bootstrap_mean_interval(values, n_boot, seed, groups=schemas[~fitting])
    right = (values > 0).astype(float)
    _, right_low, right_high = bootstrap_mean_interval(right, n_boot, seed, groups=schemas[~fitting])
    return {
        "n_fit": int(fitting.sum()),
        "n_test": int((~fitting).sum()),
        "layer": layer,
        "head": head,
        "fit": float(fit[layer, head]),
        "test": mean,
        "low": low,
        "high": high,
        "correct_share": float(right.mean()),
        "correct_low": right_low,
        "correct_high": right_high,
    }
