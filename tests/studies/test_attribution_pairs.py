"""The seed's question across pairs: units chosen on half of the schemas and tested on the other half find a
planted mechanism and do not find a planted null (and would, were they chosen and tested on one half); the
family's correction and power as written out here; on a tiny random Llama, the WSC273 prompts locate their
candidates, the heads' carries add up to the candidates' edges and the query parts to the score difference the
model computes."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from interp.analysis.node import Node
from interp.analysis.stats import detectable_effect, twin_difference_test
from interp.circuits.features.attention import BIAS
from interp.load import load
from studies.attribution import graphs, pair_answer, pair_trace, pairs, selection
from studies.data.load import load_items
from studies.data.texts import question_prompt
from tests.circuits.transcoders import tiny_transcoders
from tests.studies.test_attribution_study import texts
from tests.studies.tiny_lm import tiny_llama_folder

N_PAIRS, N_UNITS = 40, 150


def _planted(effect: float, seed: int = 0) -> tuple[np.ndarray, dict, np.ndarray]:
    """Twin differences ``[pair, unit]`` with unit 7 shifted by ``effect`` in every pair; covariates unrelated
    to the values; half the pairs to choose on (every other one)."""
    rng = np.random.default_rng(seed)
    values = rng.normal(size=(N_PAIRS, N_UNITS))
    values[:, 7] += effect
    covariates = {c: rng.uniform(size=(N_PAIRS, N_UNITS)) for c in selection.COVARIATES}
    rows = np.arange(N_PAIRS) % 2 == 0
    return values, covariates, rows


def _found(values: np.ndarray, covariates: dict, rows: np.ndarray, tested: np.ndarray | None = None) -> dict:
    """What :mod:`studies.attribution.seed_pairs` gives the answer, for these heads (one data set)."""
    names = [f"L{u // 9}H{u % 9}" for u in range(values.shape[1])]
    _, heads = selection.held_out(values, rows, 3, covariates, 5, names, seed=0, tested=tested)
    s = np.linspace(0.1, 2.0, 20)  # a data set's sensitivity: every pair positive
    sensitivity = {"n": 20, "test": twin_difference_test(s), "sensitive": 20, "chance": 0.5, "bias": None,
                   "values": [{"schema": f"s{i}", "preference": [x, 0.0]} for i, x in enumerate(s)]}  # fmt: skip
    return {"settings": {}, "data": {"agreement": {"sensitivity": sensitivity, "heads": heads, "pairs": []}}}


def test_a_planted_mechanism_is_found_on_the_held_out_half():
    values, covariates, rows = _planted(1.5)
    chosen = selection.select(values, rows, 3, covariates, 5)
    assert chosen.units[0] == 7
    summary = pair_answer.summarise(_found(values, covariates, rows))
    assert summary["mechanism"] == {"agreement heads": True}
    by = {r["test"].split(", ")[-1]: r for r in summary["tests"]}
    for key in pair_answer.KEYS:
        assert by[key]["rejected"] and by[key]["mean"] > 0
        assert by[key]["n"] == N_PAIRS // 2  # tested on the other half only
    # the test half's per-pair value, written out: the chosen units' mean less each one's pool mean
    test = values[~rows]
    mine = test[:, list(chosen.units)].mean(1)
    pools = chosen.controls["influence"]
    control = np.mean([test[:, list(p)].mean(1) for p in pools], axis=0)
    assert by["vs influence"]["mean"] == pytest.approx(float(np.mean(mine - control)), rel=1e-12)
    assert "**A consistent mechanism at this budget**" in pair_answer.answer(summary)


def test_a_planted_null_is_not_found_and_would_be_on_the_same_half():
    values, covariates, rows = _planted(0.0)
    summary = pair_answer.summarise(_found(values, covariates, rows))
    assert summary["mechanism"] == {"agreement heads": False}
    by = {r["test"].split(", ")[-1]: r for r in summary["tests"]}
    assert by["vs influence"]["p"] > 0.05 and by["selected"]["p"] > 0.05
    assert pair_answer.answer(summary).startswith("**No consistent mechanism at this budget.**")
    # chosen and tested on the same half, the null passes for a mechanism: what the held-out split prevents
    same = pair_answer.summarise(_found(values, covariates, rows, tested=rows))
    assert same["mechanism"] == {"agreement heads": True}


def _simulated(effect: float, n_units: int, k: int, draws: int, seed: int, same_half: bool = False) -> list:
    """``draws`` held-out records over 24 pairs (12 to choose on, 12 to test), unit 0 shifted by ``effect``."""
    rng = np.random.default_rng(seed)
    rows = np.arange(24) % 2 == 0
    out = []
    for _ in range(draws):
        values = rng.normal(size=(24, n_units))
        values[:, 0] += effect
        covariates = {c: rng.uniform(size=(24, n_units)) for c in selection.COVARIATES}
        names = [str(u) for u in range(n_units)]
        tested = rows if same_half else None
        out.append(selection.held_out(values, rows, k, covariates, 2, names, tested=tested)[1])
    return out


def _rejected(records: list, key: str, level: float = 0.05) -> float:
    """The share of records whose test ``key`` rejects at ``level`` (none chosen: not rejected)."""
    said = [key in r["test"] and r["test"][key]["comparison"].p_value <= level for r in records]
    return float(np.mean(said))


def test_the_held_out_tests_keep_their_size_and_find_the_stated_detectable_effect():
    """Planted nulls (40 units, 3 chosen): each held-out test rejects at most its 5% (200 draws: the rate's sd
    is 0.015), where choosing and testing on the same half rejects most of them. A planted unit at the effect
    :func:`detectable_effect` states for 12 test pairs is found about 80% of the time (400 draws, sd 0.02; the
    exact sign flips over 12 pairs are a little less powerful than the t-test the formula describes)."""
    null = _simulated(0.0, 40, 3, 200, seed=3)
    for key in pair_answer.KEYS:
        assert _rejected(null, key) <= 0.09
    same = _simulated(0.0, 40, 3, 100, seed=4, same_half=True)
    for key in pair_answer.KEYS:
        assert _rejected(same, key) >= 0.7
    d = detectable_effect(12, 0.05, 0.8)
    planted = _simulated(d, 3, 1, 400, seed=5)
    assert np.mean([r["units"][0]["name"] == "0" for r in planted]) >= 0.9  # chosen on the other half
    assert _rejected(planted, "selected") == pytest.approx(0.8, abs=0.07)
    assert _rejected(_simulated(d / 3, 3, 1, 200, seed=6), "selected") < 0.4  # a third of it: mostly missed


def test_controls_are_the_nearest_in_each_covariate_within_a_stratum():
    values = np.array([[3.0, 0.0, 0.0, 0.0, 0.0, 0.0], [3.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    covariates = {
        "influence": np.array([[1.0, 0.9, 0.1, 0.95, 5.0, 0.2]] * 2),
        "activation": np.array([[1.0, 0.0, 0.99, 0.98, 0.0, 0.0]] * 2),
    }
    rows = np.array([True, True])
    chosen = selection.select(values, rows, 1, covariates, 2)
    assert chosen.units == (0,) and chosen.controls == {"influence": ((3, 1),), "activation": ((2, 3),)}
    strata = ["a", "b", "a", "b", "a", "a"]  # only units 2, 4 and 5 share unit 0's stratum
    chosen = selection.select(values, rows, 1, covariates, 2, strata)
    assert chosen.controls == {"influence": ((5, 2),), "activation": ((2, 4),)}
    nothing = selection.select(-np.abs(values) - 1, rows, 2, covariates, 2)  # no positive mean: none chosen
    assert nothing.units == () and selection.test(values, ~rows, nothing) == {}
    values, covariates, rows = _planted(0.0)
    summary = pair_answer.summarise(
        _found(-np.abs(values) - 1, covariates, rows)
    )  # nothing chosen, nothing tested
    assert summary["mechanism"] == {} and len(summary["tests"]) == 1
    assert pair_answer.answer(summary).endswith("so nothing was tested.")


def test_the_family_is_corrected_and_its_power_computed_as_written_out_here():
    from scipy import stats

    values, covariates, rows = _planted(0.3, seed=2)
    summary = pair_answer.summarise(_found(values, covariates, rows))
    p = [r["p"] for r in summary["tests"]]
    m = len(p)
    order = np.argsort(p)
    holm = np.maximum.accumulate([min(1.0, (m - i) * p[j]) for i, j in enumerate(order)])
    assert [r["holm_p"] for r in summary["tests"]] == pytest.approx(list(holm[np.argsort(order)]))
    level = 0.05 / m
    for r in summary["tests"]:
        n, d = r["n"], r["detectable_d"]
        critical = stats.t.ppf(1 - level / 2, n - 1)
        power = stats.nct.sf(critical, n - 1, d * math.sqrt(n)) + stats.nct.cdf(
            -critical, n - 1, d * math.sqrt(n)
        )
        assert power == pytest.approx(0.8, abs=1e-6)
        assert r["detectable"] == pytest.approx(d * r["sd"])


def _both(n_pairs: int, effect: float) -> dict:
    """Both data sets with every test the answer reads (WSC273: heads, terms, key preference; agreement:
    heads), over ``n_pairs`` pairs, half to choose on, unit 0 shifted by ``effect``."""
    rng = np.random.default_rng(7)
    rows = np.arange(n_pairs) % 2 == 0

    def held() -> dict:
        values = rng.normal(size=(n_pairs, 30))
        values[:, 0] += effect
        covariates = {c: rng.uniform(size=values.shape) for c in selection.COVARIATES}
        return selection.held_out(values, rows, 1, covariates, 3, [str(u) for u in range(30)])[1]

    found = _found(*_planted(0.0)[:2], np.arange(N_PAIRS) % 2 == 0)
    agreement = {**found["data"]["agreement"], "heads": held()}
    score = rng.normal(effect, 1.0, size=(n_pairs, 3))
    every = selection.Selected((0, 1, 2), (), {})
    winograd = {
        **agreement,
        "heads": held(),
        "terms": held(),
        "score": {"test": selection.test(score, ~rows, every)},
    }
    return {"settings": {}, "data": {"winograd": winograd, "agreement": agreement}}


def test_the_family_has_twelve_tests_and_a_test_half_of_eight_pairs_can_pass_none():
    summary = pair_answer.summarise(_both(40, 3.0))
    assert len(summary["tests"]) == 12 and summary["level_each"] == pytest.approx(0.05 / 12)
    assert summary["mechanism"] == {"winograd heads": True, "winograd terms": True, "agreement heads": True}
    small = pair_answer.summarise(
        _both(16, 3.0)
    )  # 8 test pairs: the smallest p-value is 2 / 2**8 > 0.05 / 12
    held = [r for r in small["tests"] if "switch sensitivity" not in r["test"]]
    assert len(held) == 10 and all(r["n"] == 8 for r in held)
    assert all(r["p"] == pytest.approx(2 / 2**8) for r in held)  # every test pair positive: the smallest p
    assert not any(r["rejected"] for r in held) and all(r["detectable_d"] == math.inf for r in held)
    assert small["mechanism"] == {"winograd heads": False, "winograd terms": False, "agreement heads": False}


def test_query_parts_keep_only_features_after_the_shared_prefix():
    """Row sums by node: features from position ``shared`` on summed by (layer, feature); the rest by kind."""

    class Score:
        query_components = (
            *map(Node.parse, ("L0.F3@1", "L0.F3@6", "L0.F3@7", "L2.F1@7", "L0.error@7", "token@7")),
            BIAS,
        )
        matrix = torch.tensor([[1.0, 0.5], [2.0, 0.0], [0.25, 0.25], [-1.0, 0.0], [4.0, 0.0], [8.0, 0.0],
                               [16.0, 1.0]])  # fmt: skip

    parts, rest = pair_trace.query_parts(Score(), None, 6)
    assert parts == {(0, 3): 2.5, (2, 1): -1.0}
    assert rest == {"shared": 1.5, "error": 4.0, "token": 8.0, "bias": 17.0}


def test_switch_sensitivity_is_the_signed_twin_difference_and_the_most_sensitive_are_kept():
    assert pairs.switch_sensitivity(7.89, 7.37) == pytest.approx(0.52)  # the seed's pair: toward 'street'
    made = [pairs.TwinPair("winograd", None, None, ("a", "b"), (a, b)) for a, b in
            [(1.0, 2.0), (3.0, 1.0), (0.5, 0.4), (2.0, 0.0), (1.0, 1.0)]]  # fmt: skip
    kept = pairs.sensitive(made, 2)
    assert [p.preference for p in kept] == [(3.0, 1.0), (2.0, 0.0)]  # 2 and 2: file order
    assert [p.bias for p in kept] == [2.0, 1.0]
    assert len(pairs.sensitive(made, 10)) == 3  # the negative and the zero are not sensitive


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    wsc = load_items("winograd")[:24]
    words = " ".join(a for i in wsc for a in question_prompt(i).answers)
    extra = [question_prompt(i).prefix for i in wsc] + [words * 20]
    folder = tiny_llama_folder(tmp_path_factory.mktemp("pairs") / "llama", texts() + extra, vocab_size=900)
    model = load(folder)
    return model, tiny_transcoders(model.cfg, d_transcoder=48, seed=1), wsc


def test_winograd_prompts_locate_their_candidates(tiny):
    model, _, wsc = tiny
    found, left = pairs.build(model, "winograd", wsc)
    assert found[0].schema_id == "seed" and found[0].first.name == "seed-tired"
    ids = {p.schema_id for p in found} | {s for v in left.values() for s in v}
    assert ids == {"seed"} | {i.schema_id for i in wsc}  # every schema either used or left out with a reason
    by_id = {i.id: i for i in wsc}
    for pair in found[1:]:
        a, b = (by_id[p.name] for p in pair.prompts)
        assert (a.answer, b.answer) == (0, 1) and (pair.first.sign, pair.second.sign) == (1, -1)
        for prompt in pair.prompts:
            words = model.to_str_tokens(prompt.tokens)
            for role, candidate in zip("ab", a.candidates, strict=True):
                text = "".join(words[q] for q in prompt.roles[role]).strip()
                assert candidate.endswith(text) and text == candidate.split(" ", 1)[-1]
            assert prompt.target == question_prompt(a).answers
        assert all(q < pair.shared for role in "ab" for q in pair.first.roles[role])


def test_heads_carry_the_edges_and_query_parts_add_up_to_the_score_difference(tiny):
    model, tc, wsc = tiny
    found, _ = pairs.build(model, "winograd", wsc)
    pair = pairs.measured(model, found[1:2])[0]
    drawn = tuple(graphs.draw(model, tc, p, graphs.GraphSettings(40, 128, 3), False) for p in pair.prompts)
    heads = pair_trace.trace_heads(model, tc, pair, drawn)
    nodes = heads["nodes"]
    assert nodes[0] == nodes[1]  # the candidates lie in the shared prefix: one node for both twins
    for twin, graph in enumerate(drawn):
        edges = [graph.edge("logit.0", n) for n in nodes[twin] if n is not None]
        assert heads["edges"][twin] == pytest.approx(edges, rel=1e-4, abs=1e-6)
        total = heads["carry"][twin].sum() + sum(heads["direct"][twin])
        assert total == pytest.approx(sum(edges), rel=1e-3, abs=1e-5)
    assert heads["magnitude"].min() >= 0 and (heads["magnitude"] >= np.abs(heads["carry"]) - 1e-9).all()
    asked = [(1, 0), (0, 2)]
    traced = pair_trace.trace_terms(model, tc, pair, drawn, asked)
    names = [f"blocks.{lay}.attn.hook_attn_scores" for lay, _ in asked]
    for prompt, twin in zip(pair.prompts, traced["twins"], strict=True):
        _, cache = model.run_with_cache(prompt.tokens[None], names_filter=names)
        for (lay, h), got in zip(asked, twin["heads"], strict=True):
            row = cache[f"blocks.{lay}.attn.hook_attn_scores"][0, h, -1].double()  # [key]
            want = float(row[prompt.roles["a"][-1]] - row[prompt.roles["b"][-1]])
            parts = sum(got["parts"].values()) + sum(got["rest"].values())
            assert got["difference"] == pytest.approx(want, abs=1e-4)
            assert parts == pytest.approx(want, abs=1e-4)


@pytest.mark.slow
def test_the_study_answers_the_seed_question_across_pairs(tmp_path):
    """``--seed-pairs 6`` end to end on a tiny random Llama: each traced WSC273 pair's preferences are the
    logit differences transformers computes on its prompts, the pairs are the most sensitive, split by schema
    into the two halves the tests count, and the family's Holm values are as written out here."""
    from transformers import AutoModelForCausalLM

    from studies.attribution.study import main

    wsc = load_items("winograd")[:24]
    words = " ".join(a for i in wsc for a in question_prompt(i).answers)
    folder = tiny_llama_folder(tmp_path / "llama", texts() + [question_prompt(i).prefix for i in wsc] + [words * 20],
                               vocab_size=900)  # fmt: skip
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(texts()[:120]) + "\n")
    args = ["--model", str(folder), "--data", str(corpus), "--texts", "60", "--context", "16",
            "--d-transcoder", "48", "--k", "4", "--epochs", "1", "--pairs", "1", "--max-feature-nodes", "40",
            "--top", "3", "--random-draws", "2", "--heads", "L1H0", "--dashboard-texts", "0", "--no-explanations",
            "--seed-pairs", "6", "--work", str(tmp_path / "work"), "--quiet", "--out", str(tmp_path / "r")]  # fmt: skip
    assert main(args) == 0
    found = json.loads((tmp_path / "r" / "results.json").read_text())["results"]["seed_pairs"]
    assert set(found["data"]) == {"winograd", "agreement"}
    for data in found["data"].values():
        every = [v["preference"][0] - v["preference"][1] for v in data["sensitivity"]["values"]]
        mean = float(np.mean(every))  # results.json rounds its numbers
        assert data["sensitivity"]["test"]["estimate"] == pytest.approx(mean, abs=1e-5)
        assert data["sensitivity"]["sensitive"] == sum(x > 0 for x in every)
        traced = data["pairs"]
        # the most sensitive, positive only
        assert len(traced) == min(6, data["sensitivity"]["sensitive"]) > 0
        most = sorted(every, reverse=True)[: len(traced)]
        assert [p["sensitivity"] for p in traced] == pytest.approx(most, abs=1e-5)
        for p in traced:
            assert p["sensitivity"] == pytest.approx(p["preference"][0] - p["preference"][1], abs=1e-5)
            assert p["bias"] == pytest.approx(sum(p["preference"]) / 2, abs=1e-5)
        halves = [p["half"] for p in traced]
        assert data["heads"]["selection_pairs"] == halves.count("selection") >= 1
        assert data["heads"]["test_pairs"] == halves.count("test") >= 1
        for entry in data["heads"]["test"].values():
            assert entry["n"] == halves.count("test")
    # the WSC273 preferences, by an independent forward: transformers on the study's token ids
    model, reference = load(folder), AutoModelForCausalLM.from_pretrained(folder).eval()
    by_id = {i.id: i for i in load_items("winograd")}  # the study reads every WSC273 item
    checked = 0
    for p in found["data"]["winograd"]["pairs"]:
        if p["schema"] == "seed":
            continue
        for name, want in zip(p["prompts"], p["preference"], strict=True):
            question = question_prompt(by_id[name])
            ids = model.to_tokens(question.prefix, prepend_bos=True).ids
            a, b = (model.tokenizer.to_tokens(t, prepend_bos=False).ids[0, 0] for t in question.answers)
            with torch.no_grad():
                logits = reference(ids).logits[0, -1].double()
            assert want == pytest.approx(float(logits[a] - logits[b]), abs=1e-3)
            checked += 1
    assert checked >= 2
    rows = found["summary"]["tests"]
    p = np.array([r["p"] for r in rows])
    order = np.argsort(p, kind="stable")
    holm = np.maximum.accumulate([min(1.0, (len(p) - i) * p[j]) for i, j in enumerate(order)])
    assert [r["holm_p"] for r in rows] == pytest.approx(list(holm[np.argsort(order)]), rel=1e-4)
    assert found["summary"]["correction"]["size"] == len(rows)
    assert found["answer"] == found["sentences"][-1]
    assert found["answer"].startswith(("**No consistent mechanism", "**A consistent mechanism"))
    page = (tmp_path / "r" / "index.html").read_text()
    assert "every sensitive pair" in page
