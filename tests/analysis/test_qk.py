"""QK attribution: its parts add up at every step, differences sum to differences, bad input is refused.

The model is a tiny random Gemma 2 (sandwich norms, a soft-cap, a sliding first layer, grouped-query heads)
loaded from a folder with a byte-level tokenizer, so prompts can be text.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from interp.analysis.decompose import decompose_stream
from interp.analysis.qk import qk_attribution, qk_names
from interp.analysis.qk.difference import align_twins, qk_key_difference, qk_twin_difference
from interp.analysis.qk.project import project
from interp.analysis.qk.prompt import as_prompt
from interp.load import load
from tests.load.builders import byte_level_bpe, save_folder
from tests.load.families import build
from tests.tolerance import EPS32, stages

SEED = "The animal didn't cross the street because it was too tired."
TWIN = "The animal didn't cross the street because it was too wide."
RTOL = 1e-4


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    backend = byte_level_bpe()
    folder = tmp_path_factory.mktemp("qk") / "gemma2"
    return load(save_folder(build("gemma2", backend.get_vocab_size()), backend, folder))


def _close(value: float, expected: float) -> None:
    assert abs(value - expected) <= RTOL * abs(expected) + 1e-6, (value, expected)


def _end(model, text: str) -> int:
    return as_prompt(model, text).ids.shape[1] - 1


def test_each_step_adds_up_to_the_runs_activations(model):
    prompt = as_prompt(model, SEED)
    layer, head, pos = 2, 3, _end(model, SEED)
    names = qk_names(model, layer) + [
        f"blocks.{layer}.hook_resid_pre",
        f"blocks.{layer}.attn.hook_rot_q",
        f"blocks.{layer}.attn.hook_rot_k",
    ]
    _, cache = model.run_with_cache(prompt.ids, names_filter=names)
    components, parts = decompose_stream(
        model, cache, layer, position=pos, heads="source", tokens=prompt.tokens
    )
    torch.testing.assert_close(parts.sum(0), cache["resid_pre", layer][0, pos], atol=1e-4, rtol=1e-5)
    assert len({c for c in components}) == len(components)  # every component once
    rotary = prompt.rotary(model, layer, pos)
    for side, kv in (("q", head), ("k", head // model.cfg.group_size)):
        _, projected = project(model, cache, layer, head, pos, rotary, components, parts, side)
        expected = cache[f"blocks.{layer}.attn.hook_rot_{side}"][0, pos, kv]
        torch.testing.assert_close(projected.sum(0), expected, atol=1e-4, rtol=1e-5)


def test_split_by_source_refines_the_split_by_head(model):
    query = _end(model, SEED)
    fine = qk_attribution(model, SEED, 1, 2, query, 3)
    coarse = qk_attribution(model, SEED, 1, 2, query, 3, by_source=False)
    _close(fine.score, coarse.score)
    marginal = fine.query_marginal()
    heads = marginal[marginal.kind == "head"].groupby(["layer", "head"])["value"].sum()
    coarse_heads = coarse.query_marginal().query("kind == 'head'").set_index(["layer", "head"])["value"]
    # a head's share summed over its sources, against the head unsplit: equal to the rounding of the terms summed
    fine_rows, coarse_rows = (q.matrix.abs().sum(1) for q in (fine, coarse))  # [query part]: |row| terms
    for index, value in coarse_heads.items():
        terms = sum(
            float(rows[i])
            for q, rows in ((fine, fine_rows), (coarse, coarse_rows))
            for i, c in enumerate(q.query_components)
            if c.kind == "head" and (c.layer, c.head) == index
        )
        assert abs(heads[index] - value) <= stages(model.cfg.n_layers) * EPS32 * terms, (
            index,
            heads[index],
            value,
        )
    sources = {c.source for c in fine.query_components if c.kind == "head" and c.layer == 0}
    assert sources == set(range(query - 4, query + 1))  # layer 0 slides: a window of 5 keys


def test_soft_cap_reported_beside_the_score(model):
    attribution = qk_attribution(model, SEED, 1, 0, _end(model, SEED), 0)
    assert attribution.softcap == 4.0
    _close(attribution.capped, attribution.model_score)
    assert abs(attribution.score) > abs(attribution.capped)  # the cap shrinks every score


def test_table_and_marginals_read_and_sum(model):
    attribution = qk_attribution(model, SEED, 1, 1, _end(model, SEED), 2)
    table = attribution.table(top=5)
    assert list(table.columns) == ["query", "key", "query_at", "key_at", "value", "share"]
    assert len(table) == 5 and table["value"].abs().is_monotonic_decreasing
    flat = attribution.matrix.flatten().abs().sort(descending=True).values
    assert table["value"].abs().iloc[0] == pytest.approx(float(flat[0]))
    labels = set(attribution.query_labels) | set(attribution.key_labels)
    assert {'embed@"im"', 'L0H1@" an"', 'MLP0@"im"', 'embed@"."', "ln1.b", "L1 b_O"} - labels == {
        "ln1.b",
        "L1 b_O",
    }
    _close(float(attribution.query_marginal()["value"].sum()), attribution.score)
    _close(float(attribution.key_marginal()["value"].sum()), attribution.score)


def test_two_keys_difference_sums_to_the_difference(model):
    ids = as_prompt(model, SEED)
    query = _end(model, SEED)
    difference = qk_key_difference(model, SEED, 1, 3, query, 1, 13)
    first = qk_attribution(model, SEED, 1, 3, query, 1)
    second = qk_attribution(model, SEED, 1, 3, query, 13)
    _close(difference.total, first.score - second.score)
    _close(difference.difference, first.score - second.score)
    assert len(difference.query_components) == len(first.query_components)  # the same query on both sides
    assert (ids.tokens[1], ids.tokens[13]) == (" an", " s")  # "animal" and "street" begin there
    assert 'MLP0@" an| s"' in difference.key_labels  # one role: the MLP's write at the key


def test_twin_difference_aligns_by_characters_and_sums(model):
    first, twin = as_prompt(model, SEED), as_prompt(model, TWIN)
    align = align_twins(first, twin)
    changed = [p for p in range(first.ids.shape[1]) if p not in align]
    switch = (SEED.index("tired"), SEED.index("tired") + len("tired"))  # the characters that differ
    spans = first.offsets.tolist()
    assert changed and all(spans[p][0] < switch[1] and spans[p][1] > switch[0] for p in changed)
    assert all(first.tokens[p] == twin.tokens[q] for p, q in align.items())
    assert align[_end(model, SEED)] == _end(model, TWIN)  # the full stop, in the common suffix
    query, key = _end(model, SEED), 1
    difference = qk_twin_difference(model, SEED, TWIN, 1, 3, query, key)
    a = qk_attribution(model, SEED, 1, 3, query, key)
    b = qk_attribution(model, TWIN, 1, 3, _end(model, TWIN), key)
    _close(difference.total, a.score - b.score)
    _close(difference.difference, a.score - b.score)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(layer=3), IndexError, "layer 3 is out of range for a model with 3 layers"),
        (dict(head=4), IndexError, "head 4 is out of range for a layer with n_heads=4"),
        (dict(query=40), IndexError, "query 40 is out of range for a prompt of"),
        (dict(key=9), ValueError, "key 9 comes after query 8"),
        (dict(layer=0, key=0), ValueError, "outside layer 0's sliding window of 5 keys"),
    ],
)
def test_bad_positions_are_refused(model, kwargs, error, message):
    args = dict(layer=1, head=0, query=8, key=2) | kwargs
    with pytest.raises(error, match=message.replace("(", r"\(")):
        qk_attribution(model, SEED, args["layer"], args["head"], args["query"], args["key"])


def test_padding_and_unalignable_twins_are_refused(model):
    batch = model.to_tokens(["it was tired.", SEED], padding_side="left")
    short = dataclasses.replace(batch, **_row(batch, 0))  # one row, left-padded
    n_pad = int((short.mask == 0).sum())
    with pytest.raises(ValueError, match="key position 0 is padding; choose a real token"):
        qk_attribution(model, short, 1, 0, -1, 0)
    unpadded = qk_attribution(model, "it was tired.", 1, 0, -1, 1)
    padded = qk_attribution(model, short, 1, 0, -1, n_pad + 1)
    assert padded.score == pytest.approx(unpadded.score, rel=1e-4)
    tired = [
        p
        for p in range(len(as_prompt(model, SEED).tokens))
        if p not in align_twins(as_prompt(model, SEED), as_prompt(model, TWIN))
    ][0]
    with pytest.raises(ValueError, match="has no token covering the same characters in the twin"):
        qk_twin_difference(model, SEED, TWIN, 1, 0, _end(model, SEED), tired)
    with pytest.raises(ValueError, match="key difference needs two different keys"):
        qk_key_difference(model, SEED, 1, 0, 8, 2, 2)


def _row(tokens, row: int) -> dict:
    """One row of a padded batch as the fields of a one-row ``Tokens``."""
    return dict(
        ids=tokens.ids[row : row + 1],
        mask=tokens.mask[row : row + 1],
        offsets=tokens.offsets[row : row + 1],
        special=tokens.special[row : row + 1],
        texts=tokens.texts[row : row + 1],
    )


def test_a_cache_without_the_hooks_is_refused(model):
    prompt = as_prompt(model, SEED)
    _, cache = model.run_with_cache(prompt.ids, names_filter="hook_embed")
    with pytest.raises(KeyError, match="qk_attribution\\(layer=1\\) needs hooks that are not in this cache"):
        qk_attribution(model, SEED, 1, 0, 8, 2, cache=cache)
