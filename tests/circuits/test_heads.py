"""Head loadings split an edge exactly into the attention heads its paths last pass through."""

from __future__ import annotations

import pytest
import torch

from interp.analysis.node import Node
from interp.circuits import attribute
from interp.circuits.features import head_loadings
from tests.circuits.transcoders import family_model, input_site, tiny_transcoders
from tests.tolerance import EPS32, stages


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
        # the shares are differences of two forward passes read by the target, the edge a backward pass: both
        # carry the rounding of the stream the target reads, which scales with the read's terms |w| |x|
        bound = _rounding(model, tc, graph, str(target))
        assert abs(loads.total - loads.edge) <= bound, (
            str(target),
            str(source),
            loads.total,
            loads.edge,
            bound,
        )
    # an edge between positions can only pass through attention: nothing is direct (in a parallel block the
    # MLP does not read its own layer's attention, so a 2-layer GPT-NeoX has no such path at all: its shares
    # are rounding, far below those of a path)
    loads = head_loadings(model, tc, graph, last, first)
    assert loads.direct == 0.0
    through_heads = float(loads.heads.abs().sum())
    bound = _rounding(model, tc, graph, str(last))
    if model.cfg.parallel_attn_mlp:
        assert through_heads <= bound
    else:
        assert through_heads > 10 * bound


def test_an_error_at_the_first_position_writes_nothing_as_in_the_graph():
    """Nothing is attributed at the first position: the graph's error there is zero, and so is every share of
    an edge from it (the error the transcoder makes there is real, but no node carries it)."""
    model = family_model("llama3-rope")
    tc = tiny_transcoders(model.cfg, kind="skip", seed=3, input_site=input_site(model))
    graph = attribute(model, tc, torch.tensor([0, 5, 17, 9, 33, 2, 41]), max_logits=1, progress=False)
    for layer in range(model.cfg.n_layers):
        loads = head_loadings(model, tc, graph, "logit.0", f"L{layer}.error@0")
        assert loads.edge == 0.0 and loads.direct == 0.0 and not bool(loads.heads.any())


def _rounding(model, tc, graph, target: str) -> float:
    """``stages * eps * sum_i |w_i| |x_i|`` for the target's read of the stream: a feature's encoder row and
    its input at the target's position, or a logit's de-meaned unembedding column and the final stream at the
    last position."""
    node = Node.parse(target)
    hook = "unembed.hook_in" if node.kind == "logit" else tc.input_hook(node.layer)
    with torch.no_grad():
        _, cache = model.run_with_cache(graph.input_tokens[None], names_filter=hook)
        if node.kind == "logit":
            w_u = model.unembed.weight
            w = w_u[:, int(graph.logit_tokens[node.target])] - w_u.mean(1)
            x = cache[hook][0, -1]
        else:
            w, x = tc.encoder(node.layer, torch.tensor([node.feature]))[0], cache[hook][0, node.position]
        return stages(model.cfg.n_layers) * EPS32 * float(x.abs() @ w.abs())
