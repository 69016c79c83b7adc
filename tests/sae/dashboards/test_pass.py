"""The streaming pass against a naive computation over every token: counts, extremes, top examples and their
windows, the histogram, quantile bounds, and which sampled tokens each quantile group shows."""

from __future__ import annotations

import math

import pytest
import torch

from interp.feature_id import FeatureId
from interp.sae import SAE, SAESet
from interp.sae.dashboards import Data, Settings, collect
from interp.sae.dashboards.reservoir import sample_key
from tests.sae.dashboards import helpers

SETTINGS = Settings(top=5, quantiles=3, per_quantile=3, sample=12, before=4, after=2, logits=4)
F16 = 2.0**-11  # the relative rounding of float16, in which windows are kept
ATOL = 2e-5
"""The pass runs items in padded batches, the naive one alone: their streams differ by float32 rounding
(about 1e-6 relative), and an activation is a 32-term dot product with weights of size 0.3-0.4 (plus a bias
it nearly cancels near zero): about 1e-5 absolute."""


@pytest.fixture(scope="module")
def model():
    return helpers.model()


@pytest.fixture(scope="module", params=["per-layer", "skip", "clt", "sae", "sae-set"])
def case(request, model):
    module = helpers.dictionary(request.param, model)
    items = helpers.texts()
    got = collect(model, module, Data(texts=items, batch_size=7), settings=SETTINGS)
    records = {(r.layer, r.feature): r.to_dict() for r in got.records(model, scan="test")}
    return module, items, records, helpers.naive(model, module, items), got


def test_counts_extremes_and_density(case):
    _, _, records, (ids, _, active), got = case
    n_tokens = sum(len(row) - 1 for row in ids)
    assert got.collector.n_tokens == n_tokens
    fired = 0
    for key, rec in records.items():
        values = [v for v, _, _ in active[key]]
        assert rec["n_active"] == len(values) and rec["n_tokens"] == n_tokens
        assert rec["activation_frequency"] == len(values) / n_tokens
        if values:
            fired += 1
            torch.testing.assert_close(rec["act_max"], max(values), rtol=1e-5, atol=ATOL)
            torch.testing.assert_close(rec["act_min"], min(values), rtol=1e-5, atol=ATOL)
        else:
            assert rec["examples_quantiles"] == [] and rec["act_max"] == 0.0
    assert fired >= len(records) // 2  # the case exercises active features


def test_top_examples_and_windows_match_the_naive_pass(case, model):
    _, _, records, (ids, acts, active), _ = case
    for (layer, feature), rec in records.items():
        expected = sorted(active[(layer, feature)], reverse=True)[: SETTINGS.top]
        if not expected:
            continue
        top = rec["examples_quantiles"][0]
        assert top["quantile_name"] == "Top activations"
        got = [(e["activation"], e["item"], e["position"]) for e in top["examples"]]
        torch.testing.assert_close(
            torch.tensor([v for v, _, _ in got]),
            torch.tensor([v for v, _, _ in expected]),
            rtol=1e-5,
            atol=ATOL,
        )
        # each shown token is one of the largest (ties, such as the same word after the special token in
        # several items, may be shown in either order); its naive activation is the one shown
        value = {(i, p): v for v, i, p in active[(layer, feature)]}
        assert len({(i, p) for _, i, p in got}) == len(got)
        for v, i, p in got:
            torch.testing.assert_close(v, value[(i, p)], rtol=1e-5, atol=ATOL)
        for e in top["examples"]:
            _check_window(e, ids[e["item"]], acts[layer][e["item"]][:, feature], rec["act_max"], model)


def _check_window(example, row_ids, row_acts, act_max, model):
    """An example's tokens and activations are those of positions ``position - before`` to ``+ after``, within
    the item and from position 1 (the special token is not shown)."""
    p = example["position"]
    lo, hi = max(1, p - SETTINGS.before), min(len(row_ids), p + SETTINGS.after + 1)
    assert example["tokens"] == model.tokenizer.to_str_tokens(row_ids[lo:hi].tolist())
    assert example["train_token_ind"] == p - lo
    want = row_acts[lo:hi].double()
    got = torch.tensor(example["tokens_acts_list"], dtype=torch.float64)
    decimals = max(0, 3 - math.floor(math.log10(act_max)))  # four significant digits of the largest
    bound = want.abs() * F16 + 0.5 * 10.0**-decimals + ATOL  # float16, then rounding to the shown digits
    assert ((got - want).abs() <= bound).all(), (got, want)


def test_histogram_counts_are_exact(case):
    _, _, records, (_, _, active), _ = case
    for key, rec in records.items():
        values = torch.tensor([v for v, _, _ in active[key]])
        if not len(values):
            assert rec["histogram"] == []
            continue
        top = 2.0 ** int(torch.frexp(values.max())[1])  # the smallest power of two above every value
        bins = (values * 64 / top).floor().long()
        expected = torch.bincount(bins, minlength=64)[: int(bins.max()) + 1]
        assert rec["histogram"] == expected.float().tolist()
        assert rec["histogram_range"] == [0.0, (int(bins.max()) + 1) * top / 64]
        assert sum(rec["histogram"]) == rec["n_active"]


