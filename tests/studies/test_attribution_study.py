"""The attribution study on a tiny random Llama: prompts located, matched random features drawn as promised,
and the whole study run end to end (train, cache, graphs, interventions, head loadings, report), with the
frozen ablation equal to the graph's prediction and the cache reused on a second run."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from interp.analysis import bootstrap_mean_interval
from interp.load import load
from studies.attribution import interventions, measure
from studies.attribution.prompts import SEED, SEED_QUESTION, agreement_prompts, seed_prompts
from studies.attribution.study import main, parse_heads
from studies.data.load import load_items
from tests.studies.tiny_lm import tiny_llama_folder

WORDS = " she he animal street" * 40


def texts() -> list[str]:
    """Texts for the tiny model's tokenizer, in which every target of the study is one token."""
    return [x.prompt for x in load_items("agreement")] + [s + SEED_QUESTION for s in SEED] + [WORDS]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tiny_llama_folder(tmp_path_factory.mktemp("attribution") / "llama", texts())


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = np.random.default_rng(0)
    items = load_items("agreement")
    lines = [items[int(i)].prompt + " she said." for i in rng.integers(0, len(items), 120)]
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_prompts_locate_their_words(folder):
    model = load(folder)
    prompts = agreement_prompts(model, load_items("agreement"), 2)
    assert len(prompts) == 4 and [p.sign for p in prompts[:2]] in ([1, -1], [-1, 1])
    for p in prompts:
        tokens = model.to_str_tokens(p.tokens)
        assert p.text.startswith("".join(tokens[q] for q in p.roles["name"]).strip())
        assert p.roles["last"] == [len(p.tokens) - 1]
    tired, wide = seed_prompts(model)
    tokens = model.to_str_tokens(tired.tokens)
    assert "".join(tokens[q] for q in tired.roles["animal"]).strip() == "animal"
    wide_tokens = model.to_str_tokens(wide.tokens)
    assert "".join(wide_tokens[q] for q in wide.roles["switch"]).strip() == "wide"
    assert (tired.sign, wide.sign) == (1, -1) and tired.target == (" animal", " street")


def test_matched_random_sets_avoid_the_top_and_match_activation():
    active = torch.tensor([[0, 1, i] for i in range(10)])
    values = torch.arange(10, dtype=torch.float)
    top = [(0, 1, 9), (0, 1, 0)]
    sets = interventions.matched_random(top, active, values, draws=6, pool=2, seed=0)
    assert len(sets) == 6
    for s in sets:
        assert len(set(s)) == 2 and not set(s) & set(top)
        assert s[0][2] in (7, 8) and s[1][2] in (1, 2)  # the two nearest in activation
    with pytest.raises(ValueError, match="other active features"):
        interventions.matched_random(top, active[:2], values[:2], 1, 2, 0)


def test_heads_flag():
    assert parse_heads("L25H2,l26h2") == ((25, 2), (26, 2))
    with pytest.raises(ValueError, match="L25H2"):
        parse_heads("25.2")


