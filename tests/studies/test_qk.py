"""The qk study on a tiny random Llama: the seed's pair and Winograd twins located, heads chosen on half the
schemas, every preference split exactly, the intervention's clean row equal to the split's total, the report
written through the one writer."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from interp.analysis import binomial_test, bootstrap_mean_interval
from interp.load import load
from studies.data.load import load_items
from studies.qk import analysis
from studies.qk.measure import KEY_GROUPS, QUERY_GROUPS, SEED, intervene, run_twin, split_preference
from studies.qk.study import QKConfig, main, run_study, twin_pairs_of
from tests.studies.tiny_lm import tiny_llama_folder


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    items = load_items("winograd")
    return tiny_llama_folder(
        tmp_path_factory.mktemp("qk") / "llama", [i.sentence for i in items] + list(SEED)
    )


@pytest.fixture(scope="module")
def model(folder):
    return load(folder)


def test_the_seed_pair_is_located_by_characters(model):
    config = QKConfig(pairs=2)
    pairs = twin_pairs_of(model, config, load_items("winograd"))
    assert len(pairs) == 3 and pairs[0][0] == ("seed",)
    tired, wide = pairs[0][1]
    tokens = model.to_str_tokens(SEED[0])
    assert tokens[tired.query] == "." and "The animal".endswith(tokens[tired.referent])
    assert "the street".endswith(tokens[tired.foil]) and (wide.referent, wide.foil) == (
        tired.foil,
        tired.referent,
    )
    assert "".join(tokens[p] for p in sorted(tired.switch)).strip() == "tired"
    assert "".join(tokens[p] for p in sorted(tired.pronoun)).strip() == "it"


def test_split_and_intervention_agree_with_the_run(model):
    pairs = twin_pairs_of(model, QKConfig(pairs=1), load_items("winograd"))
    twin = pairs[0][1][0]
    run_twin(model, twin)
    split = split_preference(model, twin, 1, 2, top=3)
    assert split["total"] == pytest.approx(float(twin.preference[1, 2]), rel=1e-4, abs=1e-6)
    assert sum(split["query_terms"].values()) == pytest.approx(split["total"], rel=1e-4, abs=1e-6)
    assert sum(split["key_terms"].values()) == pytest.approx(split["total"], rel=1e-4, abs=1e-6)
    top = split["top_index"]
    assert [v for _, v in split["top"]] == sorted((v for _, v in split["top"]), reverse=True)
    after = intervene(model, twin, 1, 2, split["parts"], [top, []])
    assert after[0] == pytest.approx(split["total"], rel=1e-4, abs=1e-6)  # the clean row
    assert after[2] == pytest.approx(after[0], rel=1e-5, abs=1e-6)  # removing nothing changes nothing
    assert after[1] != pytest.approx(after[0], rel=1e-3)
    random_sets = analysis.matched_random(split["parts"], top, 3, np.random.default_rng(0))
    assert all(len(s) == len(top) and not set(s) & set(top) for s in random_sets)


def test_study_end_to_end(folder, tmp_path):
    out = tmp_path / "report"
    args = ["--model", str(folder), "--pairs", "8", "--heads", "L1H0", "--top-heads", "2", "--top", "2"]
    assert main([*args, "--random-draws", "2", "--out", str(out), "--quiet"]) == 0
    results = json.loads((out / "results.json").read_text())["results"]
    heads = results["heads"]
    assert results["n_pairs"] == 8 and results["n_select"] + results["n_test"] == 8  # the seed's pair apart
    assert "L1H0" in heads and len(heads) == 3
    assert results["correction"]["size"] == 3 and results["correction"]["method"] == "holm"
    for name, head in heads.items():
        assert 0 <= head["n_flipping_pairs"] <= head["n_test_pairs"]
        assert head["verdict"].startswith(name)
        assert (
            head["switch"]["n_pairs"] == results["n_test"]
            and head["p_holm"] >= head["switch"]["sensitivity"]["p_value"]
        )
        assert head["seed_switch"]["n_pairs"] == 1
        # a random model is right in both twins of no test pair here, so nothing is summarised (the summary's
        # values are checked against the test's own arithmetic in test_intervention_and_share_intervals_...)
        assert (head["n_flipping_pairs"], head["summary"]) == (0, {})
    assert (out / "index.html").stat().st_size > 0 and (out / "manifest.json").exists()


def test_records_hold_exact_splits(model):
    """A random model rarely flips with the switch word, so every head is made to count as right in both twins;
    the records then hold the real preference, its exact split and the intervention."""
    config = QKConfig(pairs=2, top=2, random_draws=3)
    pairs = twin_pairs_of(model, config, load_items("winograd"))
    for _, twins, _ in pairs:
        for twin in twins:
            run_twin(model, twin)
            twin.preference = np.abs(twin.preference) + 1e-3
    result = analysis.head_result(model, pairs, [1, 2], 1, 2, config, np.random.default_rng(0))
    assert result["n_flipping_pairs"] == 2 and result["seed_flips"]  # the seed's pair: apart, not a test pair
    assert result["right_in_both"]["k"] == result["right_in_both"]["n"] == 2
    records = result["records"]
    assert len(records) == 4 and SEED[0] not in [r["text"] for r in records]
    for r in records:
        assert r["qk_total"] == pytest.approx(r["preference"], rel=1e-4, abs=1e-6)
        assert len(r["after_random"]) == 3 and np.isfinite(r["after_top"])
    summary = result["summary"]
    assert summary["n_twins"] == 4 and summary["top"]["n"] == 4 and summary["random"]["n"] == 12
    change = np.mean([r["after_top"] - r["preference"] for r in records])
    assert summary["top"]["change"] == pytest.approx(change)
    assert summary["top"]["change_ci"][0] <= change <= summary["top"]["change_ci"][1]
    left = np.mean([r["after_top"] for r in records]) / np.mean([r["preference"] for r in records])
    assert summary["top"]["left"] == pytest.approx(left)
    shares = summary["query_shares"]
    assert sum(shares.values()) == pytest.approx(1.0, abs=1e-4)  # the groups split the pooled preference


def test_an_encoder_is_refused():
    from tests.report.test_explain import tiny_model

    with pytest.raises(ValueError, match="the qk study reads a causal language model"):
        run_study(tiny_model(causal=False), QKConfig(), load_items("winograd"))


def test_overview_ranks_heads_by_switch_sensitivity_with_their_counts(model):
    pairs = twin_pairs_of(model, QKConfig(pairs=3), load_items("winograd"))
    for _, twins, _ in pairs:
        for twin in twins:
            run_twin(model, twin)
    rows = analysis.overview(pairs, [1], [0, 2, 3], top=4)
    assert all(r["chance"] == 0.25 and r["fraction"] == r["right in both (test pairs)"] / 3 for r in rows)
    assert len(rows) == 4 and all(r["of"] == 3 for r in rows)
    means = [r["sensitivity (test)"] for r in rows]
    assert means == sorted(means, reverse=True)
    first = rows[0]["head"]
    layer, head = int(first[1 : first.index("H")]), int(first[first.index("H") + 1 :])
    test = pairs[:1] + pairs[2:]
    # naive: each twin's preference toward its own referent, summed over the pair
    expected = np.mean([a.preference[layer, head] + b.preference[layer, head] for _, (a, b), _ in test])
    assert means[0] == pytest.approx(expected)
    assert means[0] == pytest.approx(analysis.sensitivity(pairs, [0, 2, 3])[:, layer, head].mean())
    right = sum(
        bool(a.preference[layer, head] > 0 and b.preference[layer, head] > 0) for _, (a, b), _ in test
    )
    assert rows[0]["right in both (test pairs)"] == right
    a, b = pairs[1][1]
    assert rows[0]["sensitivity (selection)"] == pytest.approx(
        a.preference[layer, head] + b.preference[layer, head]
    )


def _pair(schema: str, *preferences: float):
    twins = tuple(SimpleNamespace(preference=np.array([[p]]), answer=k) for k, p in enumerate(preferences))
    return ((f"{schema}a", f"{schema}b"), twins, schema)


def _heads_pair(schema: str, a: list[float], b: list[float]):
    """A pair whose twins hold one preference per head (``[1, heads]``), each toward its own referent."""
    twins = (
        SimpleNamespace(preference=np.array([a]), answer=0),
        SimpleNamespace(preference=np.array([b]), answer=1),
    )
    return ((f"{schema}a", f"{schema}b"), twins, schema)


def test_heads_are_chosen_by_switch_sensitivity_not_by_pairs_right_in_both():
    # head 0 prefers the first candidate by 3 in both twins and moves 0.5 toward the referent: right in no pair,
    # sensitive in every one; head 1 is right in both twins of half the pairs and wrong in both of the others,
    # and moves nothing on average
    pairs = []
    for i in range(8):
        lucky = 0.4 if i % 2 else -0.4
        pairs.append(_heads_pair(f"s{i}", [3.25, lucky], [-2.75, lucky]))  # head 1: right in both, or neither
    assert analysis.right_in_both(pairs, list(range(8))).tolist() == [[0, 4]]
    assert analysis.choose_heads(pairs, list(range(8)), [], 1) == [(0, 0)]
    found = analysis.head_switch(pairs, list(range(8)), 0, 0, seed=0)
    assert found.sensitivity.estimate == pytest.approx(0.5) and found.sensitivity.p_value == pytest.approx(
        2 / 256
    )
    assert found.bias.estimate == pytest.approx(3.0) and found.right_both == 0
    other = analysis.head_switch(pairs, list(range(8)), 0, 1, seed=0)
    assert other.sensitivity.estimate == pytest.approx(0.0) and other.right_both == 4
    heads = [{"switch": found}, {"switch": other}, {"switch": None}]
    correction = analysis.correct(heads)
    assert correction.size == 2 and heads[0]["p_holm"] == pytest.approx(2 * 2 / 256)
    assert heads[1]["p_holm"] == pytest.approx(1.0) and np.isnan(heads[2]["p_holm"])


def test_the_seeds_pair_is_counted_once_apart_from_the_halves():
    pairs = [(("seed",), (), "seed")] + [_pair(f"s{i}", 1.0, 1.0) for i in range(10)]
    select, test = analysis.split(pairs, 0)
    assert 0 not in select and 0 not in test
    assert sorted(select + test) == list(range(1, 11)) and len(select) == len(test) == 5


def test_right_in_both_is_read_against_a_quarter_with_an_interval_over_schemas():
    # 12 pairs of 6 schemas (two pairs each); the head is right in both twins of 5 pairs
    pairs = [_pair(f"s{i // 2}", 1.0, 1.0 if i < 5 else -1.0) for i in range(12)]
    r = analysis.right_fraction(pairs, list(range(12)), 0, 0, seed=3)
    assert (r["k"], r["n"], r["chance"]) == (5, 12, 0.25)
    assert r["p"] == binomial_test(5, 12, 0.25, alternative="greater")
    right = [1.0] * 5 + [0.0] * 7
    assert r["ci"] == bootstrap_mean_interval(right, 2000, 3, groups=[f"s{i // 2}" for i in range(12)])[1:]


def test_intervention_and_share_intervals_resample_schemas():
    rng = np.random.default_rng(0)
    records = []
    for i in range(8):
        for twin in range(2):
            total = float(rng.uniform(0.5, 2.0))
            switch = float(rng.uniform(0, 0.5)) * total
            terms = dict.fromkeys(QUERY_GROUPS, 0.0) | {
                "switch word": switch,
                "other positions": total - switch,
            }
            keys = dict.fromkeys(KEY_GROUPS, total / len(KEY_GROUPS))
            after = {"after_top": total - 1.0 - twin, "after_random": [total + 0.1 * twin, total - 0.2]}
            records.append({"pair": f"p{i}", "schema": f"s{i}", "preference": total, "qk_total": total,
                            "query_terms": terms, "key_terms": keys, **after})  # fmt: skip
    s = analysis.summarise(records, seed=5)
    schemas = [r["schema"] for r in records]
    change = [r["after_top"] - r["preference"] for r in records]
    after = np.array([r["after_top"] for r in records])
    before = np.array([r["preference"] for r in records])
    assert (
        s["top"]["n"] == 16 and 0 < np.mean(after < 0) < np.mean(after < before) == 1
    )  # some flip, all shrink
    assert s["top"]["flipped"] == np.mean(after < 0) and s["top"]["shrunk"] == np.mean(after < before)
    assert s["top"]["change"] == pytest.approx(np.mean(change), rel=1e-12)
    assert s["top"]["left"] == pytest.approx(after.mean() / before.mean(), rel=1e-12)
    assert s["top"]["change_ci"] == bootstrap_mean_interval(change, 2000, 5, groups=schemas)[1:]
    random_change = [a - r["preference"] for r in records for a in r["after_random"]]
    random_groups = [r["schema"] for r in records for _ in r["after_random"]]
    assert (
        s["random"]["change_ci"] == bootstrap_mean_interval(random_change, 2000, 5, groups=random_groups)[1:]
    )
    totals = np.array([r["qk_total"] for r in records])
    ratio = np.array([r["query_terms"]["switch word"] for r in records]) / totals
    expected = bootstrap_mean_interval(ratio, 2000, 5, groups=schemas, weights=totals)
    assert s["query_shares"]["switch word"] == pytest.approx(expected[0], rel=1e-12)
    assert s["query_shares_ci"]["switch word"] == expected[1:]
    assert s["n_schemas"] == 8
