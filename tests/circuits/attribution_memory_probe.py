"""Attribution's peak resident memory with and without a budget, in a fresh process
(``python -m tests.circuits.attribution_memory_probe BUDGET_GB``).

A random Llama-shaped model (4 layers, d_model 64, 4 heads of which 2 key/value, 192 tokens) and random
per-layer transcoders of 128 features (about 2% active) are built, one small graph is made (libraries'
first-use costs), then the graph capped at 256 features is made twice, with ``--max-memory-gb BUDGET_GB`` and
with the default 256 reads per pass; for each the peak resident set (``VmHWM``, restarted before the call)
above the resident set before it is printed as JSON, with the reads per pass each used.
"""

from __future__ import annotations

import gc
import json
import sys

import torch

import interp
from interp.circuits.features import direct_effects
from interp.sae import TranscoderSet
from tests.load.memory_probe import peak_bytes, reset_peak, resident_bytes

N_POS = 192


def setup():
    """The model, the transcoders and the prompt."""
    cfg = interp.TransformerConfig(
        n_layers=4, d_model=64, n_heads=4, n_kv_heads=2, d_mlp=128, d_vocab=64, n_ctx=256,
        norm="rmsnorm", positional="rotary", mlp="gated", act="silu", attn_bias=False, seed=0,
    )  # fmt: skip
    model = interp.HookedTransformer(cfg).eval()
    g = torch.Generator().manual_seed(0)
    n, d, f = cfg.n_layers, cfg.d_model, 128
    tc = TranscoderSet(
        torch.randn(n, f, d, generator=g) / d**0.5,
        torch.randn(n, f, d, generator=g) / f**0.5,
        torch.full((n, f), -2.0),
        torch.zeros(n, d),
    )
    tokens = torch.randint(3, cfg.d_vocab, (N_POS,), generator=g)
    tokens[0] = 0
    return model, tc, tokens


def measure(model, tc, tokens, budget: float | None) -> dict:
    """The peak above the resident set before one capped graph, and the reads per pass."""
    passes = []
    rows = direct_effects._rows

    def counted(run, sources, transcoders, layers, positions, vectors):
        passes.append(len(vectors))
        return rows(run, sources, transcoders, layers, positions, vectors)

    direct_effects._rows = counted
    gc.collect()
    reset_peak()
    before = resident_bytes()
    graph = direct_effects.attribute(
        model, tc, tokens, max_feature_nodes=256, max_memory_gb=budget, progress=False
    )
    peak = peak_bytes() - before
    direct_effects._rows = rows
    return {"peak": peak, "reads_per_pass": max(passes), "n_nodes": int(graph.adjacency.shape[0])}


def main(argv: list[str] | None = None) -> None:
    budget = float((argv or sys.argv[1:])[0])
    torch.set_num_threads(1)
    model, tc, tokens = setup()
    direct_effects.attribute(model, tc, tokens[:8], progress=False)  # first-use costs
    budgeted = measure(model, tc, tokens, budget)
    default = measure(model, tc, tokens, None)
    print(json.dumps({"budget": int(budget * 2**30), "budgeted": budgeted, "default": default}))


if __name__ == "__main__":
    main()