def test_quantile_bounds_are_within_a_bin_of_the_exact_quantiles(case):
    _, _, records, (_, _, active), _ = case
    checked = 0
    for key, rec in records.items():
        values = sorted(v for v, _, _ in active[key])
        n = len(values)
        if n < 30:
            continue
        for j, bound in enumerate(rec["quantile_bounds"][1:-1], start=1):
            rank = j / SETTINGS.quantiles * n  # tokens below the bound
            lo, hi = values[max(0, math.floor(rank) - 1)], values[min(n - 1, math.ceil(rank))]
            assert lo * 2 ** (-1 / 8) * (1 - 1e-6) <= bound <= hi * 2 ** (1 / 8) * (1 + 1e-6), (bound, lo, hi)
            checked += 1
        assert len(rec["quantile_values"]) == 100 and rec["quantile_values"][-1] == rec["act_max"]
    assert checked > 0


def test_quantile_examples_are_the_smallest_sample_keys_of_each_group(case):
    """Each group shows the group's tokens with the smallest sample keys, among those whose key is within the
    ``sample`` smallest of all the feature's active tokens, leaving out the top examples: a uniform draw from
    the group, found without knowing the bounds during the pass."""
    _, _, records, (_, _, active), got = case
    checked = 0
    for (layer, feature), rec in records.items():
        tokens = active[(layer, feature)]
        edges = rec["quantile_bounds"]
        if not tokens or any(abs(v - b) <= ATOL + 1e-5 * abs(b) for v, _, _ in tokens for b in edges[1:-1]):
            continue  # a token on a group's bound, to float rounding, may fall in either group
        checked += 1
        g = FeatureId(layer, feature).index  # the feature's number in the dictionary
        items = torch.tensor([i for _, i, _ in tokens])
        positions = torch.tensor([p for _, _, p in tokens])
        keys = sample_key(items, positions, torch.full_like(items, g), SETTINGS.seed).tolist()
        cutoff = sorted(keys)[SETTINGS.sample - 1] if len(keys) > SETTINGS.sample else math.inf
        shown = {(e["item"], e["position"]) for e in rec["examples_quantiles"][0]["examples"]}
        groups = {}
        for key, (value, item, pos) in sorted(zip(keys, tokens, strict=True)):
            if key > cutoff or (item, pos) in shown:
                continue
            q = sum(value >= b for b in edges[1:-1])
            groups.setdefault(q, [])
            if len(groups[q]) < SETTINGS.per_quantile:
                groups[q].append((item, pos))
        listed = {
            round(int(group["quantile_name"].split()[1].split("-")[0]) * SETTINGS.quantiles / 100): [
                (e["item"], e["position"]) for e in group["examples"]
            ]
            for group in rec["examples_quantiles"][1:]
        }
        assert listed == groups
    assert checked >= len(records) // 2


def test_examples_repeat_no_token_and_mark_repeated_items(case):
    _, _, records, _, _ = case
    for rec in records.values():
        seen_tokens, seen_items = set(), set()
        for group in rec["examples_quantiles"]:
            for e in group["examples"]:
                assert (e["item"], e["position"]) not in seen_tokens
                assert e["is_repeated_datapoint"] == (e["item"] in seen_items)
                seen_tokens.add((e["item"], e["position"]))
                seen_items.add(e["item"])


def test_logits_are_the_last_decoder_row_through_the_unembedding(case, model):
    module, _, records, _, _ = case
    for (layer, feature), rec in list(records.items())[:5]:
        if isinstance(module, (SAE, SAESet)):
            sae = module if isinstance(module, SAE) else module.sae(layer)
            row = sae.W_dec[feature]
        else:
            row = module.decoder(layer, torch.tensor([feature]))[0, -1]  # the last layer it writes
        x = row.float() * model.ln_final.gain  # RMSNorm: the gain, no centring
        logits = x @ model.unembed.weight.float()
        assert rec["top_logits"] == model.tokenizer.to_str_tokens(
            logits.topk(SETTINGS.logits).indices.tolist()
        )
        assert rec["bottom_logits"] == model.tokenizer.to_str_tokens(
            (-logits).topk(SETTINGS.logits).indices.tolist()
        )


def test_chosen_features_read_only_their_layers_and_match_the_full_pass(model):
    module = helpers.dictionary("clt", model)
    items = helpers.texts()
    full = {
        (r.layer, r.feature): r.to_dict()
        for r in collect(model, module, items, settings=SETTINGS).records(model)
    }
    chosen = collect(model, module, items, settings=SETTINGS, features=[(1, 4), (1, 2)])
    assert chosen.collector.layers == [1] and chosen.collector.n == 2
    for record in (
        r.to_dict() for r in chosen.records(model)
    ):  # the same up to float32 rounding (a hook at layer 0 is not taken)
        other = full[(record["layer"], record["feature"])]
        assert record["n_active"] == other["n_active"] and record["histogram"] == other["histogram"]
        torch.testing.assert_close(record["quantile_bounds"], other["quantile_bounds"], rtol=1e-5, atol=ATOL)
        for a, b in zip(record["examples_quantiles"], other["examples_quantiles"], strict=True):
            assert [(e["item"], e["position"], e["tokens"]) for e in a["examples"]] == [
                (e["item"], e["position"], e["tokens"]) for e in b["examples"]
            ]
