"""The features study's measurements: dictionary quality, features that separate the twins, and their effect.

Every function here takes trained SAEs and twin pairs and returns plain tables; intervals are 95%: bootstrap
percentile intervals (2,000 resamples, seeded) over held-out folds or over twin pairs, Wilson intervals for
fractions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from interp.analysis import Batch
from interp.analysis.stats import bootstrap_mean_interval, wilson_interval
from interp.sae import SAE
from interp.sae.evaluate import evaluate
from interp.sae.feature_patching import feature_attribution, patch_features

FEMININE = {" she", " her", " herself", " hers"}
MASCULINE = {" he", " his", " him", " himself"}
QUALITY = (
    "l0",
    "explained_variance",
    "mse",
    "cosine",
    "ce_recovered_zero",
    "ce_recovered_mean",
    "kl",
    "dead_fraction",
)


def bootstrap_ci(values: Sequence[float], seed: int, n: int = 2000) -> tuple[float, float]:
    """95% interval of the mean: percentile bootstrap over ``n`` resamples of ``values``, the t-interval below 10
    values (:func:`bootstrap_mean_interval`); NaN for fewer than two."""
    if len(values) < 2:
        return (float("nan"), float("nan"))
    return bootstrap_mean_interval(np.asarray(values, dtype=float), n, seed)[1:]


def wilson(successes: int, n: int) -> tuple[float, float]:
    """95% Wilson interval of ``successes`` out of ``n``; NaN with no trials."""
    return wilson_interval(successes, n) if n else (float("nan"), float("nan"))


def quality(model: Any, sae: SAE, windows: list, folds: int, seed: int) -> pd.DataFrame:
    """:func:`interp.sae.evaluate` on ``folds`` disjoint parts of the held-out windows: mean and interval."""
    rows = [(ids[m.bool()], m[m.bool()]) for batch in windows for ids, m in zip(*batch, strict=True)]
    frames = []
    for i in range(folds):
        part = rows[i::folds]
        if not part:
            continue
        ids = torch.nn.utils.rnn.pad_sequence([r[0] for r in part], batch_first=True)
        mask = torch.nn.utils.rnn.pad_sequence([r[1] for r in part], batch_first=True)
        frames.append(evaluate(model, sae, ids, mask, batch_size=16, skip_first=1))
    table = pd.concat(frames, ignore_index=True)
    out = []
    for metric in QUALITY:
        values = table[metric].to_numpy(dtype=float)
        lo, hi = bootstrap_ci(values, seed)
        out.append(
            {
                "metric": metric,
                "value": float(values.mean()),
                "ci_low": lo,
                "ci_high": hi,
                "folds": len(values),
            }
        )
    return pd.DataFrame(out)


@torch.no_grad()
def densities(sae: SAE, rows: torch.Tensor) -> np.ndarray:
    """Each latent's firing frequency over ``rows [n, d_in]``."""
    fired = torch.zeros(sae.d_sae, dtype=torch.float64)
    for chunk in rows.split(4096):
        fired += (sae.encode(chunk) > 0).sum(0).double()
    return (fired / max(1, rows.shape[0])).numpy()


def gender_pairs(pairs: Sequence, items_by_id: dict) -> list[tuple[Any, int]]:
    """Twin pairs whose answers are a feminine and a masculine pronoun, with the row of the feminine twin."""
    out = []
    for pair in pairs:
        targets = [items_by_id[i].target for i in pair.ids]
        if targets[0] in FEMININE and targets[1] in MASCULINE:
            out.append((pair, 0))
        elif targets[1] in FEMININE and targets[0] in MASCULINE:
            out.append((pair, 1))
    return out


@torch.no_grad()
def twin_activations(model: Any, sae: SAE, pairs: Sequence[tuple[Any, int]]) -> np.ndarray:
    """``[pairs, 2, d_sae]``: each feature at the final position of the feminine twin (0) and the masculine (1)."""
    name = f"{sae.hook_name_out}.hook_sae_acts_post"
    rows = []
    with model.saes([sae], use_error_term=True):
        for pair, fem in pairs:
            acts = model.run_with_cache(pair.clean, names_filter=name)[1][name][:, -1]  # [2, d_sae]
            rows.append(torch.stack([acts[fem], acts[1 - fem]]).double().numpy())
    return np.stack(rows)


