"""Training both models at one distance, and what is measured on them: accuracy and embedding gradients."""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from interp.analysis.stats import wilson_interval
from studies.recurrence.config import RecurrenceConfig
from studies.recurrence.models import LSTMModel, logits_of, make_transformer
from studies.recurrence.task import make_batch
from studies.threads import single_thread


def train(model: nn.Module, cfg: RecurrenceConfig, d: int, seed: int) -> list[float]:
    """Adam for ``cfg.steps`` steps on fresh batches; returns the loss per step."""
    gen = torch.Generator().manual_seed(seed * 7919 + d)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    losses = []
    model.train()
    for _ in range(cfg.steps):
        tokens, target = make_batch(cfg, d, cfg.batch, gen)
        loss = F.cross_entropy(logits_of(model, tokens, cfg.n_symbols), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@torch.inference_mode()
def accuracy(model: nn.Module, cfg: RecurrenceConfig, d: int, seed: int) -> tuple[float, float, float]:
    """Held-out accuracy and its 95% Wilson interval."""
    model.eval()
    gen = torch.Generator().manual_seed(seed * 7919 + d + 1_000_003)
    tokens, target = make_batch(cfg, d, cfg.n_eval, gen)
    correct = int((logits_of(model, tokens, cfg.n_symbols).argmax(-1) == target).sum())
    return (correct / cfg.n_eval, *wilson_interval(correct, cfg.n_eval))


def embedding_gradients(model: nn.Module, cfg: RecurrenceConfig, d: int, seed: int) -> dict[str, float]:
    """Gradient of the loss with respect to the first token's and the query's embeddings (float64).

    Returns the mean norms over a batch and ``ratio`` = first / query, which is 1 when the distant input
    reaches the loss as strongly as the adjacent one.
    """
    gen = torch.Generator().manual_seed(seed * 7919 + d + 2_000_003)
    tokens, target = make_batch(cfg, d, cfg.grad_batch, gen)
    model = model.double().eval()
    captured: list[torch.Tensor] = []

    def keep(x: torch.Tensor) -> None:
        x.retain_grad()
        captured.append(x)

    loss = F.cross_entropy(logits_of(model, tokens, cfg.n_symbols, keep), target)
    model.zero_grad()
    loss.backward()
    grad = captured[0].grad  # [batch, pos, d_model]
    first, last = grad[:, 0].norm(dim=-1).mean(), grad[:, -1].norm(dim=-1).mean()
    model.float()
    return {"grad_first": float(first), "grad_query": float(last), "ratio": float(first / last)}


def run_distance(cfg: RecurrenceConfig, d: int, seed: int) -> list[dict]:
    """Train both models at distance ``d``; accuracy and gradients at initialisation and after training."""
    rows = []
    for kind in ("lstm", "transformer"):
        with single_thread():
            torch.manual_seed(seed)
            model = LSTMModel(cfg) if kind == "lstm" else make_transformer(cfg, d + 2, seed)
            init = embedding_gradients(model, cfg, d, seed)
            start = time.perf_counter()
            losses = train(model, cfg, d, seed)
            train_s = time.perf_counter() - start
            acc, low, high = accuracy(model, cfg, d, seed)
            trained = embedding_gradients(model, cfg, d, seed)
        rows.append(
            {
                "model": kind,
                "d": d,
                "accuracy": acc,
                "accuracy_low": low,
                "accuracy_high": high,
                "final_loss": float(np.mean(losses[-10:])),
                "grad_ratio_init": init["ratio"],
                "grad_first_init": init["grad_first"],
                "grad_ratio_trained": trained["ratio"],
                "grad_first_trained": trained["grad_first"],
                "path_length": d + 1 if kind == "lstm" else 1,
                "parameters": sum(p.numel() for p in model.parameters()),
                "train_s": train_s,
            }
        )
    return rows
