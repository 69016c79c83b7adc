"""Routing statistics over a data set: how often each expert of a mixture-of-experts layer is chosen.

A router sends each token to ``k`` of ``n_experts`` experts (:mod:`interp.model.moe`). Over a data set, an
expert's *load* is how many (token, choice) assignments it received; its *share* is that count over all the
layer's assignments (``n_tokens * k``; the shares of a layer sum to 1), and its *fraction* is the share of
tokens routed to it (the fractions sum to ``k``). The entropy of a layer's shares, in nats and over its
maximum ``log n_experts``, says how evenly the load is spread: 1 when every expert gets the same share, 0
when one expert gets every token (possible only for ``k = 1``). By token, the same counts are kept for each
token id that occurs, so "which experts does ``' the'`` go to" is a lookup.

The counts stream: each batch runs once (up to the last mixture-of-experts layer), its routing is counted,
and nothing else of it is kept, so a data set of any size fits. Padding (``attention_mask == 0``) is not
counted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm

from interp.analysis.checks import check_index
from interp.analysis.metric import Batch


def moe_layers(model: nn.Module) -> list[int]:
    """The layers whose MLP is a mixture of experts (an error when there are none)."""
    layers = [i for i, kind in enumerate(model.cfg.mlp_types) if kind == "moe"]
    if not layers:
        raise ValueError(
            "this model has no mixture-of-experts layer (cfg.n_experts is None); routing analyses need a "
            "Mixtral, Qwen2-MoE, Qwen3-MoE or OLMoE model, or a config with n_experts set"
        )
    return layers


def check_moe_layer(model: nn.Module, layer: int) -> int:
    """``layer`` as a checked index of a mixture-of-experts layer, or a one-line error listing those there are."""
    layers = moe_layers(model)
    layer = check_index(layer, model.cfg.n_layers, "layer", f"a model with {model.cfg.n_layers} layers")
    if layer not in layers:
        raise ValueError(
            f"layer {layer} has a dense MLP, not experts; the mixture-of-experts layers are {layers}"
        )
    return layer


def check_expert(model: nn.Module, expert: int, layer: int) -> int:
    """``expert`` as a checked index into layer ``layer``'s experts (no negative indices: experts are ids)."""
    n = model.cfg.n_experts
    if isinstance(expert, bool) or not isinstance(expert, int) or not 0 <= expert < n:
        raise IndexError(f"expert {expert!r} is out of range for layer {layer}: its experts are 0 to {n - 1}")
    return expert


@dataclass(frozen=True, eq=False)
class RoutingStats:
    """Routing counts of a data set (see the module docstring).

    Attributes:
        layers: the mixture-of-experts layers counted, in order.
        n_experts, k: experts per layer, and experts per token.
        n_tokens: real (unpadded) tokens counted.
        counts: ``[layer, expert]`` int64, assignments received (row ``i`` is ``layers[i]``).
        weights: ``[layer, expert]`` float64, the sum of the routing weights of those assignments.
        token_counts: ``[entries, 4]`` int64 rows ``(layer, token id, expert, count)``, sorted, or ``None``
            when not kept.
        token_totals: ``[entries, 2]`` int64 rows ``(token id, occurrences)``, or ``None``.
    """

    layers: tuple[int, ...]
    n_experts: int
    k: int
    n_tokens: int
    counts: torch.Tensor
    weights: torch.Tensor
    token_counts: torch.Tensor | None = None
    token_totals: torch.Tensor | None = None

    def frame(self) -> pd.DataFrame:
        """One row per (layer, expert): ``layer, expert, count, share, fraction, mean_weight``.

        ``share`` sums to 1 over a layer's experts, ``fraction`` (of tokens routed to the expert) to ``k``;
        ``mean_weight`` is the mean routing weight of its assignments (NaN for an expert never chosen).
        """
        layer = torch.tensor(self.layers).repeat_interleave(self.n_experts)
        counts = self.counts.flatten().double()
        total = max(self.n_tokens, 1)
        return pd.DataFrame(
            {
                "layer": layer.tolist(),
                "expert": list(range(self.n_experts)) * len(self.layers),
                "count": self.counts.flatten().tolist(),
                "share": (counts / (total * self.k)).tolist(),
                "fraction": (counts / total).tolist(),
                "mean_weight": (self.weights.flatten() / counts).tolist(),
            }
        )

    def entropy(self) -> pd.DataFrame:
        """One row per layer: ``layer, entropy`` (nats, of the experts' shares), ``normalised`` (over
        ``log n_experts``), ``max_share`` and ``idle`` (experts that received nothing)."""
        share = self.counts.double() / self.counts.sum(1, keepdim=True).clamp(min=1)  # [layer, expert]
        entropy = -torch.where(share > 0, share * share.log(), 0.0).sum(1)
        return pd.DataFrame(
            {
                "layer": list(self.layers),
                "entropy": entropy.tolist(),
                "normalised": (entropy / math.log(self.n_experts)).tolist(),
                "max_share": share.max(1).values.tolist(),
                "idle": (self.counts == 0).sum(1).tolist(),
            }
        )

    def by_token(self) -> pd.DataFrame:
        """One row per (layer, token id, expert) seen: ``layer, token, expert, count, fraction`` (of the
        token's occurrences routed to the expert; a token's fractions over the experts of a layer sum to
        ``k``)."""
        if self.token_counts is None:
            raise ValueError(
                "these statistics were counted with by_token=False; count again with by_token=True"
            )
        rows = self.token_counts
        totals = dict(self.token_totals.tolist())
        frame = pd.DataFrame(rows.numpy(), columns=["layer", "token", "expert", "count"])
        frame["fraction"] = frame["count"] / frame["token"].map(totals)
        return frame


