"""Experts as circuit nodes: EAP, EAP-IG and exact edge patching on a tiny Qwen2-MoE (a mixture-of-experts layer
with a gated shared expert, a dense layer, another mixture-of-experts layer) in float64, against quantities made
here: each expert's write computed token by token from the weights (:func:`naive_moe_writes`), the gradient at
each node input by autograd on a plain run, the first-order score by central finite differences of the metric
with the edge's difference scaled in, and the exact score by patching the edge by hand."""

from __future__ import annotations

import copy
import functools

import pytest
import torch
import torch.nn.functional as F

from interp.analysis.expert_writes import expert_write_names, expert_writes
from interp.circuits import Circuit, Graph, Node, Pairs, eap, eap_ig, exact_edge_scores, logit_difference
from interp.circuits.run import run_circuit
from interp.circuits.wiring import source_hooks, source_recorders
from tests.analysis.moe_models import naive_moe_writes, pair, tokens

N_POS = 6


@functools.cache
def model64(name: str = "qwen2-moe"):
    return copy.deepcopy(pair(name)[1]).double().eval()


def pairs() -> Pairs:
    clean = tokens(3, N_POS, seed=8)
    corrupt = clean.clone()
    corrupt[:, 2] = tokens(3, 1, seed=9)[:, 0]
    corrupt[:, 4] = tokens(3, 1, seed=10)[:, 0]
    return Pairs(
        clean, corrupt, labels={"answer": torch.tensor([3, 9, 11]), "foil": torch.tensor([7, 4, 20])}
    )


def _moe_input(model, resid_mid: torch.Tensor, layer: int) -> torch.Tensor:
    """``ln2`` (an RMSNorm) of the stream, by hand."""
    ln2 = model.blocks[layer].ln2
    return resid_mid / (resid_mid.pow(2).mean(-1, keepdim=True) + model.cfg.eps).sqrt() * ln2.w


