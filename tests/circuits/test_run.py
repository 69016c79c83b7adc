"""Running a circuit: all edges kept is the clean model, none the corrupted one, and any circuit equals the
by-hand definition (tests/circuits/models.py)."""

import pytest
import torch

from interp.circuits import Circuit, Graph, Pairs, corrupt_run, evaluate, logit_difference, run_circuit
from interp.circuits.run import circuit_hooks, sources_read
from interp.circuits.wiring import forward, input_hooks, source_hooks
from tests.circuits.models import by_hand_circuit, by_hand_logits, tiny, tiny_pairs
from tests.tolerance import assert_within, logit_bound


@pytest.mark.parametrize("name", ["gpt2", "llama-gqa", "neox"])
@pytest.mark.parametrize("positions", [False, True])
def test_all_edges_kept_is_the_clean_model_and_none_the_corrupted_one(name, positions):
    model = tiny(name)
    pairs = tiny_pairs(model, positions=positions)
    graph = Graph.from_model(model)
    full = run_circuit(model, Circuit.full(graph), pairs)
    empty = run_circuit(model, Circuit.empty(graph), pairs)
    with model.split_inputs():  # the same computation, in kernels of other shapes
        clean_split = forward(model, pairs.clean, None, pairs.positions)
    corrupt = corrupt_run(model, pairs)
    read = slice(None) if not positions else slice(-1, None)
    # the split-input forward, and the plain forward (fused projections), sum in other orders: equal to
    # float32 rounding of the logits' terms, whichever kernels the CPU runs
    bound = {}
    for name, tokens in (("clean", pairs.clean), ("corrupt", pairs.corrupt)):
        _, cache = model.run_with_cache(tokens, names_filter="unembed.hook_in")
        bound[name] = logit_bound(model, cache["unembed.hook_in"][:, read])
    assert_within(full, clean_split, bound["clean"], "all edges against the split-input forward")
    assert_within(empty, corrupt.logits, bound["corrupt"], "no edge against the corrupted run")
    assert_within(full, model(pairs.clean)[:, read], bound["clean"], "all edges against the plain forward")
    assert_within(empty, model(pairs.corrupt)[:, read], bound["corrupt"], "no edge against the plain forward")
    assert (full - empty).abs().max() > 1e3 * bound["clean"].max()  # the two inputs really differ


def test_the_by_hand_model_is_the_model():
    model = tiny("gpt2")
    tokens = tiny_pairs(model).clean
    torch.testing.assert_close(by_hand_logits(model, tokens[0]), model(tokens)[0], atol=1e-5, rtol=1e-5)


def test_circuits_equal_the_by_hand_definition():
    model = tiny("gpt2")
    pairs = tiny_pairs(model)
    graph = Graph.from_model(model)
    g = torch.Generator().manual_seed(3)
    for fraction in (0.1, 0.5, 0.9):
        mask = graph.allowed & (torch.rand(graph.allowed.shape, generator=g) < fraction)
        circuit = Circuit(graph, mask)
        got = run_circuit(model, circuit, pairs)
        keep = set(circuit.edges)
        for row in range(len(pairs)):
            want = by_hand_circuit(model, pairs.clean[row], pairs.corrupt[row], keep)
            torch.testing.assert_close(got[row], want, atol=2e-5, rtol=1e-5)


def test_one_corrupted_run_serves_many_circuits():
    model = tiny("llama-gqa")
    pairs = tiny_pairs(model)
    graph = Graph.from_model(model)
    half = torch.rand(graph.allowed.shape, generator=torch.Generator().manual_seed(4)) < 0.5
    circuit = Circuit(graph, graph.allowed & half)
    corrupt = corrupt_run(model, pairs, sources=sources_read([circuit]))
    # the very same operations on the same values, whether the corrupted run is passed or made: to the bit
    torch.testing.assert_close(
        run_circuit(model, circuit, pairs, corrupt), run_circuit(model, circuit, pairs), atol=0, rtol=0
    )
    # a corrupted run that records every source serves it too (other kernels where no head output is hooked)
    everything = corrupt_run(model, pairs)
    assert bool(everything.recorded.all())
    torch.testing.assert_close(
        run_circuit(model, circuit, pairs, everything),
        run_circuit(model, circuit, pairs),
        atol=2e-5,
        rtol=1e-5,
    )


