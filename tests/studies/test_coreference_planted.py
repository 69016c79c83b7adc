"""The coreference study on a two-layer model with a hand-planted coreference head.

Layer 0 head 0 moves the switch word's "first"/"second" feature to every later position; layer 1 head 1 (the
planted head) turns that feature into a query that matches the positional key of the first or second
candidate and copies the candidate's identity to the unembedding. The study must rank that head first by
antecedent accuracy, and patching its output between twins must recover most of the question-prompt
logit difference. Two more planted heads, both biased to the first candidate, test the heads' switch
sensitivity: one whose attention moves with the switch word, one whose attention does not.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import tokenizers
import torch

from interp import HookedTransformer, TransformerConfig
from interp.analysis import holm, patch
from interp.tokens import Tokenizer
from studies.coreference import attention, causal
from studies.coreference.measure import RESOLUTION_QUERIES, measure_resolution
from studies.data import pairs as data_pairs
from studies.data.load import load_items, split_by_schema, twin_pairs
from studies.data.notes import Notes
from studies.data.twins import pair_up

WORDS = ["[UNK]", "[BOS]", "cat", "dog", "fox", "owl", "chased", "so", "tired", "wide", "it", "ran", "."]
WORDS += ["In", "this", "sentence", ",", '"', "refers", "to"]
CANDIDATES = ["cat", "dog", "fox", "owl"]
ONE, IS_SWITCH, SW_FIRST, SW_SECOND, P1, P2, F_FIRST, F_SECOND = range(8)
IDENTITY, OUT = 8, 12  # candidate identity dims 8..11, copied-out dims 12..15
PLANTED = (1, 1)


def tiny_tokenizer() -> Tokenizer:
    vocab = {w: i for i, w in enumerate(WORDS)}
    backend = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    return Tokenizer(backend, bos_id=vocab["[BOS]"], n_ctx=64, name="planted")


@torch.no_grad()
def planted_model() -> HookedTransformer:
    cfg = TransformerConfig(
        n_layers=2, d_model=32, n_heads=2, d_head=16, d_mlp=4, d_vocab=len(WORDS), n_ctx=64,
        norm="rmsnorm", positional="learned", attn_bias=False, mlp_bias=False, seed=0,
    )  # fmt: skip
    model = HookedTransformer(cfg)
    for param in model.parameters():
        if param.ndim > 1:
            param.zero_()
    w = {word: i for i, word in enumerate(WORDS)}
    embed = model.embed.W_E
    embed[:, ONE] = 1.0
    embed[w["tired"], [IS_SWITCH, SW_FIRST]] = 1.0
    embed[w["wide"], [IS_SWITCH, SW_SECOND]] = 1.0
    for c, word in enumerate(CANDIDATES):
        embed[w[word], IDENTITY + c] = 1.0
    model.pos_embed.W_pos[1, P1] = 1.0  # the first candidate sits at position 1 (after BOS)
    model.pos_embed.W_pos[3, P2] = 1.0  # the second at position 3
    a0, a1 = model.blocks[0].attn, model.blocks[1].attn
    a0.W_Q[0, ONE, 0] = 6.0  # every query looks for the switch word
    a0.W_K[0, IS_SWITCH, 0] = 6.0
    a0.W_V[0, SW_FIRST, 0] = a0.W_V[0, SW_SECOND, 1] = 1.0
    a0.W_O[0, 0, F_FIRST] = a0.W_O[0, 1, F_SECOND] = 1.0
    a1.W_Q[1, F_FIRST, 0] = a1.W_Q[1, F_SECOND, 1] = 6.0  # "first" looks for P1, "second" for P2
    a1.W_K[1, P1, 0] = a1.W_K[1, P2, 1] = 6.0
    for c in range(len(CANDIDATES)):
        a1.W_V[1, IDENTITY + c, c] = 1.0
        a1.W_O[1, c, OUT + c] = 1.0
        model.unembed.W_U[OUT + c, w[CANDIDATES[c]]] = 10.0
    model.tokenizer = tiny_tokenizer()
    return model.eval()


PAIRS = [("cat", "dog"), ("dog", "cat"), ("fox", "owl"), ("owl", "fox"), ("cat", "fox"), ("owl", "dog")]
PAIRS += [("dog", "fox"), ("fox", "cat"), ("cat", "owl"), ("owl", "cat")]
EVERY_PAIR = PAIRS + [("dog", "owl"), ("fox", "dog")]  # all 12 orders of two of the four candidates


def write_items(path, pairs=PAIRS) -> list:
    lines = []
    for n, (c0, c1) in enumerate(pairs):
        for suffix, switch, answer in (("a", "tired", 0), ("b", "wide", 1)):
            sentence = f"{c0} chased {c1} so {switch} it ran."
            lines.append(
                {
                    "id": f"p-{n:02d}{suffix}",
                    "schema_id": f"p-{n:02d}",
                    "twin_id": f"p-{n:02d}{'b' if suffix == 'a' else 'a'}",
                    "sentence": sentence,
                    "pronoun": "it",
                    "pronoun_char_offset": sentence.index(" it ") + 1,
                    "candidates": [c0, c1],
                    "candidate_char_offsets": [0, len(c0) + 8],
                    "answer": answer,
                    "switch_word": switch,
                    "switch_char_offset": sentence.index(switch),
                }  # fmt: skip
            )
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return load_items(path)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    torch.manual_seed(0)
    model = planted_model()
    items = write_items(tmp_path_factory.mktemp("planted") / "planted.jsonl")
    return model, items, measure_resolution(model, items, batch_size=8, progress=False)


def test_planted_model_answers_the_question(setup):
    _, _, measured = setup
    assert all(m.record["correct"]["question"] for m in measured)


def test_attention_analysis_ranks_the_planted_head_first(setup):
    _, items, measured = setup
    records = [m.record for m in measured]
    right, margin = attention.picks(measured, [r["answer"] for r in records])
    acc = attention.head_accuracy(right)  # [query, by, layer, head]
    pronoun = RESOLUTION_QUERIES.index("pronoun")
    assert acc[pronoun, 0][PLANTED] == 1.0
    assert acc[pronoun, 1][PLANTED] == 1.0
    others = np.delete(acc[pronoun, 0].flatten(), PLANTED[0] * 2 + PLANTED[1])
    assert others.max() < 0.5
    first, _ = split_by_schema(items, 0.5, 0)
    select = np.isin([x.id for x in items], [x.id for x in first])
    table = attention.select_and_test(right, margin, select, RESOLUTION_QUERIES, top_k=2)
    top = table[(table["query"] == "pronoun") & (table["rank"] == 1)]
    assert (top["layer"] == PLANTED[0]).all() and (top["head"] == PLANTED[1]).all()
    assert (top["test_accuracy"] == 1.0).all()


def test_norm_mass_matches_span_attention(setup):
    from interp.analysis import span_attention
    from studies.coreference.measure import _mask, cache_names, head_masses
    from studies.data.forward import run_batches
    from studies.data.spans import resolution_spans

    model, items, measured = setup
    batch = next(run_batches(model, [resolution_spans(i, True)[0] for i in items[:4]], batch_size=4,
                             names_filter=cache_names(model)))  # fmt: skip
    spans = [resolution_spans(i, True)[1] for i in items[:4]]
    q = _mask(batch, [s["pronoun"] for s in spans], True)
    k = _mask(batch, [s["candidate 0"] for s in spans], False)
    mass = head_masses(model, batch, q[None], k[None])  # [batch, 1, 1, 2, layer, head]
    for bi, by in enumerate(("weight", "norm")):
        expected = span_attention(model, batch.cache, q, k, by=by, reduce="none")
        torch.testing.assert_close(torch.from_numpy(mass[:, 0, 0, bi]), expected.float())
    np.testing.assert_allclose(mass[:, 0, 0], np.stack([m.mass[0, 0] for m in measured[:4]]), rtol=1e-5)


def test_patching_the_planted_head_recovers_the_metric(setup):
    model, items, _ = setup
    pairs, kept = data_pairs.make_pairs(model, twin_pairs(items), 4)
    assert kept == len(twin_pairs(items)) and len(pairs) == 4
    swept = causal.sweep(model, pairs, data_pairs.ROLES_RESOLUTION, top_heads=3)
    recovery, verified, denominator = swept["z"], swept["z_exact"], swept["z_denominator"]
    assert denominator > 0
    planted = verified[(verified["layer"] == PLANTED[0]) & (verified["head"] == PLANTED[1])]
    assert len(planted) == 1 and planted["patched"].iloc[0] > 0.8
    # no other head of layer 1 carries anything
    assert abs(recovery[1, 0]) < 1e-3


def test_patching_by_position_finds_the_switch_word(setup):
    model, items, _ = setup
    pairs, _ = data_pairs.make_pairs(model, twin_pairs(items), 2)
    swept = causal.sweep(model, pairs, data_pairs.ROLES_RESOLUTION, top_positions=2)
    recovery, exact = swept["resid"], swept["resid_exact"]
    assert set(exact["role"]) <= set(data_pairs.ROLES_RESOLUTION) and len(exact) == 2 * len(pairs)
    # attribution is a linear estimate and this model's softmax is saturated, so check exactly that the
    # whole twin difference sits at the switch word entering layer 0
    pair = pairs[0]
    frame = patch(model, pair.clean, pair.corrupt, "blocks.0.hook_resid_pre", pair.metric,
                  positions=[pair.roles.index("switch")])  # fmt: skip
    assert frame["value"].iloc[0] == pytest.approx(1.0, abs=1e-4)
    before = [data_pairs.ROLES_RESOLUTION.index(r) for r in ("candidate 0", "candidate 1")]
    assert np.abs(recovery[:, before]).max() == 0.0  # identical in both twins: nothing to patch


MOVED, UNMOVED = (1, 0), (0, 1)


@torch.no_grad()
def biased_heads_model() -> HookedTransformer:
    """The planted model with its two free heads planted too, both biased to the first candidate (key P1 only):
    L1H0 reads the switch word's "first" feature on top of a constant query, so from the pronoun it gives the
    first candidate more mass after "tired" than after "wide" (and more than the second candidate in both
    twins); L0H1 reads only the constant, before any layer has moved the switch word, so its pattern is the
    same in both twins."""
    model = planted_model()
    moved, unmoved = model.blocks[MOVED[0]].attn, model.blocks[UNMOVED[0]].attn
    moved.W_Q[MOVED[1], ONE, 0] = moved.W_Q[MOVED[1], F_FIRST, 0] = 0.5  # small: softmax far from saturated
    moved.W_K[MOVED[1], P1, 0] = 1.0
    unmoved.W_Q[UNMOVED[1], ONE, 0] = 0.5
    unmoved.W_K[UNMOVED[1], P1, 0] = 1.0
    return model


def test_a_biased_head_is_found_sensitive_only_when_its_attention_moves_with_the_switch_word(tmp_path):
    # 12 schemas: heads chosen on 2, tested on the 10 others (sign flips over 10 pairs reach p = 2/1024)
    items = write_items(tmp_path / "every.jsonl", EVERY_PAIR)
    measured = measure_resolution(biased_heads_model(), items, batch_size=8, progress=False)
    pronoun = RESOLUTION_QUERIES.index("pronoun")
    right, margin = attention.picks(measured, [m.record["answer"] for m in measured])
    right, margin = right[:, [pronoun]], margin[:, [pronoun]]
    first, _ = split_by_schema(items, 2 / 12, 0)
    select = np.isin([x.id for x in items], [x.id for x in first])
    pairs = pair_up(items, Notes()).comparable
    held_out = [(a, b) for a, b in pairs if not select[a]]
    assert len(pairs) == 12 and len(held_out) == 10
    table = attention.select_and_test(
        right, margin, select, ["pronoun"], top_k=4, groups=[x.schema_id for x in items], pairs=pairs
    )
    rows = table.set_index(["by", "layer", "head"])

    # the naive sum over each held-out pair: (first - second | "tired") - (first - second | "wide")
    mass = np.stack([m.mass[pronoun, :, 0] for m in measured])  # [item, candidate, layer, head], by weight
    toward_first = mass[:, 0] - mass[:, 1]
    assert all(items[a].answer == 0 and items[b].answer == 1 for a, b in held_out)
    expected = np.mean([toward_first[a] - toward_first[b] for a, b in held_out], axis=0)  # [layer, head]
    for head in (PLANTED, MOVED, UNMOVED):
        assert rows.loc[("weight", *head), "sens"] == pytest.approx(expected[head], abs=1e-6)
        assert rows.loc[("weight", *head), "sens_pairs"] == 10

    # both biased heads prefer the first candidate in every twin: right once per pair, 0.5 by accuracy
    for head in (MOVED, UNMOVED):
        assert (toward_first[:, head[0], head[1]] > 0.05).all()
        assert rows.loc[("weight", *head), "test_accuracy"] == 0.5
        assert not rows.loc[("weight", *head), "above_chance"]
    moved = rows.loc[("weight", *MOVED)]
    assert moved["sens"] > 0.1 and moved["sens_low"] > 0 and moved["sensitive"]
    assert moved["sens_p"] == pytest.approx(2 / 1024)  # every pair moves the same way: the exact minimum
    unmoved = rows.loc[("weight", *UNMOVED)]
    assert unmoved["sens"] == pytest.approx(0.0, abs=1e-6) and not unmoved["sensitive"]
    planted = rows.loc[("weight", *PLANTED)]
    assert planted["test_accuracy"] == 1.0 and planted["sensitive"] and planted["sens"] > moved["sens"]
    assert table["sens_p_holm"].tolist() == pytest.approx(holm(table["sens_p"].tolist()))