def _naive_outputs(model, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every source node's output ``[batch, pos, d_model]``: experts by hand, the rest from the stream."""
    n = model.cfg.n_layers
    names = ["blocks.0.hook_resid_pre"] + [
        f"blocks.{l}.hook_{w}" for l in range(n) for w in ("resid_mid", "mlp_out")
    ]
    names += [f"blocks.{l}.attn.hook_result" for l in range(n)]
    with torch.no_grad():
        _, cache = model.run_with_cache(ids, names_filter=names)
    out = {"input": cache["blocks.0.hook_resid_pre"]}
    for l in range(n):
        for h in range(model.cfg.n_heads):
            out[Node.head_node(l, h)] = cache[f"blocks.{l}.attn.hook_result"][:, :, h]
        if model.cfg.mlp_types[l] == "dense":
            out[Node.mlp(l)] = cache[f"blocks.{l}.hook_mlp_out"]
            continue
        writes = naive_moe_writes(model, l, _moe_input(model, cache[f"blocks.{l}.hook_resid_mid"], l))
        for e in range(model.cfg.n_experts):
            out[Node.expert_node(l, e)] = writes[e]
        if model.cfg.d_shared_expert is not None:
            out[Node.shared_expert(l)] = writes[-1]
    return out


def _input_hook(model, node: Node) -> tuple[str, int | None]:
    """The split-input hook holding ``node`` and its index on the head axis (``None``: no head axis)."""
    if node.kind == "output":
        return f"blocks.{model.cfg.n_layers - 1}.hook_resid_post", None
    kind = {"query": ("q", node.head), "key": ("k", node.group), "value": ("v", node.group)}.get(node.kind)
    if kind is None:
        return f"blocks.{node.layer}.hook_mlp_in", None
    return f"blocks.{node.layer}.hook_{kind[0]}_input", kind[1]


def _metric(model, batch: Pairs, hooks=()) -> torch.Tensor:
    """The mean logit difference over the pairs, their clean inputs run with ``hooks`` (inputs split), in float64."""
    with model.split_inputs(), torch.no_grad():
        logits = model.run_with_hooks(batch.clean, fwd_hooks=list(hooks))[
            :, -1
        ]  # float64, unlike the metric's
    rows = torch.arange(len(batch))
    return (logits[rows, batch.labels["answer"]] - logits[rows, batch.labels["foil"]]).mean()


def _shift(model, target: Node, delta: torch.Tensor, t: float):
    """A hook subtracting ``t * delta`` from the input ``target``."""
    name, slot = _input_hook(model, target)

    def shift(x, hook):
        x = x.clone()
        if slot is None:
            x -= t * delta
        else:
            x[:, :, slot] -= t * delta
        return x

    return name, shift


def _gradients(model, batch: Pairs, targets: list[Node], alpha: float = 1.0) -> dict[Node, torch.Tensor]:
    """``d (sum of the metric) / d input`` of each target on the clean inputs, with the stream entering block 0
    at ``corrupt + alpha * (clean - corrupt)``."""
    with torch.no_grad():
        _, cache = model.run_with_cache(batch.corrupt, names_filter="blocks.0.hook_resid_pre")
    start = cache["blocks.0.hook_resid_pre"]
    leaves: dict[str, torch.Tensor] = {}

    def interpolate(x, hook):
        return start + alpha * (x - start)

    def keep(x, hook):  # the gradient at this input alone (the MLP's input is the stream's own tensor)
        leaves[hook.name] = x.clone()
        leaves[hook.name].retain_grad()
        return leaves[hook.name]

    names = sorted({_input_hook(model, t)[0] for t in targets})
    with model.split_inputs(), torch.enable_grad():
        logits = model.run_with_hooks(
            batch.clean, fwd_hooks=[("blocks.0.hook_resid_pre", interpolate), (names, keep)]
        )
        logit_difference(logits, batch).sum().backward()
    grads = {}
    for t in targets:
        name, slot = _input_hook(model, t)
        g = leaves[name].grad
        grads[t] = g if slot is None else g[:, :, slot]
    return grads


EDGES = [
    ("L0.E{a}", "L1.MLP"),
    ("L0.E{a}", "L2.H1.q"),
    ("L0.E{b}", "L1.KV0.v"),
    ("L0.SE", "L2.MLP"),
    ("L0.E{b}", "logits"),
    ("L2.E{c}", "logits"),
    ("L2.SE", "logits"),
    ("input", "L0.MLP"),
    ("L1.MLP", "L2.MLP"),
    ("L0.H2", "L2.MLP"),
]


@functools.cache
def edges() -> list[tuple[Node, Node]]:
    """:data:`EDGES` with ``a``, ``b``, ``c`` experts whose clean and corrupted writes differ most."""
    model, batch = model64(), pairs()
    clean, corrupt = _naive_outputs(model, batch.clean), _naive_outputs(model, batch.corrupt)
    size = lambda l, e: float((clean[Node.expert_node(l, e)] - corrupt[Node.expert_node(l, e)]).abs().sum())  # noqa: E731
    first = sorted(range(8), key=lambda e: -size(0, e))
    chosen = {"a": first[0], "b": first[1], "c": max(range(8), key=lambda e: size(2, e))}
    return [(Node.parse(u.format(**chosen)), Node.parse(v)) for u, v in EDGES]


def test_the_graph_has_experts_as_nodes():
    graph = Graph.from_model(model64())
    layer0 = [f"L0.E{e}" for e in range(8)] + ["L0.SE"]
    assert list(graph.sources[:14]) == ["input", "L0.H0", "L0.H1", "L0.H2", "L0.H3", *layer0]
    assert "L1.MLP" in graph.sources and "L2.MLP" not in graph.sources and "L2.SE" in graph.sources
    assert graph.heads_of("L0.MLP") == layer0
    assert graph.n_readable(graph.input_index("L1.H0.q")) == 14  # input, layer 0's heads and experts
    assert Graph.from_dict(graph.to_dict()) == graph
    assert graph.experts == (8, 0, 8) and graph.shared_expert


def test_the_shared_experts_row_is_its_own_write_not_the_layers_rest():
    """In bfloat16, with routed writes 64 times larger than usual, the shared expert's row (the one circuits
    record, and expert attribution's term) is its gated output, computed here in float64 from the same bfloat16
    weights and input. Each rounding of the shared path (its two projections, the unit, the output projection,
    the gate's projection and sigmoid: bfloat16 keeps 8 bits) errs by at most eps / 2 of what it rounds and
    reaches the write through the output projection's terms ``gate |h_i| |W_out[i]|``: 4 eps of those terms
    bound them all. The layer's output less its routed rows errs by the rounding of the whole output instead,
    about eps of the routed writes, some hundred times that bound here."""
    model = copy.deepcopy(pair("qwen2-moe")[1])
    with torch.no_grad():
        for layer in (0, 2):
            model.blocks[layer].mlp.W_out.mul_(64)  # a power of two: exact in any precision
    model = model.to(torch.bfloat16)
    eps = torch.finfo(torch.bfloat16).eps
    spec = {s.name: s for s in source_hooks(Graph.from_model(model))}
    ids = tokens(3, N_POS)
    for layer in (0, 2):
        name = f"blocks.{layer}.hook_mlp_out"
        recorded: list[torch.Tensor] = []
        inputs: list[torch.Tensor] = []
        handle = model.blocks[layer].mlp.register_forward_pre_hook(
            lambda m, args, seen=inputs: seen.append(args[0])
        )
        try:
            with torch.no_grad():
                hooks = source_recorders(model, spec[name], recorded.append)
                _, cache = model.run_with_cache(
                    ids, names_filter=expert_write_names(model, layer), fwd_hooks=hooks
                )
        finally:
            handle.remove()
        (rows,) = recorded
        x = inputs[0].double()
        expected = naive_moe_writes(model, layer, x)  # [expert + shared, batch, pos, d_model]
        shared = model.blocks[layer].mlp.shared_expert
        hidden = F.silu(x @ shared.W_gate.double()) * (x @ shared.W_in.double())
        gate = torch.sigmoid(x @ model.blocks[layer].mlp.W_shared_gate.double())
        bound = 4 * eps * gate * (hidden.abs() @ shared.W_out.double().abs())
        assert ((rows[-1].double() - expected[-1]).abs() <= bound).all()
        assert ((expert_writes(model, cache, layer)[1][-1].double() - expected[-1]).abs() <= bound).all()
        assert float(expected[:-1].abs().max()) > 30 * float(expected[-1].abs().max())  # the routed writes


def test_eap_scores_expert_edges_as_the_gradient_and_finite_differences_say():
    model, batch = model64(), pairs()
    clean, corrupt = _naive_outputs(model, batch.clean), _naive_outputs(model, batch.corrupt)
    scores = eap(model, batch, logit_difference)
    grads = _gradients(model, batch, [v for _, v in edges()])
    for u, v in edges():
        delta = clean[u] - corrupt[u]  # [batch, pos, d_model]
        by_gradient = float((delta * grads[v]).sum()) / len(batch)
        assert scores[u, v] == pytest.approx(by_gradient, rel=1e-5, abs=1e-7), (u, v)
        h = 1e-2  # the norms' statistics and the router's softmax run in float32: rounding / 2h stays ~5e-6
        by_difference = float(
            _metric(model, batch, [_shift(model, v, delta, -h)])
            - _metric(model, batch, [_shift(model, v, delta, h)])
        ) / (2 * h)
        assert scores[u, v] == pytest.approx(by_difference, rel=1e-4, abs=2e-5), (u, v)
    assert min(abs(scores[e]) for e in edges()) > 1e-4  # every edge checked carries a score


def test_eap_ig_averages_the_gradient_along_the_path():
    model, batch = model64(), pairs()
    clean, corrupt = _naive_outputs(model, batch.clean), _naive_outputs(model, batch.corrupt)
    scores = eap_ig(model, batch, logit_difference, steps=3)
    targets = [v for _, v in edges()]
    steps = [_gradients(model, batch, targets, alpha) for alpha in (1 / 3, 2 / 3, 1.0)]
    for u, v in edges():
        grad = sum(s[v] for s in steps) / 3
        expected = float(((clean[u] - corrupt[u]) * grad).sum()) / len(batch)
        assert scores[u, v] == pytest.approx(expected, rel=1e-5, abs=1e-7), (u, v)


def test_exact_scores_patch_one_expert_edge():
    model, batch = model64(), pairs()
    clean, corrupt = _naive_outputs(model, batch.clean), _naive_outputs(model, batch.corrupt)
    scores = exact_edge_scores(model, batch, logit_difference, edges(), edges_per_pass=4)
    base = _metric(model, batch)
    for u, v in edges():
        by_hand = float(base - _metric(model, batch, [_shift(model, v, clean[u] - corrupt[u], 1.0)]))
        assert scores[u, v] == pytest.approx(by_hand, rel=1e-5, abs=2e-6), (u, v)  # float32 metric


def test_the_full_and_empty_circuits_are_the_clean_and_corrupted_runs():
    model, batch = model64(), pairs()
    graph = Graph.from_model(model)
    with torch.no_grad():
        # norms' statistics and the router's softmax run in float32, so the split run and the plain one differ
        # by float32 rounding
        tol = dict(atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(run_circuit(model, Circuit.full(graph), batch), model(batch.clean), **tol)
        torch.testing.assert_close(
            run_circuit(model, Circuit.empty(graph), batch), model(batch.corrupt), **tol
        )
        # a path of kept edges: the input into layer 0's MoE, its experts into layer 2's MoE, and layer 2's
        # experts into the logits; every other input reads the corrupted stream
        keep = [("input", "L0.MLP")] + [(u, "L2.MLP") for u in graph.mlp_nodes(0)]
        keep += [(u, "logits") for u in graph.mlp_nodes(2)]
        partial = run_circuit(model, Circuit.from_edges(graph, keep), batch)
        _, cache = model.run_with_cache(batch.corrupt, names_filter="blocks.*.hook_resid_*")
    clean, corrupt = _naive_outputs(model, batch.clean), _naive_outputs(model, batch.corrupt)

    def patched(layer: int, moe_in: torch.Tensor) -> torch.Tensor:
        """The sum of the layer's experts' differences from their corrupted writes, on ``moe_in``."""
        writes = naive_moe_writes(model, layer, _moe_input(model, moe_in, layer))
        return sum(writes[i] - corrupt[u] for i, u in enumerate(graph.mlp_nodes(layer)))

    first = patched(0, cache["blocks.0.hook_resid_mid"] + clean["input"] - corrupt["input"])
    final = cache["blocks.2.hook_resid_post"] + patched(2, cache["blocks.2.hook_resid_mid"] + first)
    with torch.no_grad():
        expected = model.run_with_hooks(
            batch.clean, fwd_hooks=[("blocks.2.hook_resid_post", lambda x, h: final)]
        )
    torch.testing.assert_close(partial, expected, **tol)
    assert (partial - model(batch.corrupt)).abs().max() > 1e-2


def test_a_drawn_circuit_places_experts_right_of_the_heads():
    from interp.circuits import draw_circuit

    graph = Graph.from_model(model64())
    circuit = Circuit.from_edges(graph, [("input", "L0.MLP"), ("L0.E5", "L2.H1.q"), ("L0.SE", "logits")])
    fig = draw_circuit(circuit)
    where = {t.get_text(): t.xy for t in fig.axes[0].texts}
    assert where["E5"] == (4 + 0.4 + 5 * 0.8, 1.0) and where["SE"] == (4 + 0.4 + 8 * 0.8, 1.0)
    assert where["H1"] == (1.0, 2.0) and fig.axes[0].get_xlim()[1] == pytest.approx(4 + 0.4 + 8 * 0.8 + 0.8)


GPT_OSS_EDGES = [
    ("L0.E{a}", "L1.MLP"),
    ("L0.E{a}", "L2.H1.q"),
    ("L1.E{b}", "L2.KV0.v"),
    ("L1.E{b}", "logits"),
    ("L2.E{c}", "logits"),
    ("L0.H2", "L2.MLP"),
]


def test_gpt_oss_experts_sum_to_the_layer_and_score_as_patching_says():
    """GPT-OSS (a router with a bias, the clamped unit with biases, attention sinks): each expert's write by hand
    sums to ``hook_mlp_out``; EAP is the autograd gradient at the input times the source's difference and what
    central finite differences of the metric give; exact scores match edges patched by hand."""
    model, batch = model64("gpt-oss"), pairs()
    clean, corrupt = _naive_outputs(model, batch.clean), _naive_outputs(model, batch.corrupt)
    with torch.no_grad():
        _, cache = model.run_with_cache(batch.clean, names_filter="blocks.*.hook_mlp_out")
    for l in range(model.cfg.n_layers):
        total = sum(clean[Node.expert_node(l, e)] for e in range(model.cfg.n_experts))
        # float64 throughout but the router's softmax and the norms' statistics, in float32
        torch.testing.assert_close(total, cache[f"blocks.{l}.hook_mlp_out"], atol=1e-5, rtol=1e-5)
    size = lambda l, e: float((clean[Node.expert_node(l, e)] - corrupt[Node.expert_node(l, e)]).abs().sum())  # noqa: E731
    biggest = {l: sorted(range(model.cfg.n_experts), key=lambda e: -size(l, e))[0] for l in range(3)}
    chosen = {"a": biggest[0], "b": biggest[1], "c": biggest[2]}
    edges = [(Node.parse(u.format(**chosen)), Node.parse(v)) for u, v in GPT_OSS_EDGES]
    scores = eap(model, batch, logit_difference)
    grads = _gradients(model, batch, [v for _, v in edges])
    exact = exact_edge_scores(model, batch, logit_difference, edges, edges_per_pass=3)
    base = _metric(model, batch)
    for u, v in edges:
        delta = clean[u] - corrupt[u]  # [batch, pos, d_model]
        by_gradient = float((delta * grads[v]).sum()) / len(batch)
        assert scores[u, v] == pytest.approx(by_gradient, rel=1e-5, abs=1e-7), (u, v)
        # Central differences err by the h^2 curvature term (the clamped unit bends more than Qwen's SiLU: 3.3e-5
        # on the largest edge here at h = 1e-2, 2.3e-4 at 3e-2) plus float32 rounding / 2h (about 1e-5 at 1e-2).
        h = 1e-2
        by_difference = float(
            _metric(model, batch, [_shift(model, v, delta, -h)])
            - _metric(model, batch, [_shift(model, v, delta, h)])
        ) / (2 * h)
        assert scores[u, v] == pytest.approx(by_difference, rel=1e-4, abs=6e-5), (u, v)
        by_hand = float(base - _metric(model, batch, [_shift(model, v, delta, 1.0)]))
        assert exact[u, v] == pytest.approx(by_hand, rel=1e-5, abs=2e-6), (u, v)
    assert min(abs(scores[e]) for e in edges) > 1e-4  # every edge checked carries a score
