"""The state of a dashboard pass: per feature, counts, extremes, histograms, the top examples and a sample.

:meth:`Collector.update` takes one layer's activations on a batch of tokens ``[rows, features]`` (rows of whole
items, item by item, positions ascending) and folds them in; nothing in it grows with the number of tokens.
Per feature it keeps:

- how many tokens it fired on (activation > 0), its smallest and largest activation;
- the two histograms of :mod:`.histogram`;
- the ``top`` tokens by activation, and a uniform ``sample`` of the tokens it fired on (the smallest
  :func:`~.reservoir.sample_key` s, see :mod:`.reservoir`); each kept token with its item, position and the
  feature's activation at every token of a window around it (NaN outside the item), captured when it enters.

A feature is numbered globally by its place in ``layers`` x the features kept per layer (all, or a chosen
subset), in that order; its sample keys use its ``featureIndex`` (:func:`interp.feature_id.feature_index`), the
same whichever features a pass reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from interp.feature_id import feature_index
from interp.sae.dashboards.histogram import Histograms
from interp.sae.dashboards.reservoir import Reservoir, sample_key, top_key


@dataclass(frozen=True, kw_only=True)
class Settings:
    """What a dashboard keeps per feature.

    Attributes:
        top: examples in the top group.
        quantiles: groups of the active tokens by activation, equal in count (5: fifths).
        per_quantile: examples shown per quantile group.
        sample: the uniform sample of active tokens the quantile examples are drawn from; a group of a
            fifth of the tokens holds ``sample / quantiles`` of them on average.
        before, after: tokens of context kept before and after an example's token.
        seed: chooses the sample.
        logits: tokens listed as promoted and as suppressed.
    """

    top: int = 10
    quantiles: int = 5
    per_quantile: int = 4
    sample: int = 50
    before: int = 16
    after: int = 4
    seed: int = 0
    logits: int = 10

    def __post_init__(self) -> None:
        for name in ("top", "quantiles", "per_quantile", "sample", "logits"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}; it must be at least 1")
        for name in ("before", "after"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)}; it must be at least 0")

    @property
    def window(self) -> int:
        return self.before + 1 + self.after


@dataclass(frozen=True)
class Rows:
    """Where each row of a batch comes from.

    Attributes:
        item: ``[rows]`` the item (sequence) of each row, in the whole data set.
        position: ``[rows]`` its position in the item.
        token: ``[rows]`` its token's code (the token id, or a code of the token's text; see
            :class:`~interp.sae.dashboards.sources.TokenTexts`).
        start, end: ``[rows]`` the first row of its item in this batch, and one past the last.
    """

    item: torch.Tensor
    position: torch.Tensor
    token: torch.Tensor
    start: torch.Tensor
    end: torch.Tensor

    @classmethod
    def of(cls, item: torch.Tensor, position: torch.Tensor, token: torch.Tensor) -> Rows:
        """Rows of whole items, item by item (``item`` non-decreasing)."""
        n = len(item)
        new = torch.ones(n, dtype=torch.bool, device=item.device)
        if n > 1:
            new[1:] = item[1:] != item[:-1]
        first = torch.cummax(torch.where(new, torch.arange(n, device=item.device), 0), 0).values
        counts = torch.unique_consecutive(item, return_counts=True)[1]
        ends = torch.repeat_interleave(torch.cumsum(counts, 0), counts)
        return cls(item, position, token, first, ends)

    def __len__(self) -> int:
        return len(self.item)

    def to(self, device: torch.device | str) -> Rows:
        return Rows(*(t.to(device) for t in (self.item, self.position, self.token, self.start, self.end)))


class Collector:
    """Per-feature statistics and examples over a stream of batches (see the module docstring).

    Args:
        layers: the layers with features, in order.
        widths: layer -> its number of features.
        chosen: layer -> the features to keep (a LongTensor, ascending); a layer not given keeps all.
        settings: what to keep.
        device: where the tables live (the activations' device).
    """

    def __init__(
        self,
        layers: Sequence[int],
        widths: Mapping[int, int],
        settings: Settings,
        chosen: Mapping[int, torch.Tensor] | None = None,
        device: torch.device | str = "cpu",
    ) -> None:
        self.layers, self.settings = list(layers), settings
        self.widths = {layer: int(widths[layer]) for layer in self.layers}
        self.chosen = {lay: chosen[lay].long().to(device) for lay in (chosen or {})}
        self.offset, n = {}, 0
        for layer in self.layers:
            self.offset[layer] = n
            n += len(self.chosen[layer]) if layer in self.chosen else self.widths[layer]
        self.n = n
        self.n_tokens = 0
        self.n_active = 0  # (token, feature) pairs where a feature fired, over the pass
        self.count = torch.zeros(n, dtype=torch.long, device=device)
        self.low = torch.full((n,), float("inf"), device=device)
        self.high = torch.zeros(n, device=device)
        self.hist = Histograms(n, device)
        w = settings.window
        fields = {
            "value": ((), torch.float32),
            "item": ((), torch.long),
            "position": ((), torch.long),
            "window": ((w,), torch.float16),
            "tokens": ((w,), torch.int32),
        }
        self.top = Reservoir(n, settings.top, fields, device)
        self.sample = Reservoir(n, settings.sample, fields, device)

    def features(self, layer: int) -> torch.Tensor:
        """The features of ``layer`` kept, in their global order."""
        return self.chosen.get(layer, torch.arange(self.widths[layer], device=self.count.device))

    def identity(self) -> list[tuple[int, int]]:
        """``(layer, feature)`` of every global number."""
        return [(lay, int(f)) for lay in self.layers for f in self.features(lay).tolist()]

    @torch.no_grad()
    def update(self, layer: int, acts: torch.Tensor, rows: Rows) -> None:
        """Fold in ``layer``'s activations ``[rows, n_features]`` on the batch described by ``rows``."""
        if acts.shape != (len(rows), self.widths[layer]):
            raise ValueError(
                f"layer {layer}'s activations have shape {tuple(acts.shape)}; expected "
                f"[{len(rows)}, {self.widths[layer]}]"
            )
        acts = acts.float()
        if layer in self.chosen:
            acts = acts[:, self.chosen[layer]]
        flat = acts.reshape(-1)
        at = (acts > 0).reshape(-1).nonzero().squeeze(1)  # the active (row, feature) pairs, row-major
        t, f = at // acts.shape[1], at % acts.shape[1]
        v = flat.index_select(0, at)
        self.n_active += len(v)
        g = f + self.offset[layer]
        self.count.index_add_(0, g, torch.ones_like(g))
        self.low.scatter_reduce_(0, g, v, "amin")
        self.high.scatter_reduce_(0, g, v, "amax")
        self.hist.add(g, v)
        item, position = rows.item[t], rows.position[t]
        number = feature_index(
            layer, self.chosen[layer][f] if layer in self.chosen else f
        )  # its featureIndex

        def payload(selected: torch.Tensor) -> dict[str, torch.Tensor]:
            return self._examples(acts, rows, t[selected], f[selected], v[selected])

        key = sample_key(item, position, number, self.settings.seed)  # the same whichever features are chosen
        self.top.offer(g, top_key(v, key), payload)  # the largest activations; ties broken by the hash
        self.sample.offer(g, key, payload)

    def _examples(
        self, acts: torch.Tensor, rows: Rows, t: torch.Tensor, f: torch.Tensor, v: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """The payload of examples at rows ``t`` of features ``f``: value, item, position, the window's
        activations (NaN outside the item) and token codes (-1 outside)."""
        s = self.settings
        offsets = torch.arange(-s.before, s.after + 1, device=t.device)
        r = t[:, None] + offsets  # [m, window]
        inside = (r >= rows.start[t][:, None]) & (r < rows.end[t][:, None])
        at = r.clamp(0, len(acts) - 1) * acts.shape[1] + f[:, None]  # [m, window] in the flat activations
        window = acts.reshape(-1).index_select(0, at.reshape(-1)).reshape(at.shape)
        window = torch.where(inside, window, torch.full_like(window, float("nan")))
        tokens = torch.where(inside, rows.token[r.clamp(0, len(acts) - 1)], -1)
        return {
            "value": v,
            "item": rows.item[t],
            "position": rows.position[t],
            "window": window,
            "tokens": tokens,
        }

    def add_tokens(self, n: int) -> None:
        """Count ``n`` more tokens read (each layer's update sees the same tokens)."""
        self.n_tokens += int(n)

    def state(self) -> dict[str, torch.Tensor]:
        """Every table as named tensors, for a checkpoint."""
        out = {"count": self.count, "low": self.low, "high": self.high}
        out["n_tokens"] = torch.tensor([self.n_tokens], dtype=torch.long)
        out.update(self.hist.state("hist"))
        out.update(self.top.state("top"))
        out.update(self.sample.state("sample"))
        return out

    def load(self, tensors: Mapping[str, torch.Tensor]) -> None:
        """Restore what :meth:`state` gave."""
        for name in ("count", "low", "high"):
            getattr(self, name).copy_(tensors[name])
        self.n_tokens = int(tensors["n_tokens"][0])
        self.hist.load("hist", tensors)
        self.top.load("top", tensors)
        self.sample.load("sample", tensors)