def _as_batch(item: torch.Tensor | Batch) -> tuple[torch.Tensor, torch.Tensor | None]:
    if isinstance(item, Batch):
        return item.tokens, item.attention_mask
    return Batch(item).tokens, None


def _merge(keys: torch.Tensor, counts: torch.Tensor, new: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Running ``(unique keys, counts)`` with the keys ``new`` counted in."""
    seen, seen_counts = new.unique(return_counts=True)
    keys, inverse = torch.cat([keys, seen]).unique(return_inverse=True)
    merged = torch.zeros(len(keys), dtype=torch.long).index_add_(0, inverse, torch.cat([counts, seen_counts]))
    return keys, merged


@torch.no_grad()
def routing_statistics(
    model: nn.Module,
    batches: Iterable[torch.Tensor | Batch],
    *,
    layers: Sequence[int] | None = None,
    by_token: bool = True,
    progress: bool = False,
) -> RoutingStats:
    """Count which experts the router chooses over ``batches`` (see the module docstring).

    Args:
        model: a model with mixture-of-experts layers.
        batches: token tensors ``[batch, pos]``, or :class:`~interp.analysis.Batch` es whose
            ``attention_mask`` marks padding, which is not counted.
        layers: the mixture-of-experts layers to count (default: all of them).
        by_token: also count per token id (:meth:`RoutingStats.by_token`).
        progress: show a progress bar over the batches.

    Returns:
        :class:`RoutingStats`.

    >>> import interp
    >>> cfg = interp.TransformerConfig(n_layers=1, d_model=16, n_heads=2, d_vocab=20, n_ctx=8, n_experts=4,
    ...                                experts_per_token=2, seed=0)
    >>> stats = routing_statistics(interp.HookedTransformer(cfg), [torch.tensor([[1, 2, 3]])])
    >>> stats.n_tokens, int(stats.counts.sum()), float(stats.frame()["share"].sum())
    (3, 6, 1.0)
    """
    chosen = moe_layers(model) if layers is None else sorted({check_moe_layer(model, l) for l in layers})
    n, k, d_vocab = model.cfg.n_experts, model.cfg.experts_per_token, model.cfg.d_vocab
    names = [f"blocks.{l}.mlp.hook_expert_{what}" for l in chosen for what in ("indices", "weights")]
    counts = torch.zeros(len(chosen), n, dtype=torch.long)
    weights = torch.zeros(len(chosen), n, dtype=torch.float64)
    keys = torch.zeros(0, dtype=torch.long)
    key_counts = torch.zeros(0, dtype=torch.long)
    token_keys, token_key_counts = keys, key_counts
    n_tokens = 0
    for item in tqdm(batches, disable=not progress, desc="routing"):
        tokens, mask = _as_batch(item)
        _, cache = model.run_with_cache(
            tokens, mask, names_filter=names, stop_at_layer=chosen[-1] + 1, device="cpu"
        )
        real = torch.ones_like(tokens, dtype=torch.bool) if mask is None else mask.cpu().bool()
        n_tokens += int(real.sum())
        ids = tokens.cpu()[real]  # [tokens]
        for i, l in enumerate(chosen):
            index = cache[f"blocks.{l}.mlp.hook_expert_indices"][real]  # [tokens, k]
            weight = cache[f"blocks.{l}.mlp.hook_expert_weights"][real].double()  # [tokens, k]
            counts[i] += torch.bincount(index.flatten(), minlength=n)
            weights[i].index_add_(0, index.flatten(), weight.flatten())
            if by_token:
                new = (
                    i * d_vocab + ids[:, None]
                ) * n + index  # [tokens, k] one key per (layer, token, expert)
                keys, key_counts = _merge(keys, key_counts, new.flatten())
        if by_token:
            token_keys, token_key_counts = _merge(token_keys, token_key_counts, ids)
    if n_tokens == 0:
        raise ValueError("no tokens were counted: batches held none, or only padding")
    token_counts = token_totals = None
    if by_token:
        layer_index, rest = keys // (d_vocab * n), keys % (d_vocab * n)
        layer_ids = torch.tensor(chosen, dtype=torch.long)[layer_index]
        token_counts = torch.stack([layer_ids, rest // n, rest % n, key_counts], 1)  # [entries, 4]
        token_totals = torch.stack([token_keys, token_key_counts], 1)
    return RoutingStats(
        layers=tuple(chosen),
        n_experts=n,
        k=k,
        n_tokens=n_tokens,
        counts=counts,
        weights=weights,
        token_counts=token_counts,
        token_totals=token_totals,
    )
