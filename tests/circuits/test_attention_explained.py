"""Attention explained in a graph's own nodes: the query-node x key-node terms of a head's score sum to the
score ``transformers`` computes (the model's own, which the replacement model with its error nodes equals), on
every family interp loads; each node's part is what removing its write from the frozen model removes from the
query and key; an edge's explanation picks its heads by their loadings; two keys give their difference.
"""

from __future__ import annotations

import json

import pytest
import torch

import interp
from interp.analysis.node import Node
from interp.analysis.qk import QKDifference, QKMatrix
from interp.circuits import attribute
from interp.circuits.features.attention import (
    BIAS,
    attention_edges,
    explain_edges,
    head_scores,
    key_difference,
    strongest_input,
)
from interp.circuits.features.heads import head_loadings
from interp.circuits.features.subgraph import neuronpedia_ids
from tests.analysis.qk_reference import embolden_gpt2_bert, reference_scores
from tests.circuits.test_attribute_exact import _cache, _pushed_run, _source_pushes
from tests.circuits.transcoders import input_site, tiny_transcoders
from tests.load.families import FAMILIES, WINDOW, build
from tests.tolerance import EPS32, float32_rounding, stages

VOCAB = 97
N_POS = 9
KINDS = ("per-layer", "skip", "clt")


def _family(name: str):
    reference = embolden_gpt2_bert(name, VOCAB) if name == "gpt2" else build(name, VOCAB)
    return reference, interp.from_hf(reference).eval()


def _tokens() -> torch.Tensor:
    tokens = torch.randint(2, VOCAB, (N_POS,), generator=torch.Generator().manual_seed(3))
    tokens[0] = 0
    return tokens


