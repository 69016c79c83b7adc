"""The same attribution graphs as circuit-tracer 0.5.0, on tiny random Llama, Qwen3, Gemma 2 and Gemma 3
checkpoints with random per-layer, skip and cross-layer transcoders.

The golden files and the script that wrote them (run in an environment with circuit-tracer and nnsight) are in
``golden/``. circuit-tracer's hook names map to interp's: ``mlp.hook_in`` (the MLP's norm output, after the
gain) is ``ln2.hook_normalized`` with the gain folded into the encoder and the skip connection;
``ln2.hook_normalized``, ``hook_resid_mid`` and ``hook_mlp_out`` are the same; ``mlp.hook_out`` is
``hook_mlp_out``.

One difference is known and asserted as such: for Gemma 3, circuit-tracer's token columns are smaller by
exactly ``sqrt(d_model)``. Its nnsight mapping takes a token's vector from ``embed_tokens.weight`` but the
gradient at the output of ``embed_tokens``, which for Gemma 3 (``Gemma3TextScaledWordEmbedding``) already
includes the ``sqrt(d_model)`` scale; for Gemma 2 the scale comes after that module, so the two agree. interp's
token node is the embedding as it enters the stream (``hook_embed``), for which the library-free test in
``test_attribute_exact.py`` shows every edge to be the exact frozen effect.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

import interp
from interp.circuits import AttributionGraph, attribute
from tests.circuits.transcoders import from_circuit_tracer

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(json.loads((GOLDEN / "index.json").read_text())["cases"])
SITE = {"mlp.hook_in": "ln2.hook_normalized", "ln2.hook_normalized": "ln2.hook_normalized"}


def golden_case(name: str):
    path = GOLDEN / f"{name}.safetensors"
    with safe_open(str(path), "pt") as f:
        meta = f.metadata()
    tensors = load_file(str(path))
    model = interp.load(str(GOLDEN / meta["family"]), dtype="float32")
    hook = meta["input_hook"]
    gains = None
    if hook == "mlp.hook_in":
        gains = torch.stack([block.ln2.gain for block in model.blocks]).detach()
    tc = from_circuit_tracer(tensors, meta["kind"], SITE.get(hook, hook), gains)
    return model, tc, tensors, meta


def golden_graph(ref: dict, n_layers: int) -> AttributionGraph:
    """circuit-tracer's graph of a golden case, as interp's type."""
    return AttributionGraph(
        adjacency=ref["adjacency"],
        features=ref["active_features"][ref["selected_features"]],
        activations=ref["activation_values"][ref["selected_features"]],
        input_tokens=ref["input_tokens"],
        logit_tokens=ref["logit_tokens"],
        logit_probabilities=ref["logit_probabilities"],
        n_layers=n_layers,
    )


@pytest.mark.parametrize("name", CASES)
def test_same_graph_as_circuit_tracer(name):
    model, tc, ref, meta = golden_case(name)
    cap = int(meta["max_feature_nodes"]) if meta["max_feature_nodes"] else None
    graph = attribute(
        model,
        tc,
        ref["input_tokens"],
        max_logits=5,
        logit_probability=0.95,
        batch_size=32,
        max_feature_nodes=cap,
        update_interval=1,
        progress=False,
    )
    assert graph.features.tolist() == ref["active_features"][ref["selected_features"]].tolist()
    torch.testing.assert_close(
        graph.activations, ref["activation_values"][ref["selected_features"]], rtol=1e-4, atol=1e-5
    )
    assert graph.logit_tokens.tolist() == ref["logit_tokens"].tolist()
    torch.testing.assert_close(graph.logit_probabilities, ref["logit_probabilities"], rtol=1e-4, atol=1e-6)
    expected = ref["adjacency"].clone()
    if meta["family"] == "gemma3":
        tokens = slice(graph.n_features + graph.n_errors, graph.n_features + graph.n_errors + graph.n_pos)
        expected[:, tokens] *= math.sqrt(model.cfg.d_model)
    assert graph.adjacency.shape == expected.shape
    scale = expected.abs().max()
    assert (graph.adjacency - expected).abs().max() <= 1e-4 * scale


@pytest.mark.parametrize("name", CASES)
def test_prune_and_scores_as_circuit_tracer(name):
    model, _, ref, meta = golden_case(name)
    n = ref["adjacency"].shape[0]
    n_pos, n_logits = len(ref["input_tokens"]), len(ref["logit_tokens"])
    graph = golden_graph(ref, model.cfg.n_layers)
    assert len(graph.nodes) == n and graph.n_pos == n_pos and graph.n_logits == n_logits
    pruned = graph.prune(0.8, 0.98)
    assert torch.equal(pruned.node_mask, ref["node_mask"])
    assert torch.equal(pruned.edge_mask, ref["edge_mask"])
    torch.testing.assert_close(pruned.cumulative_scores, ref["cumulative_scores"])
    replacement, completeness = graph.scores()
    assert replacement == pytest.approx(float(meta["replacement"]), rel=1e-5)
    assert completeness == pytest.approx(float(meta["completeness"]), rel=1e-5)
