"""Fixed inputs for the explainer page and a report page, built without a model (hash pins)."""

from __future__ import annotations

import math

TOKENS = ["<s>", "The", " cat", " sat", " <b>&\u2028"]


def _grid(*shape: int, phase: float = 0.0) -> list:
    """Nested lists of deterministic values in [-1, 1] (sines of the flat index)."""
    if not shape:
        return []
    size = math.prod(shape)
    flat = [round(math.sin(0.7 * i + phase), 6) for i in range(size)]

    def nest(values: list, dims: tuple[int, ...]) -> list:
        if len(dims) == 1:
            return values
        step = len(values) // dims[0]
        return [nest(values[i * step : (i + 1) * step], dims[1:]) for i in range(dims[0])]

    return nest(flat, shape)


def explainer_data() -> dict:
    n, layers, heads, d_head, d_model = len(TOKENS), 2, 2, 4, 8
    causal = [[(1.0 / (q + 1) if k <= q else 0.0) for k in range(n)] for q in range(n)]
    return {
        "model": {
            "n_layers": layers,
            "n_heads": heads,
            "n_kv_heads": 1,
            "d_head": d_head,
            "d_model": d_model,
            "name": "pin <model>",
            "positional": "rotary",
            "causal": True,
        },
        "text": "The cat sat <b>&\u2028",
        "tokens": TOKENS,
        "ids": [1, 2, 3, 4, 5],
        "query": 3,
        "layer": 1,
        "head": 0,
        "embed": {"norm": [1.5, 2.25, 0.125, 3.0, 1.0], "dims": _grid(n, d_model)},
        "position": {
            "kind": "rotary",
            "inv_freq": [1.0, 0.1],
            "q_cos": [_grid(heads, n, phase=1.0)] * layers,
            "q_cos_pos": list(range(n)),
        },
        "pattern": {"dense": True, "values": [[causal] * heads] * layers},
        "row": [[causal[3]] * heads] * layers,
        "scores": [[[0.5, -0.25, 1.0, 2.0, float("-inf")]] * heads] * layers,
        "q": [_grid(heads, d_head, phase=2.0)] * layers,
        "z": [_grid(heads, d_head, phase=3.0)] * layers,
        "kv_pos": [[list(range(n))]] * layers,
        "k": [[_grid(n, d_head, phase=4.0)]] * layers,
        "v": [[_grid(n, d_head, phase=5.0)]] * layers,
        "src_norm": [_grid(heads, n, phase=6.0)] * layers,
        "head_norm": [[0.75, 1.25]] * layers,
        "resid": [{"pre_norm": 2.0, "post_norm": 2.5, "cos": 0.875, "attn_norm": 0.5}] * layers,
        "lens": [{"tokens": [" dog", " mat"], "probs": [0.625, 0.125]}] * (layers + 1),
    }


def report_page_inputs() -> dict:
    """Keyword arguments of ``render_page`` with every kind of block, fixed."""
    import pandas as pd

    from interp.report.blocks import FigureBlock, Headline, HtmlBlock, SectionBlock, TableBlock, TextBlock

    frame = pd.DataFrame({"layer": [0, 1, 2], "accuracy": [0.5, 0.8125, 0.96875], "name": ["a", "<b>", "c"]})
    return {
        "title": "Pinned <report>",
        "subtitle": "a subtitle & more",
        "headline": {"accuracy": Headline(0.8125, (0.75, 0.875), "share", "95% Wilson")},
        "blocks": [
            SectionBlock("First section", "s1-first-section"),
            TextBlock("Prose with `code`, **strong** text.\n\n- one\n- two"),
            FigureBlock("fig", b"\x89PNG\r\n\x1a\nnot really a png", "a caption", 320),
            TableBlock("tab", frame, "per layer", 2, 4, False),
            HtmlBlock("w", '<div class="viewer">widget</div>'),
        ],
        "provenance": {
            "model": {"name": "pin-model", "path": None, "sha256": "ab" * 32},
            "data": [{"path": "items.jsonl", "sha256": "cd" * 32}],
            "seed": 3,
            "device": "cpu",
            "dtype": "float32",
            "command": ["interp", "study", "pin", "--seed", "3"],
            "config": {"n": 3, "label": "x"},
            "versions": {"python": "3.11.7", "torch": "2.13.0"},
            "source": {"commit": "0" * 40, "dirty": False},
        },
        "results": {
            "schema": "interp.report.results/1",
            "title": "Pinned <report>",
            "results": {"x": [1, 2.5]},
        },
        "extra_css": [".viewer{color:red}"],
        "extra_js": ["var pinned = 1;"],
    }