def separating_features(acts: np.ndarray, select: np.ndarray, top: int, seed: int) -> pd.DataFrame:
    """Features ranked by selectivity on the selection pairs, tested on the rest.

    Selectivity is the mean feminine-minus-masculine difference over the root mean square of the feature's
    activations on both twins: about ``sqrt(2)`` for a feature that fires on one twin only and does not depend on
    which pair, near 0 for one that fires alike on both. Features active in fewer than two selection pairs are
    not ranked.

    Returns one row per chosen feature: ``feature, direction (feminine | masculine), selectivity, mean_test``
    (the held-out mean difference, with a bootstrap interval) and ``sign_agreement`` (held-out pairs whose
    difference has the selected sign, Wilson interval; a pair where the feature is silent counts against).
    """
    diffs = acts[:, 0] - acts[:, 1]  # [pairs, d_sae]
    sel, test = diffs[select], diffs[~select]
    rms = np.sqrt((acts[select] ** 2).mean(axis=(0, 1))) + 1e-12
    score = sel.mean(0) / rms
    score[(acts[select] != 0).any(1).sum(0) < 2] = 0.0
    order = np.argsort(-np.abs(score), kind="stable")[:top]
    rows = []
    for f in order:
        sign = 1.0 if score[f] > 0 else -1.0
        agree = int(((test[:, f] * sign) > 0).sum())
        lo, hi = bootstrap_ci(test[:, f], seed)
        w_lo, w_hi = wilson(agree, len(test))
        rows.append(
            {
                "feature": int(f),
                "direction": "feminine" if sign > 0 else "masculine",
                "selectivity": float(score[f]),
                "mean_test": float(test[:, f].mean()),
                "mean_test_ci_low": lo,
                "mean_test_ci_high": hi,
                "sign_agreement": agree / max(1, len(test)),
                "sign_agreement_ci_low": w_lo,
                "sign_agreement_ci_high": w_hi,
                "active_test_pairs": int((acts[~select][:, :, f] != 0).any(1).sum()),
                "n_test": len(test),
            }
        )
    return pd.DataFrame(rows)


def matched_random(features: Sequence[int], density: np.ndarray, draws: int, seed: int) -> list[list[int]]:
    """``draws`` sets of random features, one per chosen feature, each of density within a factor 2 of it."""
    rng = np.random.default_rng(seed)
    chosen = set(features)
    pools = []
    for f in features:
        d = density[f]
        pool = [
            g
            for g in range(len(density))
            if g not in chosen and d / 2 <= density[g] <= 2 * d and density[g] > 0
        ]
        if not pool:
            pool = [int(g) for g in np.argsort(np.abs(density - d)) if int(g) not in chosen][:20]
        pools.append(pool)
    return [[int(rng.choice(pool)) for pool in pools] for _ in range(draws)]


@torch.no_grad()
def ablation_effects(model: Any, sae: SAE, pairs: Sequence[tuple[Any, int]], sets: Sequence[Sequence[int]]):
    """``[pairs, sets]``: the change of each pair's metric when a set of features is zeroed at the final
    position of both twins (error term kept), one batched forward per pair."""
    name = f"{sae.hook_name_out}.hook_sae_acts_post"
    n = len(sets)
    mask = torch.zeros(n, sae.d_sae, dtype=torch.bool)
    for i, s in enumerate(sets):
        mask[i, list(s)] = True
    out = np.zeros((len(pairs), n))
    with model.saes([sae], use_error_term=True):
        for p, (pair, _) in enumerate(pairs):
            batch = Batch(pair.clean)
            base = float(pair.metric(model(pair.clean), batch).mean())

            def zero(act: torch.Tensor, hook) -> torch.Tensor:
                act = act.unflatten(0, (n, 2)).clone()  # [set, twin, pos, d_sae]
                act[:, :, -1] = act[:, :, -1].masked_fill(mask[:, None, :].to(act.device), 0.0)
                return act.flatten(0, 1)

            logits = model.run_with_hooks(pair.clean.repeat(n, 1), fwd_hooks=[(name, zero)])
            out[p] = [float(pair.metric(part, batch).mean()) - base for part in logits.split(2)]
    return out


def attribution_check(model: Any, sae: SAE, pairs: Sequence[tuple[Any, int]], top: int):
    """Attribution to every feature and the error node, pooled over pairs as sum(delta) / sum(clean - corrupt),
    and exact patching of the ``top`` features by pooled attribution (each alone, then all together)."""
    deltas, error, gap = np.zeros(sae.d_sae), 0.0, 0.0
    frames = []
    for pair, _ in pairs:
        frame = feature_attribution(model, sae, pair.clean, pair.corrupt, pair.metric)
        frames.append(frame)
        deltas += frame["delta"].to_numpy()[:-1]
        error += float(frame["delta"].iloc[-1])
        gap += frame.attrs["clean_metric"] - frame.attrs["corrupt_metric"]
    order = [int(f) for f in np.argsort(-np.abs(deltas), kind="stable")[:top]]
    sets = [[f] for f in order] + [order]
    patched = np.zeros(len(sets))
    for (pair, _), frame in zip(pairs, frames, strict=True):
        values = patch_features(model, sae, pair.clean, pair.corrupt, pair.metric, sets)
        patched += np.array(values) - frame.attrs["corrupt_metric"]
    rows = [
        {"node": f"feature {f}", "attribution": deltas[f] / gap, "patched": patched[i] / gap}
        for i, f in enumerate(order)
    ]
    rows.append(
        {
            "node": f"top {top} together",
            "attribution": deltas[order].sum() / gap,
            "patched": patched[-1] / gap,
        }
    )
    rows.append({"node": "error", "attribution": error / gap, "patched": float("nan")})
    rows.append({"node": "all features", "attribution": deltas.sum() / gap, "patched": float("nan")})
    return pd.DataFrame(rows), gap
