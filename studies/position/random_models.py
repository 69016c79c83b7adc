"""Seeded random models of every positional scheme, causal and not: equivariance error and a position probe."""

from __future__ import annotations

import pandas as pd
import torch
from tqdm import tqdm

from interp import HookedTransformer, TransformerConfig
from studies.position.config import POSITIONALS, PositionConfig
from studies.threads import single_thread


def random_model(cfg: PositionConfig, positional: str, causal: bool, seed: int) -> HookedTransformer:
    """A seeded random model of the study's size with the given positional scheme and mask."""
    tcfg = TransformerConfig(
        n_layers=cfg.n_layers,
        d_model=cfg.d_model,
        n_heads=cfg.n_heads,
        d_vocab=cfg.d_vocab,
        n_ctx=cfg.seq_len,
        positional=positional,
        causal=causal,
        seed=seed,
    )
    return HookedTransformer(tcfg).eval()


@torch.no_grad()
def equivariance_error(
    model: HookedTransformer, tokens: torch.Tensor, perms: torch.Tensor
) -> dict[str, float]:
    """Largest ``|model(tokens[perm]) - model(tokens)[perm]|`` over a batch, absolute and relative.

    Args:
        tokens: ``[batch, pos]`` token ids.
        perms: ``[batch, pos]``, a permutation of the positions per sequence.
    """
    out = model(tokens)  # [batch, pos, d_vocab]
    permuted_in = torch.gather(tokens, 1, perms)
    out_perm = model(permuted_in)
    expected = torch.gather(out, 1, perms[..., None].expand_as(out))
    err = (out_perm - expected).abs()  # [batch, pos, d_vocab]
    scale = float(out.abs().max())
    spread = float((out - out.mean(1, keepdim=True)).abs().max())  # how much outputs differ across positions
    return {
        "max_abs_error": float(err.max()),
        "relative_error": float(err.max()) / scale,
        "mean_abs_error": float(err.mean()),
        "error_over_spread": float(err.max()) / spread,
    }


@torch.no_grad()
def position_probe(model: HookedTransformer, tokens: torch.Tensor, ridge: float = 1e-2) -> float:
    """Held-out R² of a ridge regression from the final stream to each token's position (chance: about 0).

    The features are the stream and its elementwise squares: a causal mask without positions leaves order in
    how widely a token's prefix is averaged, a second-moment signal that a purely linear probe cannot see.
    The first half of the sequences fit the probe, the second half score it.
    """
    n_layers = model.cfg.n_layers
    _, cache = model.run_with_cache(tokens, names_filter=f"blocks.{n_layers - 1}.hook_resid_post")
    x = cache["resid_post", n_layers - 1].double()  # [batch, pos, d_model]
    x = torch.cat([x, x.pow(2)], dim=-1)  # [batch, pos, 2 * d_model]
    batch, n, d = x.shape
    y = torch.arange(n, dtype=torch.float64).expand(batch, n)
    half = batch // 2
    xtr, ytr = x[:half].reshape(-1, d), y[:half].reshape(-1)
    xte, yte = x[half:].reshape(-1, d), y[half:].reshape(-1)
    mu, sd = xtr.mean(0), xtr.std(0).clamp_min(1e-12)
    xtr, xte = (xtr - mu) / sd, (xte - mu) / sd
    ym = ytr.mean()
    gram = xtr.T @ xtr + ridge * len(xtr) * torch.eye(d, dtype=torch.float64)
    w = torch.linalg.solve(gram, xtr.T @ (ytr - ym))
    pred = xte @ w + ym
    return float(1 - ((pred - yte) ** 2).sum() / ((yte - yte.mean()) ** 2).sum())


@single_thread()
def random_models_table(cfg: PositionConfig, seed: int, quiet: bool = True) -> pd.DataFrame:
    """One row per (positional, causal): equivariance error and position-probe R²."""
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, cfg.d_vocab, (cfg.n_sequences, cfg.seq_len), generator=gen)
    perms = torch.stack([torch.randperm(cfg.seq_len, generator=gen) for _ in range(cfg.n_sequences)])
    probe_tokens = torch.randint(0, cfg.d_vocab, (cfg.probe_sequences, cfg.seq_len), generator=gen)
    rows = []
    settings = [(p, c) for c in (False, True) for p in POSITIONALS]
    for positional, causal in tqdm(settings, desc="random models", disable=quiet):
        model = random_model(cfg, positional, causal, seed)
        rows.append(
            {
                "positional": positional,
                "causal": causal,
                **equivariance_error(model, tokens, perms),
                "position_probe_r2": position_probe(model, probe_tokens),
            }
        )
    return pd.DataFrame(rows)
