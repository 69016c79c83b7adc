"""Figures that studies share: a layer-by-head heatmap, an attention pattern, per-layer curves.

Each helper returns a :class:`matplotlib.figure.Figure` built without pyplot, so no global figure state or
interactive backend is involved (rendering uses Agg) and nothing needs closing. Sizes depend only on the
data's shape, so the same values give the same PNG. Token strings are drawn literally: ``$`` would otherwise
start matplotlib's math mode, and newlines and tabs are shown as ``\\n`` and ``\\t``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle


def as_array(values: Any, ndim: int, what: str) -> np.ndarray:
    """``values`` (list, numpy or torch) as a float64 array of ``ndim`` dimensions; raise naming ``what``."""
    if hasattr(values, "detach"):
        values = values.detach().cpu().double().numpy()
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != ndim:
        raise ValueError(f"{what} must have {ndim} dimensions, got shape {tuple(arr.shape)}")
    return arr


def token_label(token: str) -> str:
    """A token as a tick label: whitespace made visible and ``$`` kept out of math mode."""
    label = token.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace("$", r"\$")
    return label if label.strip() else "␣" * max(len(label), 1)


def heatmap_layer_head(
    values: Any,
    *,
    title: str,
    cbar_label: str,
    center: float | None = None,
    cmap: str | None = None,
    vmin: float | None = None,
    vmax: float | None = None,
    annotate: bool | None = None,
    mark: Any = None,
    mark_label: str | None = None,
) -> Figure:
    """A ``[n_layers, n_heads]`` score as a heatmap: heads across, layers down, layer 0 at the top.

    The colour scale stretches to the data unless ``vmin`` and ``vmax`` fix it. Fix it for quantities with a
    natural range (an accuracy, a share of attention: 0 to 1), so that a spread of 0.49 to 0.51 around
    chance does not fill the whole colour map and look like structure; or ``mark`` the cells that pass a
    test.

    Args:
        values: Scores, shape ``[n_layers, n_heads]``; NaN cells are left blank.
        title: Figure title.
        cbar_label: What the colour means.
        center: For signed scores: a diverging map symmetric about this value (about ``center`` within
            ``vmin`` and ``vmax`` when those are given).
        cmap: Colour map; ``viridis``, or ``RdBu_r`` when ``center`` is set.
        vmin: Lower end of the colour scale.
        vmax: Upper end of the colour scale.
        annotate: Write each value in its cell; by default when there are at most 16 x 16 cells.
        mark: ``[n_layers, n_heads]`` booleans: cells to outline, such as heads significant after correction.
        mark_label: What an outline means, written under the plot (default ``"outlined: marked cells"``).
    """
    arr = as_array(values, 2, "values [n_layers, n_heads]")
    n_layers, n_heads = arr.shape
    marked = None
    if mark is not None:
        marked = as_array(mark, 2, "mark [n_layers, n_heads]") != 0
        if marked.shape != arr.shape:
            raise ValueError(f"mark has shape {marked.shape} but values have {arr.shape}; give one per cell")
    norm = None
    if center is not None and vmin is None and vmax is None:
        span = float(np.nanmax(np.abs(arr - center))) if np.isfinite(arr).any() else 1.0
        vmin, vmax = center - span, center + span
    elif center is not None:
        if vmin is None or vmax is None or not vmin < center < vmax:
            raise ValueError(f"center={center} needs vmin < center < vmax, got vmin={vmin}, vmax={vmax}")
        norm = TwoSlopeNorm(center, vmin, vmax)
    annotated = (
        annotate if annotate is not None else n_layers * n_heads <= 256 and max(n_layers, n_heads) <= 16
    )
    row = 0.4 if annotated else 0.22  # inches per layer: room for a number in each cell, else a thin band
    fig = Figure(figsize=(_clamp(2.2 + 0.5 * n_heads, 4, 14), _clamp(1.4 + row * n_layers, 2.6, 8)))
    ax = fig.add_subplot()
    image = ax.imshow(
        np.ma.masked_invalid(arr),
        cmap=cmap or ("RdBu_r" if center is not None else "viridis"),
        **({"norm": norm} if norm is not None else {"vmin": vmin, "vmax": vmax}),
        aspect="auto",
        interpolation="nearest",
    )
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_xticks(_ticks(n_heads))
    ax.set_yticks(_ticks(n_layers))
    ax.set_title(title)
    fig.colorbar(image, ax=ax, label=cbar_label)
    if annotated:
        low, high = image.get_clim()
        for (layer, head), v in np.ndenumerate(arr):
            if np.isfinite(v):
                dark = float(image.norm(v)) if norm is not None else (v - low) / ((high - low) or 1.0)
                colour = "white" if (dark < 0.5 if center is None else abs(dark - 0.5) > 0.3) else "black"
                ax.text(head, layer, f"{v:.2g}", ha="center", va="center", fontsize=7, color=colour)
    if marked is not None:
        for layer, head in zip(*np.nonzero(marked), strict=True):
            ax.add_patch(
                Rectangle((head - 0.5, layer - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=1.6)
            )
        ax.set_xlabel(f"head\n{mark_label or 'outlined: marked cells'} ({int(marked.sum())})")
    fig.tight_layout()
    return fig


def attention_heatmap(
    pattern: Any,
    str_tokens: Sequence[str],
    *,
    query_tokens: Sequence[str] | None = None,
    title: str | None = None,
    cmap: str = "Blues",
    vmax: float | None = 1.0,
    max_labels: int = 80,
) -> Figure:
    """An attention pattern ``[query, key]`` with token labels: keys across (top), queries down.

    Args:
        pattern: Attention weights, shape ``[n_query, n_key]``.
        str_tokens: Key tokens, one per column; also the query tokens unless ``query_tokens`` is given.
        query_tokens: Query tokens, one per row.
        title: Figure title.
        cmap: Colour map.
        vmax: Top of the colour scale (1 for probabilities; ``None`` for the data's maximum).
        max_labels: Above this many tokens only every n-th is labelled.
    """
    arr = as_array(pattern, 2, "pattern [query, key]")
    keys = list(str_tokens)
    queries = keys if query_tokens is None else list(query_tokens)
    if arr.shape != (len(queries), len(keys)):
        raise ValueError(
            f"pattern has shape {tuple(arr.shape)} but there are {len(queries)} query tokens and "
            f"{len(keys)} key tokens"
        )
    side = _clamp(1.5 + 0.22 * max(arr.shape), 4, 16)
    fig = Figure(
        figsize=(_clamp(1.5 + 0.22 * len(keys), 4, 16) + 1.2, _clamp(1.5 + 0.22 * len(queries), 3, side))
    )
    ax = fig.add_subplot()
    image = ax.imshow(arr, cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto", interpolation="nearest")
    for axis_ticks, axis_labels, tokens in (
        (ax.set_xticks, ax.set_xticklabels, keys),
        (ax.set_yticks, ax.set_yticklabels, queries),
    ):
        step = max(1, -(-len(tokens) // max_labels))
        positions = list(range(0, len(tokens), step))
        axis_ticks(positions)
        axis_labels([token_label(tokens[i]) for i in positions], fontsize=7)
    ax.xaxis.tick_top()
    ax.tick_params(axis="x", labelrotation=90)
    ax.set_xlabel("key")
    ax.xaxis.set_label_position("top")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title, pad=12)
    fig.colorbar(image, ax=ax, label="attention", fraction=0.04)
    fig.tight_layout()
    return fig


def line_plot(
    x: Sequence[float] | Any,
    ys: Mapping[str, Any],
    *,
    ci: Mapping[str, tuple[Any, Any]] | None = None,
    title: str | None = None,
    xlabel: str = "layer",
    ylabel: str = "",
    baseline: float | None = None,
    baseline_label: str = "baseline",
) -> Figure:
    """Curves over ``x`` (usually layers), one per label, with optional confidence bands.

    Args:
        x: Positions on the x axis, shape ``[n]``.
        ys: Values by label, each shape ``[n]``; labels are drawn in the mapping's order.
        ci: ``(low, high)`` arrays by label, drawn as shaded bands; labels not in ``ys`` are an error.
        title: Figure title.
        xlabel: X axis label.
        ylabel: Y axis label.
        baseline: A horizontal reference line, such as chance accuracy.
        baseline_label: Legend entry of the baseline.
    """
    xs = as_array(x, 1, "x")
    ci = dict(ci or {})
    unknown = sorted(set(ci) - set(ys))
    if unknown:
        raise ValueError(f"ci has labels {unknown} that are not curves; curves are {list(ys)}")
    fig = Figure(figsize=(6.4, 4.0))
    ax = fig.add_subplot()
    for i, (label, values) in enumerate(ys.items()):
        y = as_array(values, 1, f"ys[{label!r}]")
        if y.shape != xs.shape:
            raise ValueError(f"ys[{label!r}] has {y.shape[0]} values but x has {xs.shape[0]}")
        colour = f"C{i % 10}"
        ax.plot(xs, y, marker="o", markersize=3.5, color=colour, label=label)
        if label in ci:
            low, high = (as_array(b, 1, f"ci[{label!r}]") for b in ci[label])
            if low.shape != xs.shape or high.shape != xs.shape:
                raise ValueError(f"ci[{label!r}] bounds must each have {xs.shape[0]} values")
            ax.fill_between(xs, low, high, color=colour, alpha=0.18, linewidth=0)
    if baseline is not None:
        ax.axhline(baseline, color="0.45", linestyle="--", linewidth=1, label=baseline_label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if len(xs) and np.allclose(xs, np.round(xs)) and len(xs) <= 48:
        ax.set_xticks(xs)
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def _ticks(n: int) -> list[int]:
    step = max(1, -(-n // 32))
    return list(range(0, n, step))


def _clamp(value: float, low: float, high: float) -> float:
    return max(low, min(high, value))