@pytest.mark.slow
def test_study_end_to_end(folder, corpus, tmp_path):
    args = ["--model", str(folder), "--data", str(corpus), "--texts", "120", "--context", "16",
            "--d-transcoder", "48", "--k", "4", "--epochs", "2", "--pairs", "2", "--max-feature-nodes", "40",
            "--top", "3", "--random-draws", "2", "--heads", "L1H0", "--work", str(tmp_path / "work"),
            "--explainer", "tokens", "--quiet"]  # fmt: skip
    out = tmp_path / "report"
    assert main([*args, "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())["results"]
    whole = results["transcoders"]
    assert len(whole["per_layer"]) == 2 and 0 < whole["l0_mean"] <= 4
    assert all(np.isfinite(whole[k]) for k in ("ce_clean", "ce_replacement", "kl", "explained_variance_mean"))
    for name, n in (("agreement", 4), ("winograd", 2)):
        group = results["groups"][name]
        s = group["summary"]
        assert s["n_prompts"] == n and len(group["prompts"]) == n
        assert s["frozen_max_relative_error"] < 1e-4  # the frozen ablation is the graph's linear prediction
        for row in group["prompts"]:
            assert row["frozen"] == pytest.approx(row["predicted"], rel=1e-4, abs=1e-5)
            assert np.isfinite(row["free"]) and np.isfinite(row["random free (mean)"])
            assert 0 <= row["replacement"] <= 1 and 0 <= row["completeness"] <= 1
        assert set(group["head_shares_asked"]) == {"L1H0"} and 0 <= group["head_shares_asked"]["L1H0"] <= 1
        spread = group["head_share_intervals"]["L1H0"]
        assert spread["share"] == pytest.approx(group["head_shares_asked"]["L1H0"])
        assert s["top_beats_every_random"]["chance"] == pytest.approx(1 / 3)  # two random draws
        switch = group["switch"]  # the model's own switch sensitivity, from the same rows' clean targets
        assert switch["n_pairs"] == n // 2 and switch["verdict"]
    tired, wide = results["groups"]["winograd"]["prompts"]  # tired expects the animal: label 0
    switch = results["groups"]["winograd"]["switch"]
    assert switch["sensitivity"]["estimate"] == pytest.approx(tired["clean"] - wide["clean"], abs=1e-5)
    assert switch["bias"]["estimate"] == pytest.approx((tired["clean"] + wide["clean"]) / 2, abs=1e-5)
    assert (out / "index.html").stat().st_size > 0 and (out / "manifest.json").exists()
    cached = list((tmp_path / "work").glob("transcoders-*"))
    assert len(cached) == 1 and not (cached[0] / "activations").exists()
    _check_dashboards(out, results, cached[0], top=3)
    _check_explanations(out, results, seed=0)
    _check_supernodes(out, results, seed=0)
    again = tmp_path / "again"
    assert main([*args, "--no-explanations", "--out", str(again)]) == 0  # the cached transcoders: same graphs
    second = json.loads((again / "results.json").read_text())["results"]
    assert [r["predicted"] for r in second["groups"]["agreement"]["prompts"]] == [
        r["predicted"] for r in results["groups"]["agreement"]["prompts"]
    ]
    assert "explanations" not in second and "dashboards" in second
    labels = {
        r["featureIndex"]: r["explanation"] for r in results["explanations"]["features"] if not r["error"]
    }
    for prompt in ("ag-001a", "seed-tired"):  # no explanation written into the graph files
        assert not any(
            n.get("clerp") == labels.get(n.get("feature")) for n in _graph_json(again, prompt)["nodes"]
        )


def _graph_json(out, prompt):
    return json.loads((out / "graphs" / prompt / f"{prompt}.json").read_text())


def _check_explanations(out, results, seed):
    """Each dashboard's feature is explained (the tokens explainer), scored with MiniLM as the scorer scores it,
    scored again with the explanation of the feature a seeded derangement gives it, and the summary pools one
    value per schema and top feature; the graph files carry the explanations as clerp."""
    from interp.load import load
    from interp.sae.explanations import (
        EmbeddingScorer,
        FeatureFiles,
        FeatureId,
        SentenceEmbedder,
        Settings,
        examples_of,
    )
    from studies.attribution.explanations import derangement, token_explanation

    rows = results["explanations"]["features"]
    assert {(r["layer"], r["feature"]) for r in rows} == {
        (r["layer"], r["feature"]) for r in results["dashboards"]["features"]
    }
    files = FeatureFiles.open(out / "dashboards")
    settings = Settings(scorers=("embedding",), n_explain=10, n_test=10, seed=seed)
    scorer = EmbeddingScorer(SentenceEmbedder(load("minilm-l6")), seed=seed)
    ok = [r for r in rows if not r["error"]]
    assert len(ok) >= 2
    examples = {}
    for r in ok:
        explain, test, negatives, _ = examples_of(files.record(FeatureId(r["layer"], r["feature"])), settings)
        examples[(r["layer"], r["feature"])] = (test, negatives)
        assert r["explanation"] == token_explanation(explain)
        assert r["embedding (true)"] == pytest.approx(
            scorer.score(r["explanation"], test, negatives).auc, abs=1e-6
        )
    perm = derangement(len(ok), seed)
    by_name = {f"{r['layer']}:{r['feature']}": r for r in ok}
    for i, r in enumerate(ok):
        other = ok[perm[i]]
        assert r["shuffled from"] == f"{other['layer']}:{other['feature']}" != f"{r['layer']}:{r['feature']}"
        test, negatives = examples[(r["layer"], r["feature"])]
        again = scorer.score(by_name[r["shuffled from"]]["explanation"], test, negatives).auc
        assert r["embedding (shuffled)"] == pytest.approx(again, abs=1e-6)
    schemas = {}
    for group in results["groups"].values():
        for row in group["prompts"]:
            schema = row["prompt"][:-1] if row["prompt"].startswith("ag-") else "seed"
            for t in row["top features"].split(", "):
                key = (int(t.split(".F")[0][1:]), int(t.split(".F")[1].split("@")[0]))
                schemas.setdefault(key, set()).add(schema)
    # each feature once, in the group of schemas linked through shared top features (merged here set by set)
    components: list[set] = []
    for found in schemas.values():
        touching = [c for c in components if c & found]
        components = [c for c in components if not c & found] + [set(found).union(*touching)]
    group = {key: min(next(c for c in components if found <= c)) for key, found in schemas.items()}
    pairs = [(group[(r["layer"], r["feature"])], r) for r in ok]
    x = results["explanations"]["summary"]["scorers"]["embedding"]
    diffs = [r["embedding (true)"] - r["embedding (shuffled)"] for _, r in pairs]
    assert x["n_values"] == len(ok) and x["n_groups"] == len({g for g, _ in pairs})
    assert x["n_schemas"] == len({s for r in ok for s in schemas[(r["layer"], r["feature"])]})
    assert x["difference"]["mean"] == pytest.approx(np.mean(diffs), abs=1e-5)  # results.json: 6 digits
    if x["n_groups"] > 1:
        true = [r["embedding (true)"] for _, r in pairs]
        assert x["true"]["ci"] == pytest.approx(
            _grouped_interval(true, [g for g, _ in pairs], seed), abs=1e-5
        )
    labels = {r["featureIndex"]: r["explanation"] for r in ok}
    labelled = 0
    for prompt in (p["prompt"] for g in results["groups"].values() for p in g["prompts"]):
        for node in _graph_json(out, prompt)["nodes"]:
            if node.get("feature") in labels and str(node.get("layer", "")).isdigit():
                assert node["clerp"] == labels[node["feature"]]
                labelled += 1
    assert labelled > 0


def _check_supernodes(out, results, seed):
    """Per graph, the feature nodes before and after and the influence kept are those of its graph file; the
    summary over a group's graphs resamples schemas."""
    from interp.circuits import AttributionGraph

    rows = {r["prompt"]: r for r in results["supernodes"]["graphs"]}
    for name, group in results["groups"].items():
        prompts = [p["prompt"] for p in group["prompts"]]
        for prompt in prompts:
            doc = _graph_json(out, prompt)
            features = [n for n in doc["nodes"] if n["feature_type"] == "cross layer transcoder"]
            merged = sum(len(s) - 2 for s in doc["qParams"]["supernodes"])
            assert rows[prompt]["feature_nodes_before"] == len(features)
            assert rows[prompt]["feature_nodes_after"] == len(features) - merged
            graph = AttributionGraph.load(out / "graphs" / prompt)
            groups = [[graph.index(m) for m in members] for _, members in graph.selection.supernodes] if (
                graph.selection is not None) else []  # fmt: skip
            assert rows[prompt]["influence_kept"] == pytest.approx(_influence_kept(graph, groups), abs=1e-5)
        summary = results["supernodes"]["groups"][name]
        before = [rows[p]["feature_nodes_before"] for p in prompts]
        assert summary["feature_nodes_before"]["mean"] == pytest.approx(np.mean(before))
        assert summary["n_graphs"] == len(prompts)


def _check_dashboards(out, results, cache, top):
    """The dashboards are those of every graph's top features, beside the report, and the report's table
    says what their files say."""
    from interp.feature_id import FeatureId

    listed = {(r["layer"], r["feature"]): r for r in results["dashboards"]["features"]}
    tops = {
        (int(t.split(".F")[0][1:]), int(t.split(".F")[1].split("@")[0]))
        for group in results["groups"].values()
        for row in group["prompts"]
        for t in row["top features"].split(", ")
    }
    assert tops and tops <= set(listed) and len(listed) <= top * 6  # 6 graphs
    page = out / results["dashboards"]["page"]
    assert page.is_file()
    folder = page.parent
    index = json.loads((folder / "index.json").read_text())
    assert {(r["layer"], r["feature"]) for r in index["features"]} == set(listed)
    for (layer, feature), row in listed.items():
        record = json.loads((folder / f"{FeatureId(layer, feature).index}.json").read_text())
        assert row["featureIndex"] == record["index"]
        assert row["density"] == pytest.approx(
            record["activation_frequency"], rel=1e-5
        )  # results.json: 6 digits
        assert row["act_max"] == pytest.approx(record["act_max"], rel=1e-5)
        if record["examples_quantiles"]:
            top_example = record["examples_quantiles"][0]["examples"][0]
            assert f"[[{top_example['tokens'][top_example['train_token_ind']]}]]" in row["top example"]
    assert results["dashboards"]["n_tokens"] == index["n_tokens"] > 0 and index["dictionary"] == "transcoders"
    assert (
        cache / "dashboards" / "features" / folder.name / "index.json"
    ).is_file()  # a rerun reads them back


@pytest.mark.parametrize(
    "flags, said",
    [
        (["--k", "32", "--d-transcoder", "16"], "--k 32 is larger than --d-transcoder 16"),
        (["--max-feature-nodes", "0"], "--max-feature-nodes 0: give at least 1"),
        (["--top", "9", "--max-feature-nodes", "4"], "--top 9 is larger than --max-feature-nodes 4"),
        (["--heads", "25.2"], "give heads as L25H2,L26H2"),
        (["--explanation-scorers", "embedding,recall"], "choose from detection, fuzzing, embedding"),
        (["--explainer", "tokens", "--explanation-scorers", "detection"], "--explainer tokens has no model"),
        (["--dashboard-texts", "0"], "--dashboard-texts 0 writes no dashboards to explain"),
        (["--explainer", "http://127.0.0.1:9/v1"], "http://127.0.0.1:9"),
        (["--explainer", "no/such/model"], "no/such/model"),
        (["--seed-pairs", "-2"], "--seed-pairs -2: give 0 (skip) or the number of pairs"),
        (["--seed-pairs", "1"], "--seed-pairs 1: one pair cannot be split"),
    ],
)
def test_bad_flags_are_one_line_before_any_work(flags, said, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit:
        main([*flags, "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit.value.code == 2 and said in err[-1] and not (tmp_path / "r").exists()


def test_a_head_the_model_lacks_is_refused_naming_it(folder, corpus, tmp_path):
    from studies.attribution.study import AttributionConfig, run_study
    from studies.data.corpus import Corpus

    model = load(folder)
    config = AttributionConfig(model="tiny", heads=((25, 2),))
    with pytest.raises(ValueError, match=r"L25H2 is not a head of tiny \(2 layers"):
        run_study(model, config, Corpus([], "none", None, 0, 0), tmp_path, False)


def test_switch_pairs_the_twins_of_each_schema_and_keeps_sensitivity_apart_from_bias():
    # the seed's numbers: animal - street 7.89 after "tired" (expects the animal), 7.37 after "wide"
    seed = [{"schema": "seed", "sign": 1, "clean": 7.89}, {"schema": "seed", "sign": -1, "clean": 7.37}]
    found = measure.switch(seed, ('"animal"', '"street"'), seed=0)
    assert found.n_pairs == 1 and found.right_both == 0
    assert found.sensitivity.estimate == pytest.approx(0.52) and found.bias.estimate == pytest.approx(7.63)
    # six agreement pairs, she - he higher in the feminine twin in all six, under a bias toward "he": the
    # sign-flip test over pairs gives 2 / 64, whatever the order of the twins in a schema
    rows = []
    for s, (fem, masc) in enumerate(
        [(1.0, 0.2), (0.5, -0.9), (-0.2, -1.0), (2.0, 1.1), (0.1, -2.0), (-1.0, -1.3)]
    ):
        twins = [{"schema": f"s{s}", "sign": 1, "clean": fem}, {"schema": f"s{s}", "sign": -1, "clean": masc}]
        rows += twins if s % 2 else twins[::-1]
    rows.append({"schema": "lone", "sign": 1, "clean": 3.0})  # a prompt without its twin is in no pair
    found = measure.switch(rows, ('"she"', '"he"'), seed=0)
    assert found.n_pairs == 6 and found.sensitive == 6
    assert found.sensitivity.p_value == pytest.approx(2 / 64)
    assert found.sensitivity.estimate == pytest.approx(np.mean([0.8, 1.4, 0.8, 0.9, 2.1, 0.3]))
    assert measure.switch(rows[-1:], ('"she"', '"he"'), seed=0) is None


def test_top_beats_random_uses_effects_signed_toward_the_answer():
    # prompt a: the top set raises the answer's preference by 3 (wrong sign) while random sets lower it a
    # little: by absolute values it "beats" them, signed it does not. Prompt b: the top set lowers it most.
    rows = [
        {"schema": "s1", "sign": 1, "free": 3.0, "random_free": [-0.5, -0.2]},
        {"schema": "s1", "sign": -1, "free": 2.0, "random_free": [0.5, -0.1]},
        {"schema": "s2", "sign": 1, "free": -0.1, "random_free": [-0.4, 0.2]},
        {"schema": "s2", "sign": -1, "free": -1.0, "random_free": [0.4, 0.3]},
    ]
    b = measure.top_beats_random(rows, seed=0)
    assert (b["count"], b["n"], b["chance"]) == (1, 4, pytest.approx(1 / 3))
    assert b["ci"] == list(
        bootstrap_mean_interval([0.0, 1.0, 0.0, 0.0], 2000, 0, groups=["s1", "s1", "s2", "s2"])[1:]
    )


def test_role_shares_are_means_over_prompts_with_intervals_over_schemas():
    rows = [
        {"schema": "s1", "role_shares": {"name": 0.5, "last": 0.5}},
        {"schema": "s1", "role_shares": {"name": 0.3, "last": 0.7}},
        {"schema": "s2", "role_shares": {"last": 1.0}},  # no feature at the name: a share of 0
        {"schema": "s2", "role_shares": {"name": 0.2, "last": 0.8}},
        {"schema": "s3", "role_shares": {"name": 0.6, "last": 0.4}},
        {"schema": "s3", "role_shares": {"name": 0.4, "last": 0.6}},
    ]
    out = measure.role_shares(rows, seed=2)
    names = [0.5, 0.3, 0.0, 0.2, 0.6, 0.4]
    assert out["name"]["mean"] == pytest.approx(sum(names) / 6)
    groups = ["s1", "s1", "s2", "s2", "s3", "s3"]
    assert out["name"]["ci"] == list(bootstrap_mean_interval(names, 2000, 2, groups=groups)[1:])
    assert set(out) == {"name", "last"}
    assert np.isnan(measure.role_shares(rows[:2], seed=0)["name"]["ci"]).all()  # one schema: no interval


def test_head_shares_get_intervals_over_schemas_and_a_shuffled_baseline():
    rng = np.random.default_rng(0)
    loadings = [{"heads": rng.normal(size=(2, 3)).tolist(), "direct": float(rng.normal())} for _ in range(6)]
    loadings[0]["heads"][1][2] = 9.0  # one head carries most of one prompt's loadings
    groups = ["a", "a", "b", "b", "c", "c"]
    out = measure.share_intervals(loadings, [(1, 2), (0, 0)], groups, seed=1)
    shares = measure.head_shares(loadings)
    per = np.array([np.abs(x["heads"]) for x in loadings])  # [prompt, layer, head]
    totals = per.sum((1, 2)) + np.abs([x["direct"] for x in loadings])
    for layer, head in [(1, 2), (0, 0)]:
        x = out[f"L{layer}H{head}"]
        assert x["share"] == pytest.approx(shares[layer, head], rel=1e-12)
        expected = bootstrap_mean_interval(
            per[:, layer, head] / totals, 2000, 1, groups=groups, weights=totals
        )
        assert x["ci"] == list(expected[1:])
    assert out["L1H2"]["shuffled_mean"] == pytest.approx(per.sum() / totals.sum() / 6)
    # shuffled, the largest share of six heads is at least the mean one and at most all of the heads' part
    assert per.sum() / totals.sum() / 6 <= out["L1H2"]["shuffled_max_95"] <= per.sum() / totals.sum()


@pytest.mark.parametrize("n", [2, 3, 5, 40])
def test_the_shuffled_explanations_are_a_seeded_derangement(n):
    from studies.attribution.explanations import derangement

    draws = [derangement(n, seed) for seed in range(20)]
    for p in draws:
        assert sorted(p) == list(range(n)) and all(p[i] != i for i in range(n))
    assert derangement(n, 7) == draws[7]  # seeded
    if n > 3:  # 2 has one derangement, 3 has two
        assert len({tuple(p) for p in draws}) > 1
    with pytest.raises(ValueError, match="at least 2"):
        derangement(1, 0)


def test_the_paired_difference_and_its_interval_resample_schemas():
    from studies.attribution.explanations import summarise

    rows = [
        {"layer": 0, "feature": 1, "true": {"embedding": 0.9}, "shuffled": {"embedding": 0.5}},
        {"layer": 0, "feature": 2, "true": {"embedding": 0.7}, "shuffled": {"embedding": 0.6}},
        {"layer": 1, "feature": 3, "true": {"embedding": 0.4}, "shuffled": {"embedding": 0.55}},
        {"layer": 2, "feature": 4, "true": {"embedding": 0.8}, "shuffled": {"embedding": 0.3}},
        {"layer": 2, "feature": 5, "error": "no explanation"},
    ]
    schemas = {(0, 1): ["s1", "s2"], (0, 2): ["s1"], (1, 3): ["s2"], (2, 4): ["s3"], (2, 5): ["s3"]}
    out = summarise(rows, schemas, ["embedding"], seed=3)
    assert (out["n_features"], out["n_scored"]) == (5, 4)
    x = out["scorers"]["embedding"]
    # one value per feature; (0, 1) is top in s1 and s2, so s1 and s2 are one group, s3 another
    diffs = [0.4, 0.1, -0.15, 0.5]
    groups = ["s1", "s1", "s1", "s3"]
    assert x["difference"]["mean"] == pytest.approx(sum(diffs) / 4, abs=1e-12)
    assert x["true"]["mean"] == pytest.approx((0.9 + 0.7 + 0.4 + 0.8) / 4, abs=1e-12)
    assert x["difference"]["ci"] == pytest.approx(_grouped_interval(diffs, groups, 3), abs=1e-12)
    shuffled = [0.5, 0.6, 0.55, 0.3]
    assert x["shuffled"]["ci"] == pytest.approx(_grouped_interval(shuffled, groups, 3), abs=1e-12)
    assert (x["n_values"], x["n_schemas"], x["n_groups"], x["chance"], x["metric"]) == (4, 3, 2, 0.5, "auc")
    assert x["quartiles"]["true"] == pytest.approx([0.625, 0.75, 0.825])  # features once: .4 .7 .8 .9
    assert x["quartiles"]["shuffled"] == pytest.approx([0.45, 0.525, 0.5625])  # .3 .5 .55 .6
    assert out["n_distinct_explanations"] == 0 and out["most_common_explanation"] is None  # none given above
    rows[0]["explanation"] = rows[1]["explanation"] = "he"
    rows[2]["explanation"] = "she"
    again = summarise(rows, schemas, ["embedding"], seed=3)
    assert again["n_distinct_explanations"] == 2 and again["most_common_explanation"] == {
        "text": "he",
        "count": 2,
    }


def test_schemas_that_share_a_top_feature_are_one_group():
    from studies.attribution.explanations import linked_schemas

    schemas = {(0, 1): ["b", "c"], (0, 2): ["a"], (1, 3): ["c", "d"], (2, 4): ["e"], (2, 5): ["a"]}
    assert linked_schemas(schemas) == {(0, 1): "b", (0, 2): "a", (1, 3): "b", (2, 4): "e", (2, 5): "a"}


def _grouped_interval(values, groups, seed, n_boot=2000):
    """The grouped interval the studies report, written out. From 10 groups a percentile bootstrap of the mean
    drawing whole groups: each resample draws as many groups as there are, with replacement (labels in sorted
    order), and pools their values. Below 10, where that bootstrap covers too little, the t-interval over groups:
    the pooled mean -+ t(groups - 1) times the standard error of the groups' deviations from it."""
    labels = sorted(set(groups))
    members = {g: [v for v, h in zip(values, groups, strict=True) if h == g] for g in labels}
    if len(labels) < 10:
        from scipy import stats

        mean = sum(values) / len(values)
        size = len(values) / len(labels)
        deviations = [(sum(members[g]) - mean * len(members[g])) / size for g in labels]
        n = len(labels)
        half = stats.t.ppf(0.975, n - 1) * math.sqrt(sum(d * d for d in deviations) / (n * (n - 1)))
        if set(values) <= {0.0, 1.0}:  # right or wrong: a proportion, inside [0, 1]
            return [max(mean - half, 0.0), min(mean + half, 1.0)]
        return [mean - half, mean + half]
    draws = np.random.default_rng(seed).integers(0, len(labels), size=(n_boot, len(labels)))
    means = [np.mean([v for i in row for v in members[labels[i]]]) for row in draws]
    return list(np.percentile(means, [2.5, 97.5]))


def _influence_kept(graph, groups):
    """The criterion's influence kept, written out with a matrix inverse: influence ``w (I - Â)^-1 - w`` of each
    node and of each unit of the graph collapsed onto ``groups`` (rows and columns summed)."""
    a = graph.adjacency.double().numpy()
    w = graph.logit_weights.double().numpy()

    def influence(adj, weights):
        norm = np.abs(adj)
        norm = norm / np.maximum(norm.sum(1, keepdims=True), 1e-10)
        return weights @ np.linalg.inv(np.eye(len(adj)) - norm) - weights

    before = influence(a, w)
    unit = list(range(len(a)))
    for g in groups:
        for i in g:
            unit[i] = min(g)
    kept = sorted(set(unit))
    m = np.zeros((len(kept), len(a)))
    m[[kept.index(u) for u in unit], range(len(a))] = 1  # [unit, node]
    after = influence(m @ a @ m.T, m @ w)
    return 1 - np.abs(after - m @ before).sum() / (m @ before).sum()


def test_supernodes_per_graph_are_counted_from_the_graph():
    from studies.attribution import supernodes
    from tests.circuits.test_supernodes import _planted

    graph, tc = _planted()
    grouped, report, row = supernodes.propose(graph, None, tc)
    kept = graph.prune(0.8, 0.98).node_mask[: graph.n_features]
    groups = [[graph.index(m) for m in members] for _, members in grouped.selection.supernodes]
    assert groups and all(kept[i] for g in groups for i in g)  # candidates: the pruned graph's features
    assert row["feature_nodes_before"] == int(kept.sum())
    assert row["feature_nodes_after"] == int(kept.sum()) - sum(len(g) - 1 for g in groups)
    assert row["n_groups"] == len(groups) and row["grouped_nodes"] == sum(map(len, groups))
    assert row["influence_kept"] == pytest.approx(_influence_kept(graph, groups), abs=1e-5)
    assert row["influence_kept"] >= 1 - row["tolerance"] and report["influence_kept"] == row["influence_kept"]
    rows = [row, {**row, "feature_nodes_after": 3, "shrink": 0.5}, {**row, "influence_kept": 0.97}]
    out = supernodes.summarise(rows, ["a", "a", "b"], seed=2)
    assert out["shrink"]["mean"] == pytest.approx((2 * row["shrink"] + 0.5) / 3)
    assert out["shrink"]["ci"] == pytest.approx(
        _grouped_interval([r["shrink"] for r in rows], ["a", "a", "b"], 2), abs=1e-12
    )
    assert out["min_influence_kept"] == min(row["influence_kept"], 0.97) and out["n_graphs"] == 3


def test_the_explanations_finding_claims_only_what_its_interval_excludes():
    from studies.attribution.report import _verdict

    assert _verdict(0.01, 0.2).startswith("above")
    assert _verdict(-0.2, -0.01).startswith("**below**")
    assert _verdict(-0.1, 0.1).startswith("not distinguishable") and _verdict(0.0, 0.1).startswith("not")
    assert _verdict(float("nan"), float("nan")).startswith("one independent group")


def test_the_explanations_finding_states_chance_and_a_repeating_explainer():
    from types import SimpleNamespace

    from studies.attribution.report import _explanations_finding

    def summary(true_ci, distinct, common):
        score = {"chance": 0.5, "n_values": 18, "true": {"mean": 0.49, "ci": true_ci},
                 "shuffled": {"mean": 0.48, "ci": [0.39, 0.58]},
                 "difference": {"mean": 0.008, "ci": [0.003, 0.015]}}  # fmt: skip
        return {"scorers": {"embedding": score}, "n_features": 30, "n_distinct_explanations": distinct,
                "most_common_explanation": {"text": "days of the week", "count": common}}  # fmt: skip

    report = SimpleNamespace(findings=[])
    report.add_finding = lambda text, section: report.findings.append(text)
    _explanations_finding(report, summary([0.40, 0.59], 2, 13))
    (text,) = report.findings
    assert "at chance (the interval holds 0.5)" in text and "above the shuffled baseline" in text
    assert (
        "2 distinct explanations for 30 features ('days of the week' 13 times)" in text
        and "say little" in text
    )
    report.findings.clear()
    _explanations_finding(report, summary([0.55, 0.70], 25, 2))
    (text,) = report.findings
    assert "above chance;" in text and "say little" not in text


def test_planted_features_score_above_their_shuffled_explanations(tmp_path):
    """Through a model (a rule-following stand-in) the true explanations of planted features are found exactly,
    and each feature asked about with a deranged feature's explanation is judged by that explanation's rule, on
    its own examples: the same prompts the scorer writes for it, answered by the same model."""
    from interp.sae.explanations import DetectionScorer, FeatureFiles, FeatureId, Settings, examples_of
    from studies.attribution.explanations import ExplanationSettings, derangement, run
    from tests.sae.explanations.planted import PLANTED, write_folder
    from tests.sae.explanations.rule_model import RuleModel

    root = write_folder(tmp_path / "dash", n_examples=40)
    folder = root / "features" / "planted"
    settings = ExplanationSettings("rule-model", ("detection",), seed=4)
    model = RuleModel()
    rows = run(folder, [(p.id.layer, p.id.feature) for p in PLANTED], settings, model, None, tmp_path, False)
    assert [r["explanation"] for r in rows] == [p.explanation for p in PLANTED]
    assert all(r["true"]["detection"] == 1.0 for r in rows)
    perm = derangement(3, 4)
    files = FeatureFiles.open(root)
    auto = Settings(scorers=("detection",), n_explain=10, n_test=10, seed=4)
    for i, (row, planted) in enumerate(zip(rows, PLANTED, strict=True)):
        other = PLANTED[perm[i]]
        assert row["shuffled_from"] == str(other.id)
        _, test, negatives, _ = examples_of(
            files.record(FeatureId(planted.id.layer, planted.id.feature)), auto
        )
        scorer = DetectionScorer(auto.per_prompt, auto.threshold, auto.probabilities, auto.seed)
        prepared = scorer.prepare(other.explanation, test, negatives, key=planted.id.index)
        expected = scorer.judge(
            prepared, RuleModel().complete(prepared.requests), "rule-model"
        ).metrics.accuracy
        assert row["shuffled"]["detection"] == expected < 1.0  # another class's words: not this feature's
