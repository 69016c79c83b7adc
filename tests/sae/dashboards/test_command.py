"""``interp dashboards`` and ``interp attribute --dashboards`` end to end on a tiny model, each mistake refused
in one line before the pass, and (slow) on the packaged SmolLM2 with a small random transcoder set."""

from __future__ import annotations

import json

import pytest
import torch

import interp
from interp.cli import main
from interp.feature_id import FeatureId
from interp.sae import save_transcoders
from interp.store import cache_activations
from tests.circuits.transcoders import tiny_transcoders
from tests.sae.dashboards import helpers
from tests.sae.models import random_sae

LLAMA = str(helpers.LLAMA)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A transcoders folder, a data file, stores (all positions, the last only, the wrong hook), an SAE that
    reads the wrong width, and transcoders of another width."""
    model = helpers.model()
    root = tmp_path_factory.mktemp("cli")
    tc = tiny_transcoders(model.cfg, d_transcoder=12, seed=3)
    save_transcoders(tc, root / "tc")
    dead = tiny_transcoders(model.cfg, d_transcoder=12, seed=3)
    with torch.no_grad():
        dead.b_enc[0, :3] = -100.0  # three features that never fire
    save_transcoders(dead, root / "dead")
    other = interp.HookedTransformer(
        interp.TransformerConfig(n_layers=2, d_model=16, n_heads=2, d_vocab=64, n_ctx=32)
    )
    save_transcoders(tiny_transcoders(other.cfg, d_transcoder=12, seed=3), root / "narrow")
    sae = random_sae("blocks.1.hook_resid_post", d_in=16)
    interp.sae.save(sae, root / "sae16")
    texts = helpers.texts(30)
    (root / "texts.txt").write_text("\n".join(texts) + "\n")
    (root / "nul.txt").write_bytes(("\n".join(texts[:3]) + "\n").encode() + b"w1 w2\x00w3\n")
    hooks = [tc.input_hook(layer) for layer in tc.layers]
    cache_activations(model, texts, hooks, root / "store", progress=False)
    cache_activations(model, texts, hooks, root / "last", positions="last", progress=False)
    cache_activations(model, texts, "blocks.0.hook_resid_post", root / "wrong", progress=False)
    return root


def test_writes_the_dashboards_then_a_graph_links_them(files, tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["dashboards", LLAMA, "--dictionary", str(files / "tc"), "--data", str(files / "texts.txt"),
            "--out", str(out), "--quiet", "--sample", "12"]  # fmt: skip
    assert main(argv) == 0
    said = capsys.readouterr().out
    root = out / "features" / "tc"
    index = json.loads((root / "index.json").read_text())
    assert f"dashboards of 24 features over {index['n_tokens']:,} tokens" in said
    assert {(r["layer"], r["feature"]) for r in index["features"]} == {
        (la, f) for la in (0, 1) for f in range(12)
    }
    for r in index["features"]:
        record = json.loads((root / f"{r['featureIndex']}.json").read_text())
        assert (
            record["index"] == FeatureId(r["layer"], r["feature"]).index and record["transcoder_id"] == "tc"
        )
    assert (root / "index.html").is_file()
    assert main(argv) == 0 and "already complete" in capsys.readouterr().out
    rc = main(["attribute", LLAMA, "--transcoders", str(files / "tc"), "--prompt", "w17 w33 w5 w48", "--out",
               str(out), "--dashboards", str(out), "--slug", "cats", "--quiet"])  # fmt: skip
    assert rc == 0
    doc = json.loads((out / "cats.json").read_text())
    assert doc["metadata"]["scan"] == "./data/features/tc" and doc["metadata"]["slug"] == "cats"
    page = (out / "index.html").read_text()
    assert '"dashboards": "features/tc"' in page


def test_features_that_never_fired_are_counted_and_the_line_says_what_to_do(files, tmp_path, capsys):
    argv = ["dashboards", LLAMA, "--dictionary", str(files / "dead"), "--data", str(files / "texts.txt"),
            "--out", str(tmp_path), "--quiet"]  # fmt: skip
    assert main(argv) == 0
    index = json.loads((tmp_path / "features" / "dead" / "index.json").read_text())
    assert [(r["layer"], r["feature"]) for r in index["features"] if r["density"] == 0] == [
        (0, 0),
        (0, 1),
        (0, 2),
    ]
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == (
        f"3 of 24 features never fired in these {index['n_tokens']:,} tokens: their dashboards hold no example, so "
        "there is nothing to explain; they are dead, or too rare for this much text (a larger --data, or --tokens, "
        "shows which)"
    )


def test_a_store_and_chosen_features(files, tmp_path):
    out = tmp_path / "run"
    argv = ["dashboards", LLAMA, "--dictionary", str(files / "tc"), "--store", str(files / "store"),
            "--out", str(out), "--quiet", "--features", "1:3,0:7", "--tokens", "50", "--scan", "mine"]  # fmt: skip
    assert main(argv) == 0
    index = json.loads((out / "features" / "mine" / "index.json").read_text())
    assert [(r["layer"], r["feature"]) for r in index["features"]] == [(0, 7), (1, 3)]
    assert index["n_tokens"] == 50  # a store made with this tokenizer has no special token first


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"--dictionary": "missing"}, "--dictionary .*missing does not exist"),
        ({"--data": "missing.txt"}, "missing.txt does not exist"),
        (
            {"--data": "nul.txt"},
            r"nul.txt holds a NUL byte \(line 4, byte \d+\): it is a binary file, not text",
        ),
        ({"--store": "last"}, "keeps positions 'last'; dashboards show each example in its context"),
        ({"--features": "3-1"}, "'3-1' is not LAYER:FEATURE"),
        ({"--scan": "../up"}, "--scan '../up' is not a usable name"),
        (
            {"--dictionary": "narrow"},
            "the TranscoderSet has d_in=16 at 'blocks.0.ln2.hook_normalized', but that hook of this model has "
            "width 32",
        ),
        (
            {"--dictionary": "sae16"},
            "the SAESet has d_in=16 at 'blocks.1.hook_resid_post', but that hook of this model has width 32",
        ),
        (
            {"--store": "wrong"},
            r"has no rows of \['blocks.0.ln2.hook_normalized', 'blocks.1.ln2.hook_normalized'\]",
        ),
        ({"--features": "5:1"}, "no features at layer 5; its layers are \\[0, 1\\]"),
        ({"--features": "0:12"}, "feature 12 is outside \\[0, 12\\)"),
    ],
)
def test_a_mistake_is_one_line_and_writes_nothing(files, tmp_path, capsys, change, message):
    import re

    args = {
        "--dictionary": str(files / "tc"),
        "--data": str(files / "texts.txt"),
        "--out": str(tmp_path / "o"),
    }
    for key, value in change.items():
        if key == "--store":
            args.pop("--data")
        args[key] = str(files / value) if key in ("--dictionary", "--store", "--data") else value
    assert main(["dashboards", LLAMA, "--quiet", *(x for kv in args.items() for x in kv)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(message, err), err
    assert not (tmp_path / "o" / "features").exists()


def test_another_run_in_the_same_folder_is_refused_in_one_line(files, tmp_path, capsys):
    base = ["dashboards", LLAMA, "--dictionary", str(files / "tc"), "--data", str(files / "texts.txt"),
            "--out", str(tmp_path), "--quiet"]  # fmt: skip
    assert main(base) == 0
    written = sorted(p.name for p in (tmp_path / "features" / "tc").iterdir())
    capsys.readouterr()
    assert main([*base, "--top", "3"]) == 2
    err = capsys.readouterr().err.strip()
    root = tmp_path / "features" / "tc"
    assert len(err.splitlines()) == 1 and err.endswith(
        f"{root} holds another run's dashboards (settings.top was 10, now 3); pass another --scan or --out, or "
        f"delete {root} to start over"
    )
    assert sorted(p.name for p in (tmp_path / "features" / "tc").iterdir()) == written


@pytest.mark.slow
def test_smollm2_with_a_small_random_transcoder_set(tmp_path, capsys):
    """The packaged SmolLM2-135M (30 layers) with random transcoders of 32 features per layer."""
    from interp.sae import TranscoderSet

    model = interp.load("smollm2-135m")
    cfg = model.cfg
    g = torch.Generator().manual_seed(0)
    n, d, f = cfg.n_layers, cfg.d_model, 32
    tc = TranscoderSet(torch.randn(n, f, d, generator=g) / d**0.5, torch.randn(n, f, d, generator=g) / f**0.5,
                       torch.full((n, f), -1.5), torch.zeros(n, d))  # fmt: skip
    save_transcoders(tc, tmp_path / "tc")
    texts = ["The cat sat on the mat.", "Paris is the capital of France.", "One, two, three, four, five."] * 4
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    out = tmp_path / "run"
    assert main(["dashboards", "smollm2-135m", "--dictionary", str(tmp_path / "tc"), "--data",
                 str(tmp_path / "texts.txt"), "--out", str(out), "--quiet"]) == 0  # fmt: skip
    index = json.loads((out / "features" / "tc" / "index.json").read_text())
    assert len(index["features"]) == n * f
    # Every feature's density and the fired ones' largest activation against each text run alone here, every
    # token encoded (the special token left out); a token whose activation sits within float32 rounding of 0 in
    # one run may fall on the other side in the other, so a count may differ by one.
    ids, _, active = helpers.naive(model, tc, texts[:3])  # the texts repeat: three are all the distinct ones
    n_tokens = 4 * sum(len(row) - 1 for row in ids)
    assert index["n_tokens"] == n_tokens
    fired = 0
    for r in index["features"]:
        values = [v for v, _, _ in active[(r["layer"], r["feature"])]]
        assert abs(r["density"] * n_tokens - 4 * len(values)) <= 4, r
        if values and r["density"] > 0:
            fired += 1
            record = json.loads((out / "features" / "tc" / f"{r['featureIndex']}.json").read_text())
            assert record["act_max"] == pytest.approx(max(values), rel=1e-4, abs=1e-4), r
            top = record["examples_quantiles"][0]["examples"][0]
            assert "".join(top["tokens"]) in " ".join(texts) and record["top_logits"]
    assert fired >= 10
    assert main(["attribute", "smollm2-135m", "--transcoders", str(tmp_path / "tc"), "--prompt", "The cat sat on the",
                 "--out", str(out), "--dashboards", str(out), "--max-logits", "2", "--quiet"]) == 0  # fmt: skip
    assert json.loads((out / "graph.json").read_text())["metadata"]["scan"] == "./data/features/tc"


def test_the_placement_and_the_store_are_checked_once_each(files, tmp_path, monkeypatch):
    import interp.preflight as preflight

    calls = {"check_placement": 0, "check_store": 0}
    for name in calls:
        real = getattr(preflight, name)

        def counted(*args, _real=real, _name=name, **kwargs):
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(preflight, name, counted)
    argv = ["dashboards", LLAMA, "--dictionary", str(files / "tc"), "--store", str(files / "store"),
            "--out", str(tmp_path), "--quiet", "--tokens", "40"]  # fmt: skip
    assert main(argv) == 0
    assert calls == {
        "check_placement": 1,
        "check_store": 2,
    }  # the folder before loading, hooks and model after
