"""Shared figure helpers: shapes are checked, tokens are drawn literally, output is deterministic."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from interp.report import figures


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=60, metadata={"Software": None})
    return buf.getvalue()


def test_heatmap_layer_head_axes_and_determinism():
    values = np.arange(12, dtype=float).reshape(3, 4)
    fig = figures.heatmap_layer_head(values, title="score", cbar_label="s")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "head" and ax.get_ylabel() == "layer"
    assert list(ax.get_xticks()) == [0, 1, 2, 3] and list(ax.get_yticks()) == [0, 1, 2]
    assert len(ax.texts) == 12  # annotated cells
    assert _png(fig) == _png(figures.heatmap_layer_head(values, title="score", cbar_label="s"))


def test_heatmap_centered_is_symmetric_and_accepts_torch():
    fig = figures.heatmap_layer_head(torch.tensor([[-1.0, 3.0]]), title="t", cbar_label="c", center=0.0)
    assert fig.axes[0].images[0].get_clim() == (-3.0, 3.0)


def test_heatmap_with_a_fixed_scale_does_not_stretch_a_small_spread():
    near_chance = np.array([[0.49, 0.515], [0.5, 0.505]])
    fig = figures.heatmap_layer_head(
        near_chance, title="t", cbar_label="accuracy", center=0.5, vmin=0.0, vmax=1.0
    )
    image = fig.axes[0].images[0]
    assert image.get_clim() == (0.0, 1.0)
    colours = image.to_rgba(near_chance)[..., :3]  # [layer, head, rgb]
    white = image.to_rgba(np.array([[0.5]]))[0, 0, :3]
    assert np.abs(colours - white).max() < 0.1  # all near the colour of chance
    stretched = figures.heatmap_layer_head(near_chance, title="t", cbar_label="accuracy", center=0.5)
    assert stretched.axes[0].images[0].get_clim() == pytest.approx((0.485, 0.515))
    skewed = figures.heatmap_layer_head([[0.0, 0.25]], title="t", cbar_label="c", center=0.2, vmin=0, vmax=1)
    assert skewed.axes[0].images[0].norm(0.2) == pytest.approx(0.5)  # the centre stays white
    with pytest.raises(ValueError, match=r"center=2.0 needs vmin < center < vmax, got vmin=0, vmax=1"):
        figures.heatmap_layer_head([[0.0]], title="t", cbar_label="c", center=2.0, vmin=0, vmax=1)


def test_heatmap_marks_cells():
    values = np.zeros((2, 3))
    mark = np.array([[True, False, False], [False, False, True]])
    fig = figures.heatmap_layer_head(values, title="t", cbar_label="c", mark=mark, mark_label="p < 0.05")
    ax = fig.axes[0]
    boxes = sorted((p.get_x(), p.get_y()) for p in ax.patches)
    assert boxes == [(-0.5, -0.5), (1.5, 0.5)]
    assert ax.get_xlabel() == "head\np < 0.05 (2)"
    with pytest.raises(ValueError, match=r"mark has shape \(1, 3\) but values have \(2, 3\)"):
        figures.heatmap_layer_head(values, title="t", cbar_label="c", mark=np.zeros((1, 3)))


def test_heatmap_rejects_wrong_rank():
    with pytest.raises(
        ValueError, match=r"values \[n_layers, n_heads\] must have 2 dimensions, got shape \(4,\)"
    ):
        figures.heatmap_layer_head(np.zeros(4), title="t", cbar_label="c")


def test_attention_heatmap_labels_tokens_literally():
    tokens = ["<s>", " costs $5", "\n", "  "]
    pattern = np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None]
    fig = figures.attention_heatmap(pattern, tokens, title="L0H0")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["<s>", r" costs \$5", "\\n", "␣␣"]
    _png(fig)  # renders without a mathtext error


def test_attention_heatmap_checks_token_count_and_thins_labels():
    with pytest.raises(ValueError, match="pattern has shape \\(2, 2\\) but there are 3 query tokens"):
        figures.attention_heatmap(np.eye(2), ["a", "b", "c"])
    fig = figures.attention_heatmap(np.eye(200), [f"t{i}" for i in range(200)], max_labels=50)
    assert len(fig.axes[0].get_xticks()) == 50


def test_line_plot_with_bands_and_baseline():
    fig = figures.line_plot(
        range(3),
        {"probe": [0.5, 0.7, 0.9], "control": np.array([0.5, 0.5, 0.5])},
        ci={"probe": ([0.4, 0.6, 0.8], [0.6, 0.8, 1.0])},
        baseline=0.5,
        ylabel="accuracy",
    )
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["probe", "control", "baseline"]
    assert len(ax.collections) == 1  # one band
    with pytest.raises(ValueError, match=r"ci has labels \['nope'\]"):
        figures.line_plot([0, 1], {"a": [1, 2]}, ci={"nope": ([0, 0], [1, 1])})
    with pytest.raises(ValueError, match=r"ys\['a'\] has 3 values but x has 2"):
        figures.line_plot([0, 1], {"a": [1, 2, 3]})
