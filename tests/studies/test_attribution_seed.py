"""The seed's question in the attribution study, on a tiny random Llama with random transcoders: the referent's
edge is the one the definition names, its heads' terms sum to the score the model computes, the matched random
nodes share the named nodes' positions and are drawn reproducibly, the intervention zeroes exactly the named
nodes, and the summaries' intervals are the grouped bootstrap."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from interp.analysis.node import Node
from interp.circuits.features import head_loadings
from interp.load import load
from studies.attribution import graphs, seed, seed_answer
from studies.attribution.interventions import target_value
from studies.attribution.prompts import agreement_prompts, seed_prompts
from studies.data.load import load_items
from tests.circuits.transcoders import tiny_transcoders
from tests.studies.test_attribution_study import _grouped_interval, corpus, folder  # noqa: F401  (fixtures)

SETTINGS = graphs.GraphSettings(max_feature_nodes=40, batch_size=128, top=3)


@pytest.fixture(scope="module")
def setup(folder):  # noqa: F811
    model = load(folder)
    tc = tiny_transcoders(model.cfg, d_transcoder=48, seed=1)
    return model, tc


def _graph(model, tc, prompt):
    return graphs.draw(model, tc, prompt, SETTINGS, False)


def test_the_edge_is_the_one_the_definition_names(setup):
    model, tc = setup
    prompts = [*seed_prompts(model), *agreement_prompts(model, load_items("agreement"), 1)]
    for prompt in prompts:
        graph = _graph(model, tc, prompt)
        word = {"seed-tired": "animal", "seed-wide": "street"}.get(prompt.name, "name")
        assert seed.candidates(prompt)[0] == word
        at = set(prompt.roles[word])
        edges = {
            str(n): graph.edge("logit.0", n)
            for n in graph.nodes
            if n.kind in ("feature", "token") and n.position in at
        }
        want = max(edges, key=lambda n: abs(edges[n]))
        target, source = seed.referent_edge(graph, prompt)
        assert (target, source) == ("logit.0", want) and edges[want] != 0
        assert (
            graph.nodes[graph.index(source)].position < graph.n_pos - 1
        )  # between positions: through attention


def test_terms_sum_to_the_score_the_model_computes(setup):
    model, tc = setup
    tired = seed_prompts(model)[0]
    graph = _graph(model, tc, tired)
    _, source = seed.referent_edge(graph, tired)
    other = tired.roles["street"][-1]
    found = seed.explain_edge(model, tc, graph, source, top_heads=3, other_key=other)
    # the heads are those with the largest loadings of the difference (first token's minus second's)
    a = head_loadings(model, tc, graph, "logit.1", source)
    b = head_loadings(model, tc, graph, "logit.2", source)
    loads = a.heads - b.heads
    order = loads.flatten().abs().argsort(descending=True)[:3].tolist()
    assert [(h.layer, h.head) for h in found.heads] == [divmod(j, loads.shape[1]) for j in order]
    assert found.edge == pytest.approx(graph.edge("logit.0", source), rel=1e-4, abs=1e-6)
    names = sorted({f"blocks.{h.layer}.attn.hook_attn_scores" for h in found.heads})
    _, cache = model.run_with_cache(tired.tokens[None], names_filter=names)
    query, key = graph.n_pos - 1, graph.nodes[graph.index(source)].position
    for h, d in zip(found.heads, found.differences, strict=True):
        scores = cache[f"blocks.{h.layer}.attn.hook_attn_scores"][0, h.head, query].double()  # [key]
        size = float(h.matrix.abs().sum()) + abs(float(scores[key]))
        tol = 1e-5 * size
        assert float(h.matrix.double().sum()) == pytest.approx(float(scores[key]), abs=tol)
        for side in seed.SIDES:
            assert sum(v for _, v in seed.side_parts(h, side)) == pytest.approx(float(scores[key]), abs=tol)
        assert float(d.matrix.double().sum()) == pytest.approx(
            float(scores[key] - scores[other]), abs=2 * tol
        )
        # the named nodes: feature nodes with the largest positive part of the score, on each side
        m = h.matrix.double()
        for side, names, parts in (
            ("query", h.query_components, m.sum(1)),
            ("key", h.key_components, m.sum(0)),
        ):
            ranked = sorted((v, n) for n, v in zip(names, parts.tolist(), strict=True) if ".F" in n and v > 0)
            nodes = [Node.parse(n) for _, n in ranked[::-1][:50]]
            assert seed.named_nodes(h, side, 50) == [(n.layer, n.position, n.feature) for n in nodes]


def test_matched_random_nodes_share_positions_and_are_drawn_reproducibly():
    # active features at positions 2 and 5; activations 0..9 at each
    active = torch.tensor([[layer, pos, f] for pos in (2, 5) for layer in (0, 1) for f in range(5)])
    values = torch.tensor([float(layer * 5 + f) for pos in (2, 5) for layer in (0, 1) for f in range(5)])
    named = [(1, 5, 4), (0, 2, 0)]  # activations 9 and 0
    sets = seed.matched_at_positions(named, active, values, draws=8, pool=2, seed=3)
    assert len(sets) == 8
    for s in sets:
        assert [t[1] for t in s] == [5, 2] and not set(s) & set(named) and len(set(s)) == 2
        assert s[0] in [(1, 5, 3), (1, 5, 2)] and s[1] in [
            (0, 2, 1),
            (0, 2, 2),
        ]  # the two nearest in activation
    assert sets == seed.matched_at_positions(named, active, values, draws=8, pool=2, seed=3)
    assert len({tuple(s) for s in sets}) > 1  # draws differ
    with pytest.raises(ValueError, match="position 7 has no other active feature"):
        seed.matched_at_positions([(0, 7, 0)], active, values, 1, 2, 0)


def test_the_intervention_zeroes_exactly_the_named_nodes(setup):
    """The free run equals the model run with those features, and only those, zeroed by a hook written here; at
    the first edited layer they are the only activations that differ from the clean run."""
    model, tc = setup
    tired = seed_prompts(model)[0]
    active, values = seed.active_features(model, tc, tired.tokens)
    # layer-0 features at the last position and two earlier ones: each moves layer 1's pattern and the logits
    last, key = len(tired.tokens) - 1, tired.roles["animal"][-1]
    named = []
    for pos in (last, key, 1):
        at = ((active[:, 0] == 0) & (active[:, 1] == pos)).nonzero().flatten()
        named.append(tuple(active[at[values[at].argmax()]].tolist()))
    head = (1, 0)
    target, attention = seed.free_run(model, tc, tired, named, head, key)

    acts: dict[str, torch.Tensor] = {}

    def zero(x, hook):
        x = x.clone()
        for layer, pos, feature in named:
            if hook.name == f"{tc.output_hook(layer)}.hook_sae_acts_post":
                x[0, pos, feature] = 0
        acts[hook.name] = x[0]
        return x

    def run(edit):
        sites = [f"{tc.output_hook(layer)}.hook_sae_acts_post" for layer in tc.layers]
        fn = zero if edit else (lambda x, hook: acts.__setitem__(hook.name, x[0].clone()))
        with torch.no_grad(), model.transcoders(tc, error=True):
            logits, cache = model.run_with_cache(
                tired.tokens[None], names_filter=[f"blocks.{head[0]}.attn.hook_pattern"],
                fwd_hooks=[(s, fn) for s in sites],
            )  # fmt: skip
        return logits[0], cache[f"blocks.{head[0]}.attn.hook_pattern"][0, head[1], -1, key], dict(acts)

    logits, pattern, edited = run(True)
    _, _, clean = run(False)
    assert target == pytest.approx(target_value(model, logits, tired), abs=1e-5)
    assert attention == pytest.approx(float(pattern), abs=1e-6)
    first = min(t[0] for t in named)
    site = f"{tc.output_hook(first)}.hook_sae_acts_post"
    changed = {(first, int(p), int(f)) for p, f in (edited[site] != clean[site]).nonzero().tolist()}
    assert changed == {t for t in named if t[0] == first}


def test_positions_move_to_the_twin_by_role(setup):
    model, _ = setup
    tired, wide = seed_prompts(model)
    assert seed.mapped(tired, wide, tired.roles["animal"][-1]) == wide.roles["street"][-1]
    assert seed.mapped(tired, wide, tired.roles["street"][-1]) == wide.roles["animal"][-1]
    assert seed.mapped(tired, wide, len(tired.tokens) - 1) == len(wide.tokens) - 1
    a, b = torch.tensor([0, 5, 6, 7, 9]), torch.tensor([0, 5, 8, 8, 7, 9])
    assert [seed.aligned(a, b, p) for p in range(5)] == [0, 1, None, 4, 5]


def _rows():
    rng = np.random.default_rng(0)
    rows = []
    for i, schema in enumerate(["s1", "s1", "s2", "s2", "s3", "s3"]):
        tests = {
            t: {
                "logit": float(rng.normal()),
                "attention": float(rng.normal()),
                "random_logit": rng.normal(size=3).tolist(),
                "random_attention": rng.normal(size=3).tolist(),
            }
            for t in seed_answer.TESTS
        }
        sign = 1 if i % 2 == 0 else -1
        clean = [2.0, -1.0, 1.0, 3.0, -0.5, 0.5][i]  # s1 resolves; s2 wrong in its second twin; s3 in both
        rows.append({"schema": schema, "sign": sign, "clean": clean, "tests": tests})
    return rows


def test_intervals_are_over_twin_pairs_as_written_out_here():
    """Three twin pairs: the t-interval over pairs (a pair's twins one unit), computed in the test from the rows,
    not with the helper the summary calls."""
    rows = _rows()
    s = seed_answer.summarise(rows, draws=3, seed=4)
    groups = [r["schema"] for r in rows]
    for test in seed_answer.TESTS:
        t = [r["tests"][test] for r in rows]
        diff = [x["logit"] - float(np.mean(x["random_logit"])) for x in t]
        assert s[test]["logit_vs_random"]["ci"] == pytest.approx(_grouped_interval(diff, groups, 4), rel=1e-9)
        assert s[test]["logit_vs_random"]["mean"] == pytest.approx(np.mean(diff), rel=1e-12)
        att = [x["attention"] for x in t]
        assert s[test]["attention"]["ci"] == pytest.approx(_grouped_interval(att, groups, 4), rel=1e-9)
        wins = [float(x["logit"] < min(x["random_logit"])) for x in t]
        b = s[test]["beats_every_random"]
        assert (b["mean"], b["count"], b["n"], b["chance"]) == (
            pytest.approx(sum(wins) / 6),
            sum(wins),
            6,
            0.25,
        )
        assert b["ci"] == pytest.approx(_grouped_interval(wins, groups, 4), rel=1e-9, abs=1e-12)
    r = s["resolution"]
    assert (r["resolved"], r["pairs"], r["chance"], r["right"], r["prompts"]) == (1, 3, 0.25, 3, 6)
    one = seed_answer.summarise(rows[:2], draws=3, seed=0)  # one twin pair: a mean, no interval
    assert np.isnan(one["query"]["logit"]["ci"]).all()
    assert one["query"]["logit"]["mean"] == pytest.approx(
        np.mean([x["tests"]["query"]["logit"] for x in rows[:2]])
    )


def test_the_answer_says_when_the_model_does_not_do_this():
    rows = _rows()[:2]
    rows[1]["clean"] = 1.0  # the seed's pair as measured: the same answer in both twins
    for r in rows:
        r.update(prompt="p", head="L1H0", attention_clean=0.5, attention_other_clean=0.1)
    summary = seed_answer.summarise(rows, draws=3, seed=0)
    sentences = seed_answer.verdict({"winograd": {"rows": rows, "summary": summary}})
    assert (
        sentences[0][1].startswith("**The model does not do this.**")
        and "0 of 1 twin pair" in sentences[0][1]
    )
    assert "no interval" in sentences[1][1]
    rows[1]["clean"] = -1.0
    summary = seed_answer.summarise(rows, draws=3, seed=0)
    assert seed_answer.verdict({"winograd": {"rows": rows, "summary": summary}})[0][1].startswith(
        "The model resolves"
    )


@pytest.mark.slow
def test_the_study_reports_the_seed_question(folder, corpus, tmp_path):  # noqa: F811
    from studies.attribution.study import main

    args = ["--model", str(folder), "--data", str(corpus), "--texts", "120", "--context", "16",
            "--d-transcoder", "48", "--k", "4", "--epochs", "1", "--pairs", "2", "--max-feature-nodes", "40",
            "--top", "3", "--random-draws", "2", "--heads", "L1H0", "--dashboard-texts", "0", "--no-explanations",
            "--work", str(tmp_path / "work"), "--quiet", "--out", str(tmp_path / "r")]  # fmt: skip
    assert main(args) == 0
    found = json.loads((tmp_path / "r" / "results.json").read_text())["results"]["seed"]
    assert set(found["groups"]) == {"agreement", "winograd"}
    wg = found["groups"]["winograd"]
    assert [r["prompt"] for r in wg["prompts"]] == ["seed-tired", "seed-wide"]
    assert [r["referent"] for r in wg["prompts"]] == ["animal", "street"]
    assert wg["summary"]["resolution"]["pairs"] == 1 and wg["summary"]["resolution"]["chance"] == 0.25
    for r in wg["prompts"]:
        if r["heads"]:
            assert len(r["heads"]) <= 3 and "difference" in r["heads"][0]
    ag = found["groups"]["agreement"]["prompts"]
    for r in ag:  # across pairs: the other pairs' query nodes at the last position, moved to this one's
        if "query_across" not in r["tests"]:
            continue
        named = {
            (n.layer, n.feature)
            for o in ag
            if o["schema"] != r["schema"] and "query" in o["tests"]
            for n in map(Node.parse, o["tests"]["query"]["nodes"])
            if n.position == len(o["tokens"]) - 1
        }
        moved = [Node.parse(n) for n in r["tests"]["query_across"]["nodes"]]
        assert {(n.layer, n.feature) for n in moved} <= named
        assert all(n.position == len(r["tokens"]) - 1 for n in moved)
    # the verdict the tiny model's own numbers call for: resolved when both twins prefer their referent
    signed = [r["sign"] * r["clean"] for r in wg["prompts"]]
    expected = (
        "The model resolves 'it' by the switch word in the seed's pair"
        if all(x > 0 for x in signed)
        else "**The model does not do this.** It does not resolve 'it' by the switch word in the seed's pair"
    )
    assert found["answer"][0].split(":")[0] == expected
    values = ", ".join(f"{r['clean']:+.2f} ({r['prompt']})" for r in wg["prompts"])
    assert f"animal - street is {values}" in found["answer"][0]
    page = (tmp_path / "r" / "index.html").read_text()
    assert "why &#x27;it&#x27; means its referent" in page or "why 'it' means its referent" in page