def test_only_a_partly_kept_circuit_records_the_sources():
    model = tiny("llama-gqa")
    pairs = tiny_pairs(model)
    graph = Graph.from_model(model)
    corrupt = corrupt_run(model, pairs)
    # every edge kept: the clean forward, untouched; none kept: each input replaced by the corrupted stream
    assert circuit_hooks(model, Circuit.full(graph), corrupt) == []
    empty = circuit_hooks(model, Circuit.empty(graph), corrupt)
    assert [name for name, _ in empty] == [spec.name for spec in input_hooks(graph)]
    one = graph.allowed.clone()
    u, v = graph.allowed.nonzero()[-1].tolist()  # the last edge: a late source into a late input
    one[u, v] = False  # one edge removed: only its source's hook records, the input subtracts it
    read = sources_read([Circuit(graph, one)])
    assert read.nonzero().flatten().tolist() == [u]
    holding = [spec.name for spec in source_hooks(graph) if spec.rows.start <= u < spec.rows.stop]
    names = [name for name, _ in circuit_hooks(model, Circuit(graph, one), corrupt)]
    assert [n for n in names if n in {spec.name for spec in source_hooks(graph)}] == holding
    assert len(names) == len(holding) + 1  # and the one input it patches


def test_a_corrupted_run_that_lacks_a_source_a_circuit_reads_is_refused():
    model = tiny("gpt2")
    pairs = tiny_pairs(model)
    graph = Graph.from_model(model)
    one = graph.allowed.clone()
    u, v = graph.allowed.nonzero()[-1].tolist()
    one[u, v] = False
    others = torch.ones(len(graph.sources), dtype=torch.bool)
    for spec in source_hooks(graph):
        if spec.rows.start <= u < spec.rows.stop:
            others[spec.rows] = False
    corrupt = corrupt_run(model, pairs, sources=others)
    assert not bool(corrupt.recorded[u])
    with pytest.raises(ValueError, match=f"did not record 1 source.*{graph.sources[u]}.*sources_read"):
        run_circuit(model, Circuit(graph, one), pairs, corrupt)
    with pytest.raises(ValueError, match="one flag per source"):
        corrupt_run(model, pairs, sources=others[:-1])


def test_evaluating_circuits_together_equals_each_alone():
    model = tiny("llama-gqa")
    pairs = tiny_pairs(model)
    graph = Graph.from_model(model)
    g = torch.Generator().manual_seed(5)
    circuits = [
        Circuit(graph, graph.allowed & (torch.rand(graph.allowed.shape, generator=g) < f)) for f in (0.2, 0.7)
    ]
    together = evaluate(model, circuits, pairs, logit_difference)
    for circuit, value in zip(circuits, together.values, strict=True):
        alone = evaluate(model, circuit, pairs, logit_difference)
        assert value == pytest.approx(alone.values[0], rel=1e-5, abs=1e-5)
        assert together.full == pytest.approx(alone.full, rel=1e-5, abs=1e-5)
    read = sources_read(circuits)
    assert bool((read == (sources_read(circuits[:1]) | sources_read(circuits[1:]))).all())


def test_a_circuit_of_another_graph_is_refused():
    model = tiny("gpt2")
    other = Graph(n_layers=3, n_heads=2, n_kv_heads=2)
    with pytest.raises(ValueError, match="belong to Graph\\(3 layers"):
        run_circuit(model, Circuit.full(other), tiny_pairs(model))


def test_padding_on_the_right_leaves_real_positions_alone():
    model = tiny("gpt2")
    pairs = tiny_pairs(model, n=2, n_pos=6)
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[:, 6:] = 0
    padded = Pairs(
        clean=torch.cat([pairs.clean, torch.zeros(2, 2, dtype=torch.long)], 1),
        corrupt=torch.cat([pairs.corrupt, torch.zeros(2, 2, dtype=torch.long)], 1),
        attention_mask=mask,
    )
    graph = Graph.from_model(model)
    circuit = Circuit(graph, graph.allowed & (torch.rand(graph.allowed.shape) < 0.5))
    torch.testing.assert_close(
        run_circuit(model, circuit, padded)[:, :6], run_circuit(model, circuit, pairs), atol=1e-5, rtol=1e-5
    )
