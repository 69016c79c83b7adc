"""Head loadings split an edge exactly into the attention heads its paths last pass through."""

from __future__ import annotations

import pytest
import torch

from interp.circuits import attribute
from interp.circuits.features import head_loadings
from tests.circuits.transcoders import family_model, input_site, tiny_transcoders


@pytest.mark.parametrize(
    ("family", "kind"), [("llama3-rope", "skip"), ("gemma2", "clt"), ("pythia", "per-layer")]
)
def test_loadings_sum_to_the_edge(family, kind):
    model = family_model(family)
    tc = tiny_transcoders(model.cfg, kind=kind, seed=3, input_site=input_site(model))
    tokens = torch.tensor([0, 5, 17, 9, 33, 2, 41])
    graph = attribute(model, tc, tokens, max_logits=2, progress=False)
    last = graph.nodes[graph.n_features - 1]  # a feature of the last layer: paths through several heads
    first = next(
        n for n in graph.nodes if n.kind == "feature" and n.layer < last.layer and n.position < last.position
    )
    cases = [
        (last, first),
        (last, graph.nodes[graph.n_features + 1]),
        ("logit.0", "token@2"),
        ("logit.0", last),
    ]
    for target, source in cases:
        loads = head_loadings(model, tc, graph, target, source)
        assert loads.heads.shape == (model.cfg.n_layers, model.cfg.n_heads)
        scale = max(abs(loads.edge), float(loads.heads.abs().max()), 1e-6)
        assert loads.total == pytest.approx(loads.edge, abs=1e-4 * scale)
    # an edge between positions can only pass through attention: nothing is direct (in a parallel block the
    # MLP does not read its own layer's attention, so a 2-layer GPT-NeoX has no such path at all)
    loads = head_loadings(model, tc, graph, last, first)
    assert loads.direct == 0.0
    assert (loads.heads.abs().sum() > 0) != model.cfg.parallel_attn_mlp
