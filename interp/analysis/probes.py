"""Linear probes: is a label linearly decodable from a representation, beyond what a probe can memorise?

A probe is multinomial logistic regression on standardised features with an L2 penalty, solved exactly by
Newton's method in the span of the training rows (at most ``n_train`` dimensions, however wide the features).
Two safeguards keep its accuracy honest. The train/test split is by *group* (e.g. both sentences of a
minimal pair, or every occurrence of one word), so no group is on both sides and the probe cannot pass by
recognising a near-duplicate. And a control task, the same probe trained on labels shuffled within the
training set (Hewitt and Liang 2019 in spirit), estimates what the probe gets from capacity alone; it should
sit near chance. Accuracies carry 95% bootstrap intervals over the test *groups* (2,000 resamples of whole
groups, seeded): the items of one group are not independent trials (two twins differ by one word), so the
interval is as wide as the number of held-out groups warrants, not the number of items.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import pandas as pd
import torch
from torch import nn

from interp.analysis.stats import bootstrap_mean_interval

INTERVAL_RESAMPLES = 2000  # bootstrap resamples behind every interval


@dataclass(frozen=True)
class ProbeResult:
    """Test accuracy with its interval (a bootstrap over the held-out groups), the control task's, and the sizes
    behind them."""

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


def _row_space(x: torch.Tensor) -> torch.Tensor:
    """Orthonormal basis ``[d, r]`` of the span of the rows of ``x`` (``r <= min(n, d)``).

    The L2-penalised optimum's weights are a combination of the training rows (the loss gradient is
    ``x.T @ (p - y)``), so fitting in this basis gives the same probe with ``r`` instead of ``d`` weights.
    """
    _, s, vh = torch.linalg.svd(x, full_matrices=False)
    keep = s > s[0] * 1e-10 if len(s) and s[0] > 0 else torch.zeros_like(s, dtype=torch.bool)
    return vh[keep].T


def _fit(
    z: torch.Tensor, y: torch.Tensor, n_classes: int, weight_decay: float, steps: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Multinomial logistic regression, ``mean cross-entropy + weight_decay * |W|^2``, by damped Newton.

    The problem is strictly convex in the weights and has one flat direction (adding a constant to every
    class's bias), which the Newton system removes. With ``z`` ``[n, r]`` of modest size the exact Hessian
    ``[k (r + 1), k (r + 1)]`` is cheap and a dozen steps reach the optimum to float64 precision.

    Returns:
        ``(weight [k, r], bias [k])``.
    """
    n, r = z.shape
    k = n_classes
    z1 = torch.cat([z, torch.ones(n, 1, dtype=z.dtype)], dim=1)  # [n, r + 1]
    onehot = torch.nn.functional.one_hot(y, k).to(z.dtype)  # [n, k]
    theta = torch.zeros(k, r + 1, dtype=z.dtype)  # [class, weights then bias]
    penalty = torch.ones(r + 1, dtype=z.dtype)
    penalty[-1] = 0.0  # the bias is not penalised
    flat = torch.zeros(k, r + 1, dtype=z.dtype)
    flat[:, -1] = k**-0.5  # the direction that shifts every bias alike

    def loss_of(t: torch.Tensor) -> torch.Tensor:
        logits = z1 @ t.T  # [n, k]
        ce = (torch.logsumexp(logits, 1) - (logits * onehot).sum(1)).mean()
        return ce + weight_decay * (t.pow(2) * penalty).sum()

    loss = loss_of(theta)
    for _ in range(steps):
        p = torch.softmax(z1 @ theta.T, dim=1)  # [n, k]
        grad = (p - onehot).T @ z1 / n + 2 * weight_decay * theta * penalty  # [k, r + 1]
        q = (p[:, :, None] * z1[:, None, :]).reshape(n, -1)  # [n, k (r + 1)]
        hessian = -(q.T @ q) / n
        for c in range(k):
            block = slice(c * (r + 1), (c + 1) * (r + 1))
            hessian[block, block] += (z1.T * p[:, c]) @ z1 / n + torch.diag(2 * weight_decay * penalty)
        hessian += torch.outer(flat.flatten(), flat.flatten())
        step = torch.linalg.solve(hessian, grad.flatten()).reshape(k, r + 1)
        decrement = float((grad * step).sum())
        if decrement <= 1e-20 * max(1.0, float(loss)):
            break
        size = 1.0
        while True:  # Armijo backtracking: full Newton steps once close
            trial = theta - size * step
            trial_loss = loss_of(trial)
            if trial_loss <= loss - 0.25 * size * decrement or size < 1e-8:
                break
            size *= 0.5
        theta, loss = trial, trial_loss
        if size == 1.0 and decrement < 1e-14:
            break
    return theta[:, :-1], theta[:, -1]


def _accuracy(
    probe: tuple[torch.Tensor, torch.Tensor],
    z: torch.Tensor,
    y: torch.Tensor,
    groups: torch.Tensor,
    seed: int,
) -> tuple[float, float, float]:
    """Accuracy and its 95% interval, resampling whole ``groups``."""
    weight, bias = probe
    correct = ((z @ weight.T + bias).argmax(-1) == y).double().numpy()  # [item]
    return bootstrap_mean_interval(correct, INTERVAL_RESAMPLES, seed, groups=groups.numpy())


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

    The interval (and the control's) resamples the held-out groups, 2,000 times, seeded by ``seed``.

    Args:
        features: ``[n, d]``.
        labels: ``[n]`` class labels (any hashable values; mapped to 0..k-1).
        groups: ``[n]`` group ids; a group is never split between train and test.
        test_fraction: share of groups held out.
        seed: seeds the split and the control shuffle.
        control: also train on labels shuffled within the training set and report its test accuracy.
        weight_decay: L2 penalty on the weights (features are standardised with training statistics).
        steps: at most this many Newton iterations (it usually converges in 10 to 30).

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
    z = x @ _row_space(x[train])  # [n, r]: coordinates in the span of the training rows
    probe = _fit(z[train], y[train], len(classes), weight_decay, steps)
    accuracy, low, high = _accuracy(probe, z[test], y[test], group_ids[test], seed)
    weight, bias = probe
    train_accuracy = float(((z[train] @ weight.T + bias).argmax(-1) == y[train]).double().mean())
    control_stats = (None, None, None)
    if control:
        generator = torch.Generator().manual_seed(seed + 1)
        shuffled = y[train][torch.randperm(int(train.sum()), generator=generator)]
        control_probe = _fit(z[train], shuffled, len(classes), weight_decay, steps)
        control_stats = _accuracy(control_probe, z[test], y[test], group_ids[test], seed)
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
