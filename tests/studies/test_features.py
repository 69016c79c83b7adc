"""The features study on a tiny model: a planted feature is found, separates held-out twins, matters causally
more than random features of its density, and is the top attribution; the whole pipeline writes a report."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer as Backend
from tokenizers import models, pre_tokenizers

from interp import HookedTransformer, TransformerConfig
from interp.analysis import Batch
from interp.sae import SAE, SAEConfig
from interp.tokens import Tokenizer
from studies.data.corpus import Corpus, kjv_paragraphs, passages
from studies.data.load import AgreementItem, twin_pairs
from studies.data.pairs import make_pairs
from studies.features import measure

FEMALE = ["alice", "emma", "mary", "anna", "lucy", "rose", "jane", "kate"]
MALE = ["bob", "jack", "tom", "paul", "john", "mark", "luke", "sam"]
WORDS = FEMALE + MALE + "she he is here said that came home today and went".split()
HOOK = "blocks.1.hook_resid_post"


def tiny_model() -> HookedTransformer:
    vocab = {"<pad>": 0, "<bos>": 1, "<unk>": 2} | {w: i + 3 for i, w in enumerate(WORDS)}
    backend = Backend(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    cfg = TransformerConfig(
        n_layers=2, d_model=32, n_heads=2, d_vocab=len(vocab), n_ctx=32, seed=3, name="tiny"
    )
    model = HookedTransformer(cfg).eval()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("W_E") or ".W_" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
        gender = torch.randn(32, generator=g)
        gender = 3 * gender / gender.norm()  # the planted direction: + for female names, - for male names
        for w in FEMALE:
            model.embed.W_E[vocab[w]] += gender
        for w in MALE:
            model.embed.W_E[vocab[w]] -= gender
    model.tokenizer = Tokenizer(
        backend, bos_id=1, pad_id=0, padding_side="right", n_ctx=32, name="tiny-gender"
    )
    return model


def twins() -> list[AgreementItem]:
    items = []
    for i, (f, m) in enumerate(zip(FEMALE, MALE, strict=True)):
        for j, template in enumerate(("{} is here and", "{} came home today and", "{} said that")):
            sid = f"s{i}{j}"
            for name, answer, suffix in ((f, 0, "a"), (m, 1, "b")):
                items.append(
                    AgreementItem(
                        id=f"{sid}{suffix}", schema_id=sid, twin_id=f"{sid}{'b' if suffix == 'a' else 'a'}",
                        prompt=template.format(name), targets=(" she", " he"), answer=answer,
                        antecedent=name, antecedent_char_offset=0, distractor=None, distractor_char_offset=None,
                    )
                )  # fmt: skip
    return items


def planted_sae(model, pairs) -> tuple[SAE, torch.Tensor]:
    """A ReLU SAE at HOOK whose feature 0 reads the twins' difference at the final position (fires for the
    female twin only) and writes it back; the other features are random with negative biases."""
    name = HOOK
    streams = []
    for pair, fem in pairs:
        x = model.run_with_cache(pair.clean, names_filter=name)[1][name][:, -1]
        streams.append((x[fem], x[1 - fem]))
    diff = torch.stack([a - b for a, b in streams]).mean(0)
    u = diff / diff.norm()
    mid = torch.stack([(a + b) / 2 for a, b in streams]).mean(0)
    sae = SAE(
        SAEConfig(d_in=32, d_sae=24, architecture="standard", hook_name=name, apply_b_dec_to_input=False)
    )
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        sae.W_enc.copy_(torch.randn(32, 24, generator=g) * 0.2)
        sae.b_enc.copy_(-torch.rand(24, generator=g))
        sae.W_dec.copy_(torch.randn(24, 32, generator=g) * 0.1)
        sae.W_enc[:, 0] = u
        sae.b_enc[0] = -float(mid @ u)
        sae.W_dec[0] = u
    return sae, u


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    model = tiny_model()
    items = twins()
    by_id = {x.id: x for x in items}
    pairs, _ = make_pairs(model, twin_pairs(items), 100)
    pairs = measure.gender_pairs(pairs, by_id)
    return model, items, pairs


def test_gender_pairs_and_their_female_rows(setup):
    model, items, pairs = setup
    assert len(pairs) == 24
    for pair, fem in pairs:
        assert pair.ids[fem].endswith("a")  # the female twin


@torch.no_grad()
def test_the_planted_feature_separates_held_out_twins_and_matters_causally(setup):
    model, _, pairs = setup
    sae, u = planted_sae(model, pairs)
    acts = measure.twin_activations(model, sae, pairs)
    select = np.arange(len(pairs)) % 2 == 0
    sep = measure.separating_features(acts, select, top=3, seed=0)
    best = sep.iloc[0]
    assert int(best["feature"]) == 0 and best["direction"] == "feminine"
    assert best["sign_agreement"] == 1.0 and best["mean_test_ci_low"] > 0

    density = measure.densities(sae, torch.randn(2000, 32))
    draws = measure.matched_random([0], density, 5, seed=1)
    assert all(0 not in d for d in draws) and len(draws) == 5
    test_pairs = [p for p, s in zip(pairs, select, strict=True) if not s]
    effects = measure.ablation_effects(model, sae, test_pairs, [[0], *draws])
    # Zeroing the planted feature removes exactly its write at the final position: check one pair by hand.
    pair, fem = test_pairs[0]
    with model.saes([sae], use_error_term=True):
        acts = model.run_with_cache(pair.clean, names_filter=f"{HOOK}.hook_sae_acts_post")[1][
            f"{HOOK}.hook_sae_acts_post"
        ]
    x = model.run_with_cache(pair.clean, names_filter=HOOK)[1][HOOK].clone()
    x[:, -1] -= acts[:, -1, :1] * sae.W_dec[0]
    batch = Batch(pair.clean)
    by_hand = float(
        pair.metric(model.run_with_hooks(pair.clean, fwd_hooks=[(HOOK, lambda a, h: x)]), batch)
        .mean()
        .detach()
    )
    torch.testing.assert_close(
        effects[0, 0], by_hand - float(pair.metric(model(pair.clean), batch).mean()), atol=1e-5, rtol=1e-5
    )
    assert abs(effects[:, 0].mean()) > abs(effects[:, 1:].mean(0)).max()

    table, gap = measure.attribution_check(model, sae, test_pairs, top=3)
    rows = table.set_index("node")
    assert table.iloc[0]["node"] == "feature 0"
    assert abs(rows.loc["feature 0", "patched"] - rows.loc["feature 0", "attribution"]) < 0.5 * abs(
        rows.loc["feature 0", "attribution"]
    )
    total = rows.loc["error", "attribution"] + rows.loc["all features", "attribution"]
    assert np.isfinite(total) and gap != 0


@pytest.mark.slow
def test_the_pipeline_trains_finds_and_reports(setup, tmp_path):
    from interp.report import Report
    from studies.features.report import write_report
    from studies.features.study import FeaturesConfig, run_study

    model, items, _ = setup
    rng = np.random.default_rng(0)
    texts = []
    for _ in range(400):
        name = rng.choice(FEMALE + MALE)
        pron = "she" if name in FEMALE else "he"
        texts.append(f"{name} came home today and {pron} said that {rng.choice(FEMALE + MALE)} is here")
    corpus = Corpus(texts, "test sentences", None, 0, len(texts))
    config = FeaturesConfig(model="tiny", layers=(0, 1), texts=400, context=16, d_sae=64, k=4, epochs=3,
                            train_batch_size=256, pairs=24, top=3, random_draws=4)  # fmt: skip
    results = run_study(model, config, corpus, tmp_path / "work", False, items=items)
    last = results["layers"][-1]
    assert last["hook"] == HOOK and results["n_pairs"] == 24
    best = last["separating"].iloc[0]
    # The trained dictionary finds the planted gender: on the held-out pairs the best feature's twin difference
    # has the selected sign in every pair where it fires, and its mean's interval lies on that side of 0. (Its
    # sign agreement counts silent pairs against it, 8 of 12 here, which a random feature reaches one time in 5.)
    sign = 1 if best["direction"] == "feminine" else -1
    assert round(best["sign_agreement"] * best["n_test"]) == best["active_test_pairs"] >= 6, best
    assert min(sign * best["mean_test_ci_low"], sign * best["mean_test_ci_high"]) > 0, best
    report = Report(tmp_path / "report", "Sparse features of pronoun agreement", seed=0, config=config)
    write_report(report, model, config, corpus, results, 1.0)
    data = json.loads((tmp_path / "report" / "results.json").read_text())
    assert set(data["results"]["layers"]) == {"blocks.0.hook_resid_post", HOOK}
    assert "L1 explained variance" in data["headline"] and data["headline"]["L1 explained variance"]["ci"]
    page = (tmp_path / "report" / "index.html").read_text()
    assert "sae-feature" in page and "<mark" in page


def test_kjv_passages_from_the_file_format(tmp_path):
    file = tmp_path / "bible.py"
    body = (
        "In the beginning [was] the word. And the word was good; and it was so.\nSecond line here. Another.\n"
    )
    file.write_text('x = f(\n    1,\n    """\n' + body + '""",\n)\n')
    paragraphs = kjv_paragraphs(file)
    assert paragraphs[0].startswith("In the beginning was the word.") and len(paragraphs) == 2
    chosen = passages(paragraphs, 3, seed=0, max_chars=40)
    assert len(chosen) == 3 and all(len(p) <= 40 or "." not in p[:-1] for p in chosen)
    assert passages(paragraphs, 3, seed=0, max_chars=40) == chosen