def _cases(model) -> list[tuple[int, int, int, int]]:
    """(layer, head, query, key): first, middle and last layer; keys near the query and far from it."""
    cfg = model.cfg
    query = N_POS - 1
    cases = []
    for layer in sorted({0, cfg.n_layers // 2, cfg.n_layers - 1}):
        far = 0 if cfg.window(layer) is None else query - WINDOW + 1
        for head, key in ((0, query), (cfg.n_heads - 1, far), (cfg.n_heads // 2, query - 2)):
            cases.append((layer, head, query, key))
    return cases


@pytest.mark.parametrize("name", sorted(FAMILIES) + ["gpt2"])
def test_terms_sum_to_the_score_transformers_computes(name):
    reference, model = _family(name)
    kind = KINDS[sorted([*FAMILIES, "gpt2"]).index(name) % 3]
    tc = tiny_transcoders(model.cfg, kind=kind, seed=3, input_site=input_site(model))
    tokens = _tokens()
    graph = attribute(model, tc, tokens, max_logits=2, progress=False)
    expected = reference_scores(reference, tokens[None])
    cases = _cases(model)
    scores = head_scores(model, tc, graph, cases)
    for layer, head, query, key in cases:
        found = scores[(layer, head, query, key)]
        matrix = found.matrix.double()
        want = float(expected[layer][head, query, key])
        # the terms are float32 dot products of parts that carry the stream's rounding: the sum errs by up to
        # one rounding of every product's elementwise terms |q_n,e| |k_m,e| per stage that made them
        inner = found.query_parts.abs().sum(0).double() @ found.key_parts.abs().sum(0).double()
        bound = stages(layer + 1) * EPS32 * float(inner) * found.scale
        assert abs(float(matrix.sum()) - want) <= bound, (layer, head, query, key, float(matrix.sum()), want)
        assert abs(found.score - want) <= bound
        assert found.query_components[-1] == found.key_components[-1] == BIAS
        nodes = set(map(str, graph.nodes))
        assert set(found.query_components[:-1]) <= nodes and set(found.key_components[:-1]) <= nodes
        # a causal query is made of nodes at its position and before, never after
        positions = [
            graph.nodes[graph.index(n)].position
            for n in (*found.query_components[:-1], *found.key_components[:-1])
        ]
        assert max(positions) <= query
        if layer > 0:  # later layers read features from the transcoders, not only tokens
            kinds = {graph.nodes[graph.index(n)].kind for n in found.query_components[:-1]}
            assert "feature" in kinds and "error" in kinds and "token" in kinds, kinds


@pytest.mark.parametrize(
    ("family", "kind"), [("llama3-rope", "clt"), ("gemma2", "skip"), ("gpt2", "per-layer")]
)
def test_each_part_is_what_removing_the_node_removes(family, kind):
    """Every node's write added on its own to the frozen model (a batch row per write, written here from the
    definition) moves the query and key by that node's part; float32 parts are checked against a float64 run."""
    _, model = _family(family)
    tc = tiny_transcoders(model.cfg, kind=kind, seed=3, input_site=input_site(model))
    tokens = _tokens()
    graph = attribute(model, tc, tokens, max_logits=2, progress=False)
    layer = model.cfg.n_layers - 1
    head, query, key = 1, N_POS - 1, N_POS - 3
    found = head_scores(model, tc, graph, [(layer, head, query, key)])[(layer, head, query, key)]
    group = head // model.cfg.group_size
    side = "rot_" if model.blocks[layer].attn.rotary else ""
    names = (f"blocks.{layer}.attn.hook_{side}q", f"blocks.{layer}.attn.hook_{side}k")

    moved = {}
    for dtype in (torch.float32, torch.float64):
        m, t = model.to(dtype), tc.to(dtype)
        frozen, cache = _cache(m, t, tokens)
        pushes, groups = _source_pushes(graph, m, t, cache)
        recorded: dict[str, torch.Tensor] = {}
        _pushed_run(m, t, tokens, frozen, cache, pushes, record=recorded, names=names)
        q = recorded[names[0]][:, query, head].double()  # [rows, d_head]
        k = recorded[names[1]][:, key, group].double()
        bounds = torch.tensor([0, *groups]).cumsum(0).tolist()
        moved[dtype] = [
            torch.stack(
                [
                    x[1 + a : 1 + b].sum(0) - (b - a) * x[0]
                    for a, b in zip(bounds[:-1], bounds[1:], strict=True)
                ]
            )
            for x in (q, k)
        ]  # per source node (column order), [n_sources, d_head]
    model.float(), tc.float()
    for i, (nodes, parts) in enumerate(
        ((found.query_components, found.query_parts), (found.key_components, found.key_parts))
    ):
        columns = [graph.index(n) for n in nodes[:-1]]
        ref64, plain32 = moved[torch.float64][i], moved[torch.float32][i]
        tol = 2 * float32_rounding(plain32, ref64)
        got = torch.zeros_like(ref64)
        got[columns] = parts[:-1].double()
        assert (got - ref64).abs().max() <= tol, (i, float((got - ref64).abs().max()), tol)
        kinds = {graph.nodes[c].kind for c in columns}
        assert kinds == {"feature", "error", "token"} and len(columns) >= 5  # not a trivial split


def test_an_edge_is_explained_by_its_top_heads_and_two_keys_by_their_difference():
    reference, model = _family("llama3-rope")
    tc = tiny_transcoders(model.cfg, kind="skip", seed=3, input_site=input_site(model))
    tokens = _tokens()
    graph = attribute(model, tc, tokens, max_logits=2, progress=False)
    edges = attention_edges(graph, 3)
    assert len(edges) == 3
    for target, source in edges:
        t, s = graph.nodes[graph.index(target)], graph.nodes[graph.index(source)]
        query = graph.n_pos - 1 if t.kind == "logit" else t.position
        assert s.position != query
    explained, *others = explain_edges(model, tc, graph, edges, top_heads=2, other_key=1)
    for found, (target, source) in zip(others, edges[1:], strict=True):  # edges batched: as one at a time
        alone = head_loadings(model, tc, graph, target, source)
        bound = stages(model.cfg.n_layers) * EPS32 * float(alone.heads.abs().sum() + abs(alone.edge))
        assert float((found.loadings.heads - alone.heads).abs().max()) <= bound
        assert found.loadings.edge == alone.edge
    target, source = edges[0]
    loads = head_loadings(model, tc, graph, target, source)
    bound = stages(model.cfg.n_layers) * EPS32 * float(loads.heads.abs().sum() + abs(loads.edge))
    assert float((explained.loadings.heads - loads.heads).abs().max()) <= bound
    top = loads.heads.flatten().abs().argsort(descending=True)[:2].tolist()
    n_heads = model.cfg.n_heads
    assert [(h.layer, h.head) for h in explained.heads] == [(i // n_heads, i % n_heads) for i in top]
    expected = reference_scores(reference, tokens[None])
    for h, diff in zip(explained.heads, explained.differences, strict=True):
        assert h.loading == float(loads.heads[h.layer, h.head])
        assert (h.query, h.key) == (graph.n_pos - 1, graph.nodes[graph.index(source)].position)
        assert h.pattern == pytest.approx(
            float(expected[h.layer][h.head, h.query].softmax(-1)[h.key]), rel=1e-4
        )
        assert diff.second.key == 1 and diff.first is h
        want = float(expected[h.layer][h.head, h.query, h.key] - expected[h.layer][h.head, h.query, 1])
        bound = stages(h.layer + 1) * EPS32 * float(diff.matrix.double().abs().sum())
        assert abs(float(diff.matrix.double().sum()) - want) <= bound
        # the difference is the two matrices on the union of their key nodes
        again = key_difference(h, diff.second)
        assert torch.equal(again.matrix, diff.matrix)
        assert diff.top(1)[0][2] == pytest.approx(
            float(diff.matrix.abs().max()) * (1 if diff.top(1)[0][2] > 0 else -1)
        )
    via = graph.explain_attention(model, tc, edges[0], top_heads=2, other_key=1)
    assert [h.score for h in via.heads] == [h.score for h in explained.heads]
    # a node is explained through its strongest input from another position
    node = edges[0][0]
    src = strongest_input(graph, node)
    row = graph.adjacency[graph.index(node)]
    others = [
        i
        for i, n in enumerate(graph.nodes)
        if n.kind != "logit"
        and n.position
        != (graph.n_pos - 1 if node.startswith("logit") else graph.nodes[graph.index(node)].position)
    ]
    assert graph.index(src) == max(others, key=lambda i: abs(float(row[i])))


def test_a_heads_score_reads_like_a_qk_attribution():
    """A score in graph nodes is the matrix type QK attribution returns: the same top terms, tables and
    marginals, with the graph's nodes (values) as its parts, and its key difference the same difference type."""
    _, model = _family("llama3-rope")
    tc = tiny_transcoders(model.cfg, kind="skip", seed=3, input_site=input_site(model))
    graph = attribute(model, tc, _tokens(), max_logits=1, progress=False)
    cases = [(1, 2, N_POS - 1, 3), (1, 2, N_POS - 1, 5)]
    first, second = (head_scores(model, tc, graph, cases)[c] for c in cases)
    assert isinstance(first, QKMatrix) and all(isinstance(n, Node) for n in first.query_components)
    matrix = first.matrix
    top = first.top(5)
    flat = sorted(matrix.flatten().tolist(), key=abs, reverse=True)[:5]
    assert [t.value for t in top] == flat
    for t in top:
        i, j = first.query_components.index(t.query), first.key_components.index(t.key)
        assert float(matrix[i, j]) == t.value
    table = first.table(5)
    assert table["query"].tolist() == [t.query.label for t in top] and table["value"].tolist() == flat
    assert first.query_marginal()["value"].sum() == pytest.approx(first.score, rel=1e-5)
    assert BIAS in first.key_components and first.key_marginal()["kind"].tolist().count("rest") == 1
    diff = key_difference(first, second)
    assert isinstance(diff, QKDifference) and diff.query_components == first.query_components
    expected = torch.zeros(len(diff.query_components), len(diff.key_components), dtype=torch.float64)
    for score, sign in ((first, 1.0), (second, -1.0)):
        columns = [diff.key_components.index(n) for n in score.key_components]
        expected[:, columns] += sign * score.matrix.double()
    assert torch.equal(diff.matrix, expected.float())
    assert diff.total == pytest.approx(first.score - second.score, rel=1e-5, abs=1e-6)
    with pytest.raises(ValueError, match="top must be a positive integer, got 0"):
        first.top(0)


def test_bad_requests_are_refused_before_any_work():
    _, model = _family("llama3-rope")
    tc = tiny_transcoders(model.cfg, kind="skip", seed=3, input_site=input_site(model))
    graph = attribute(model, tc, _tokens(), max_logits=1, progress=False)
    assert explain_edges(model, tc, graph, []) == [] and head_scores(model, tc, graph, []) == {}
    with pytest.raises(KeyError, match="the graph has no node 'L9.F1@2'"):
        explain_edges(model, tc, graph, [("logit.0", "L9.F1@2")])
    with pytest.raises(ValueError, match="stays at position 8; explain an edge between two positions"):
        explain_edges(model, tc, graph, [("logit.0", "token@8")])
    with pytest.raises(ValueError, match="top_heads must be a positive integer, got 0"):
        explain_edges(model, tc, graph, [("logit.0", "token@2")], top_heads=0)
    with pytest.raises(ValueError, match="other_key must be a position of the prompt, 0..8; got 9"):
        explain_edges(model, tc, graph, [("logit.0", "token@2")], other_key=9)
    with pytest.raises(ValueError, match="head L5H0 is not in a model of 2 x 4 heads"):
        head_scores(model, tc, graph, [(5, 0, 8, 2)])


def test_a_node_is_explained_through_its_strongest_input_from_another_position():
    _, model = _family("llama3-rope")
    tc = tiny_transcoders(model.cfg, kind="skip", seed=3, input_site=input_site(model))
    graph = attribute(model, tc, _tokens(), max_logits=1, progress=False)
    found = graph.explain_attention(model, tc, "logit.0", top_heads=1)
    assert found.source == strongest_input(graph, "logit.0") and found.target == "logit.0"
    with pytest.raises(ValueError, match="token@0 has no input edge from another position"):
        strongest_input(graph, "token@0")


def test_explained_edges_are_saved_in_the_extension(tmp_path):
    _, model = _family("llama3-rope")
    tc = tiny_transcoders(model.cfg, kind="skip", seed=3, input_site=input_site(model))
    graph = attribute(model, tc, _tokens(), max_logits=1, progress=False)
    explained = explain_edges(model, tc, graph, attention_edges(graph, 2), top_heads=2, other_key=1)
    graph.save(tmp_path, model=model, attention=explained)
    doc = json.loads((tmp_path / "graph.json").read_text())
    records = doc["interp"]["attention"]
    assert doc["interp"]["version"] == 1 and "subgraph" not in doc["interp"]
    ids = neuronpedia_ids(graph, model.cfg.d_vocab)
    for record, found in zip(records, explained, strict=True):
        assert (record["target"], record["source"]) == (found.target, found.source)
        assert record["target_id"] == ids[found.target] and record["edge"] == found.loadings.edge
        for saved, head in zip(record["heads"], found.heads, strict=True):
            assert (saved["layer"], saved["head"], saved["query"], saved["key"]) == (
                head.layer, head.head, head.query, head.key
            )  # fmt: skip
            terms = [(saved["query_nodes"][i], saved["key_nodes"][j], v) for i, j, v in saved["terms"]]
            assert terms == head.top(40)
            assert saved["query_ids"][: len(head.query_components) - 1] == [
                ids[n] for n in head.query_components[:-1]
            ]
            assert sum(v for _, _, v in terms) + saved["rest"] == pytest.approx(head.score, rel=1e-6)
        assert [d["second_key"] for d in record["differences"]] == [1] * len(found.heads)
