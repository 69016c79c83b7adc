"""The Monte Carlo: unit-variance queries and keys at every d_k, their dot products, and the softmax of them.

Every draw depends only on the seed, d_k and the chunk of queries, so the numbers are the same on any machine
with the same torch; the softmax statistics are computed per query in float64.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from interp.analysis.stats import mean_interval
from studies.scaling.config import ScalingConfig
from studies.threads import single_thread


def softmax_stats(
    scores: torch.Tensor, keys: torch.Tensor, scale: float, g: torch.Tensor
) -> dict[str, np.ndarray]:
    """Per-query statistics of ``softmax(scores / scale)``.

    Args:
        scores: Raw dot products q·k, ``[query, key]`` (float64).
        keys: The keys, ``[query, key, d_k]``, for the gradient with respect to the query.
        scale: What the scores are divided by (1 for unscaled, sqrt(d_k) for scaled).
        g: A unit-norm read-out of the pattern per query, ``[query, key]``.

    Returns:
        ``max_weight``, ``entropy`` (nats), ``jacobian_norm`` (Frobenius norm of d p / d s, where s are the
        scores fed to the softmax) and ``grad_q_norm`` (norm of d (g·p) / d q), each ``[query]``.
    """
    p = torch.softmax(scores / scale, dim=-1)  # [query, key]
    entropy = -(p * torch.log(p.clamp_min(1e-300))).sum(-1)
    # J = diag(p) - p p^T, so ||J||_F^2 = sum p^2 - 2 sum p^3 + (sum p^2)^2.
    s2, s3 = p.pow(2).sum(-1), p.pow(3).sum(-1)
    jacobian_norm = (s2 - 2 * s3 + s2.pow(2)).clamp_min(0).sqrt()
    jg = p * (g - (p * g).sum(-1, keepdim=True))  # J g, [query, key]
    grad_q = torch.einsum("qk,qkd->qd", jg, keys) / scale  # d (g·p) / d q, [query, d_k]
    return {
        "max_weight": p.max(-1).values.numpy(),
        "entropy": entropy.numpy(),
        "jacobian_norm": jacobian_norm.numpy(),
        "grad_q_norm": grad_q.norm(dim=-1).numpy(),
    }


def draw(d_k: int, n_queries: int, n_keys: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Unit-variance queries ``[query, d_k]``, keys ``[query, key, d_k]`` and read-outs ``[query, key]``."""
    gen = torch.Generator().manual_seed(seed * 100_003 + d_k)  # a stream per (seed, d_k)
    q = torch.randn(n_queries, d_k, generator=gen, dtype=torch.float64)
    k = torch.randn(n_queries, n_keys, d_k, generator=gen, dtype=torch.float64)
    g = torch.randn(n_queries, n_keys, generator=gen, dtype=torch.float64)
    return q, k, g / g.norm(dim=-1, keepdim=True)


def bootstrap_variance(scores: np.ndarray, n_boot: int, seed: int) -> tuple[float, float]:
    """95% bootstrap interval of the variance of ``scores [query, key]``, resampling whole queries."""
    rng = np.random.default_rng(seed)
    sums, sq = scores.sum(1), (scores**2).sum(1)  # [query]
    n = scores.size
    idx = rng.integers(0, len(sums), size=(n_boot, len(sums)))
    mean = sums[idx].sum(1) / n
    var = (sq[idx].sum(1) / n - mean**2) * n / (n - 1)
    low, high = np.percentile(var, [2.5, 97.5])
    return float(low), float(high)


@single_thread()
def monte_carlo(cfg: ScalingConfig, seed: int, quiet: bool = True, chunk: int = 250) -> pd.DataFrame:
    """One row per (d_k, scaled): variance of q·k with its interval and the softmax statistics.

    Queries are drawn in chunks of ``chunk`` so that memory stays small at d_k = 1024; the draws depend only
    on ``seed``, ``d_k`` and the chunk index.
    """
    rows = []
    for d_k in tqdm(cfg.d_ks, desc="d_k", disable=quiet):
        score_parts: list[np.ndarray] = []
        stat_parts: dict[bool, list[dict[str, np.ndarray]]] = {False: [], True: []}
        for i, start in enumerate(range(0, cfg.n_queries, chunk)):
            n = min(chunk, cfg.n_queries - start)
            q, k, g = draw(d_k, n, cfg.n_keys, seed * 1000 + i)
            scores = torch.einsum("qd,qkd->qk", q, k)  # [query, key]
            score_parts.append(scores.numpy())
            for scaled in (False, True):
                stat_parts[scaled].append(softmax_stats(scores, k, math.sqrt(d_k) if scaled else 1.0, g))
        scores = np.concatenate(score_parts)  # [query, key]
        var = float(scores.var(ddof=1))
        var_low, var_high = bootstrap_variance(scores, cfg.n_boot, seed + d_k)
        for scaled in (False, True):
            stats = {
                name: np.concatenate([p[name] for p in stat_parts[scaled]]) for name in stat_parts[scaled][0]
            }
            row = {
                "d_k": d_k,
                "scaled": scaled,
                "var_qk": var,
                "var_qk_low": var_low,
                "var_qk_high": var_high,
                "var_ratio": var / d_k,
            }
            for name, values in stats.items():
                m, low, high = mean_interval(values)
                row.update(
                    {name: m, f"{name}_low": low, f"{name}_high": high, f"{name}_median": np.median(values)}
                )
            row["frac_max_weight_gt_0.99"] = float(np.mean(stats["max_weight"] > 0.99))
            row["frac_jacobian_lt_1e-3"] = float(np.mean(stats["jacobian_norm"] < 1e-3))
            rows.append(row)
    return pd.DataFrame(rows)


def standard_normal_baseline(cfg: ScalingConfig, seed: int) -> dict[str, float]:
    """Softmax statistics of i.i.d. N(0, 1) scores: what the scaled case should reproduce at every d_k."""
    gen = torch.Generator().manual_seed(seed + 7)
    s = torch.randn(cfg.n_queries, cfg.n_keys, generator=gen, dtype=torch.float64)
    p = torch.softmax(s, dim=-1)
    return {
        "max_weight": float(p.max(-1).values.mean()),
        "entropy": float(-(p * p.log()).sum(-1).mean()),
        "uniform_entropy": math.log(cfg.n_keys),
        "uniform_max_weight": 1.0 / cfg.n_keys,
    }
