"""Linear probes: is a label linearly decodable from a representation, beyond what a probe can memorise?

A probe is multinomial logistic regression on standardised features, trained with L-BFGS and an L2 penalty.
Two safeguards keep its accuracy honest. The train/test split is by *group* (e.g. both sentences of a
minimal pair, or every occurrence of one word), so no group is on both sides and the probe cannot pass by
recognising a near-duplicate. And a control task, the same probe trained on labels shuffled within the
training set (Hewitt and Liang 2019 in spirit), estimates what the probe gets from capacity alone; it should
sit near chance. Accuracies carry 95% Wilson intervals over the test items.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import pandas as pd
import torch
from torch import nn


def wilson_interval(correct: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% (by default) Wilson score interval for ``correct`` successes out of ``n``.

    >>> [round(x, 3) for x in wilson_interval(8, 10)]
    [0.49, 0.943]
    """
    if n <= 0:
        raise ValueError(f"n={n}; a confidence interval needs at least one trial")
    p = correct / n
    denom = 1 + z**2 / n
    centre = (p + z**2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class ProbeResult:
    """Test accuracy with its Wilson interval, the control task's, and the sizes behind them."""

    accuracy: float
    ci_low: float
    ci_high: float
    control_accuracy: float | None
    control_ci_low: float | None
    control_ci_high: float | None
    train_accuracy: float
    chance: float
    n_train: int
    n_test: int

    def to_dict(self) -> dict:
        return asdict(self)


def split_by_group(
    groups: torch.Tensor, test_fraction: float, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Boolean ``(train, test)`` masks, each group wholly on one side, ``test_fraction`` of groups in test."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction={test_fraction}; it must be strictly between 0 and 1")
    unique = groups.unique()
    if len(unique) < 2:
        raise ValueError(f"groups has {len(unique)} distinct value(s); a group split needs at least 2")
    generator = torch.Generator().manual_seed(seed)
    order = unique[torch.randperm(len(unique), generator=generator)]
    n_test = min(len(unique) - 1, max(1, round(test_fraction * len(unique))))
    test = torch.isin(groups, order[:n_test])
    return ~test, test


def _fit(x: torch.Tensor, y: torch.Tensor, n_classes: int, weight_decay: float, steps: int) -> nn.Linear:
    torch.manual_seed(0)  # the problem is convex; the start only matters for reproducible float noise
    probe = nn.Linear(x.shape[1], n_classes, dtype=x.dtype)
    nn.init.zeros_(probe.weight)
    nn.init.zeros_(probe.bias)
    optimizer = torch.optim.LBFGS(probe.parameters(), max_iter=steps, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(probe(x), y) + weight_decay * probe.weight.pow(2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        optimizer.step(closure)
    return probe


def _accuracy(probe: nn.Linear, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float, float, int]:
    with torch.no_grad():
        correct = int((probe(x).argmax(-1) == y).sum())
    return (correct / len(y), *wilson_interval(correct, len(y)), correct)


def train_probe(
    features: torch.Tensor,
    labels: torch.Tensor | Sequence,
    groups: torch.Tensor | Sequence,
    *,
    test_fraction: float = 0.5,
    seed: int = 0,
    control: bool = True,
    weight_decay: float = 1e-3,
    steps: int = 300,
) -> ProbeResult:
    """Train a logistic-regression probe on a group split and report test accuracy with a 95% interval.

    Args:
        features: ``[n, d]``.
        labels: ``[n]`` class labels (any hashable values; mapped to 0..k-1).
        groups: ``[n]`` group ids; a group is never split between train and test.
        test_fraction: share of groups held out.
        seed: seeds the split and the control shuffle.
        control: also train on labels shuffled within the training set and report its test accuracy.
        weight_decay: L2 penalty on the weights (features are standardised with training statistics).
        steps: L-BFGS iterations.

    >>> x = torch.randn(200, 4, generator=torch.Generator().manual_seed(0))
    >>> result = train_probe(x, (x[:, 0] > 0).long(), torch.arange(200) // 2)
    >>> result.accuracy > 0.95
    True
    """
    features = torch.as_tensor(features).detach().double().cpu()
    if features.ndim != 2:
        raise ValueError(f"features must be [n, d], got shape {tuple(features.shape)}")
    n = features.shape[0]
    label_values = labels.tolist() if isinstance(labels, torch.Tensor) else list(labels)
    group_values = groups.tolist() if isinstance(groups, torch.Tensor) else list(groups)
    for what, values in (("labels", label_values), ("groups", group_values)):
        if len(values) != n:
            raise ValueError(f"{what} has {len(values)} entries but features has {n} rows; give one per row")
    classes = sorted(set(label_values), key=repr)
    if len(classes) < 2:
        raise ValueError(f"labels hold a single class {classes}; a probe needs at least 2")
    y = torch.tensor([classes.index(v) for v in label_values])
    group_ids = torch.tensor([sorted(set(group_values), key=repr).index(g) for g in group_values])
    train, test = split_by_group(group_ids, test_fraction, seed)
    mean, std = features[train].mean(0), features[train].std(0).clamp(min=1e-8)
    x = (features - mean) / std
    probe = _fit(x[train], y[train], len(classes), weight_decay, steps)
    accuracy, low, high, _ = _accuracy(probe, x[test], y[test])
    train_accuracy = _accuracy(probe, x[train], y[train])[0]
    control_stats = (None, None, None)
    if control:
        generator = torch.Generator().manual_seed(seed + 1)
        shuffled = y[train][torch.randperm(int(train.sum()), generator=generator)]
        control_probe = _fit(x[train], shuffled, len(classes), weight_decay, steps)
        control_stats = _accuracy(control_probe, x[test], y[test])[:3]
    chance = float(torch.bincount(y[test], minlength=len(classes)).max()) / int(test.sum())
    return ProbeResult(
        accuracy, low, high, *control_stats, train_accuracy, chance, int(train.sum()), int(test.sum())
    )


@torch.no_grad()
def probe_layers(
    model: nn.Module,
    tokens: torch.Tensor,
    positions: torch.Tensor | Sequence[int],
    labels: torch.Tensor | Sequence,
    groups: torch.Tensor | Sequence,
    hook: str = "resid_post",
    *,
    attention_mask: torch.Tensor | None = None,
    batch_size: int = 64,
    **probe_kwargs,
) -> pd.DataFrame:
    """Train a probe on ``blocks.{layer}.hook_{hook}`` at one position per row, for every layer.

    Args:
        tokens: ``[n, pos]``, one example per row.
        positions: ``[n]`` the position to read in each row (e.g. the last real token).
        labels, groups: ``[n]``, as in :func:`train_probe`.
        hook: a per-layer stream hook: ``resid_pre``, ``resid_mid``, ``resid_post``, ``attn_out`` or
            ``mlp_out``.
        probe_kwargs: passed to :func:`train_probe`.

    Returns:
        One row per layer: ``layer``, then the fields of :class:`ProbeResult` (``accuracy, ci_low, ci_high,
        control_accuracy, ...``).
    """
    n_layers = model.cfg.n_layers
    names = [f"blocks.{layer}.hook_{hook}" for layer in range(n_layers)]
    model.resolve(names)  # an unknown hook fails here, with suggestions
    positions = torch.as_tensor(positions).long().cpu()
    if positions.shape != (tokens.shape[0],):
        raise ValueError(
            f"positions has shape {tuple(positions.shape)}; give one index per row: ({tokens.shape[0]},)"
        )
    n_pos = tokens.shape[1]
    if bool((positions >= n_pos).any() | (positions < -n_pos).any()):
        bad = positions[(positions >= n_pos) | (positions < -n_pos)][0].item()
        raise IndexError(
            f"position {bad} is out of range for sequences of {n_pos} tokens; use 0..{n_pos - 1}"
        )
    positions = positions % n_pos
    features: list[list[torch.Tensor]] = [[] for _ in range(n_layers)]
    for start in range(0, tokens.shape[0], batch_size):
        rows = slice(start, start + batch_size)
        mask = None if attention_mask is None else attention_mask[rows]
        cache = model.run_with_cache(tokens[rows], mask, names_filter=names, device="cpu")[1]
        index = torch.arange(positions[rows].shape[0])
        for layer, name in enumerate(names):
            features[layer].append(cache[name][index, positions[rows]].float())  # [rows, d_model]
    results = []
    for layer in range(n_layers):
        result = train_probe(torch.cat(features[layer]), labels, groups, **probe_kwargs)
        results.append({"layer": layer, **result.to_dict()})
    return pd.DataFrame(results)
