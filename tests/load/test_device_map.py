"""A model placed by a device map (blocks on the CPU, some offloaded to disk) computes what the whole model does.

Everything is compared exactly (``torch.equal``): dispatching moves tensors, it must never change a number.
"""

from __future__ import annotations

import pytest
import torch

import interp
from interp.analysis.attribution_patching import attribution_patch
from interp.analysis.patching import patch
from interp.circuits import eap, logit_difference
from interp.sae import SAE, SAEConfig
from tests.circuits.models import tiny_pairs
from tests.load.builders import byte_level_bpe, save_folder
from tests.load.families import tiny_llama
from tests.tolerance import assert_within, float32_rounding

pytest.importorskip("accelerate")

N_LAYERS = 4
MIXED = {
    "embed": "cpu",
    "blocks.0": "cpu",
    "blocks.1": "disk",
    "blocks.2": "cpu",
    "blocks.3": "disk",
    "ln_final": "disk",
    "unembed": "cpu",
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    model = tiny_llama(300, num_hidden_layers=N_LAYERS)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0)  # larger than transformers draws them, so any difference shows in the logits
    return save_folder(model, byte_level_bpe(), tmp_path_factory.mktemp("llama"))


@pytest.fixture(scope="module")
def tied_folder(tmp_path_factory):
    model = tiny_llama(300, num_hidden_layers=N_LAYERS, tie_word_embeddings=True)
    return save_folder(model, byte_level_bpe(), tmp_path_factory.mktemp("tied"))


@pytest.fixture(scope="module")
def whole(folder):
    return interp.load(folder)


@pytest.fixture(scope="module")
def dispatched(folder, tmp_path_factory):
    return interp.load(folder, device_map=MIXED, offload_folder=tmp_path_factory.mktemp("offload"))


TOKENS = torch.tensor([[0, 5, 17, 42, 99, 7, 3, 250], [0, 8, 8, 120, 64, 2, 31, 77]])
CORRUPT = torch.tensor([[0, 6, 17, 40, 99, 7, 4, 250], [0, 9, 8, 121, 64, 2, 30, 77]])


def test_blocks_are_where_the_map_puts_them(dispatched):
    assert dispatched.hf_device_map == MIXED
    assert dispatched.blocks[1].attn.W_Q.device.type == "meta"  # on disk: loaded only while the block runs
    assert dispatched.blocks[0].attn.W_Q.device.type == "cpu"
    assert dispatched.device == torch.device("cpu")


def test_logits_and_every_activation_are_exactly_the_whole_models(whole, dispatched):
    with torch.no_grad():
        expected, expected_cache = whole.run_with_cache(TOKENS)
        logits, cache = dispatched.run_with_cache(TOKENS, device="cpu")
    assert torch.equal(logits, expected)
    assert list(cache) == list(expected_cache) == whole.hook_names()
    for name in expected_cache:
        assert torch.equal(cache[name], expected_cache[name]), name
        assert cache[name].device == torch.device("cpu")


def test_patching_gives_the_same_table(whole, dispatched):
    def metric(logits: torch.Tensor, batch) -> torch.Tensor:
        return logits[:, -1, 5] - logits[:, -1, 6]

    hooks = "blocks.{layer}.hook_resid_pre"
    expected = patch(whole, TOKENS, CORRUPT, hooks, metric, positions=[1, 3, 6])
    got = patch(dispatched, TOKENS, CORRUPT, hooks, metric, positions=[1, 3, 6])
    assert expected["delta"].abs().max() > 0.01  # the patches do something
    assert got.equals(expected)


def test_attribution_patching_gives_the_same_gradients(whole, dispatched):
    """Backward passes run through blocks whose weights are loaded from disk for the forward only."""

    def metric(logits: torch.Tensor, batch) -> torch.Tensor:
        return logits[:, -1, 5] - logits[:, -1, 6]

    hooks = "blocks.{layer}.attn.hook_z"
    expected = attribution_patch(whole, TOKENS, CORRUPT, metric, hooks, by="head")
    got = attribution_patch(dispatched, TOKENS, CORRUPT, metric, hooks, by="head")
    assert expected["delta"].abs().max() > 1e-3
    assert got.equals(expected)


def test_edge_attribution_gives_the_same_scores(folder, whole, dispatched):
    """EAP splits every block's inputs per head while it runs: new hook points inside dispatched blocks.

    The scores agree to float32 rounding, not bit for bit: a resident model normalises the heads' shared stream
    once per position, while an offloaded norm, whose weights are real only inside its own call, runs per head
    (the same values; its backward pass sums in another order). The rounding is measured against the whole
    model in float64: the dispatched scores stay within twice the resident float32 scores' distance from it."""
    pairs = tiny_pairs(whole, n=2)
    expected = eap(whole, pairs, logit_difference).scores
    reference = eap(interp.load(folder, dtype=torch.float64), pairs, logit_difference).scores
    got = eap(dispatched, pairs, logit_difference).scores
    assert expected.abs().max() > 0.1
    rounding = float32_rounding(expected, reference)
    assert rounding < 1e-3 * float(reference.abs().max())  # float32 rounding, not a different computation
    assert_within(got, reference, 2 * rounding, "dispatched EAP scores against the float64 reference")


def test_a_hook_edit_acts_identically(whole, dispatched):
    direction = torch.randn(whole.cfg.d_model, generator=torch.Generator().manual_seed(0))

    def steer(x, hook):
        return x + 3.0 * direction

    hooks = [("blocks.1.hook_resid_post", steer), ("blocks.3.attn.hook_z", lambda z, hook: z * 0.5)]
    with torch.no_grad():
        expected = whole.run_with_hooks(TOKENS, fwd_hooks=hooks)
        got = dispatched.run_with_hooks(TOKENS, fwd_hooks=hooks)
        plain = whole(TOKENS)
    assert not torch.equal(expected, plain)
    assert torch.equal(got, expected)


def test_greedy_generation_with_the_kv_cache_gives_the_same_tokens(whole, dispatched):
    prompt = TOKENS[:, :4]
    expected = whole.generate(prompt, 12)
    got = dispatched.generate(prompt, 12)
    assert torch.equal(got.tokens, expected.tokens)
    assert got.tokens.shape[1] == 16


def test_sae_splicing_gives_the_same_features(whole, dispatched):
    sae = SAE(
        SAEConfig(
            d_in=whole.cfg.d_model, d_sae=96, hook_name="blocks.2.hook_resid_post", architecture="standard"
        )
    )
    with torch.no_grad():
        for p in sae.parameters():
            p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(3)) * 0.2)
    name = "blocks.2.hook_resid_post.hook_sae_acts_post"
    with torch.no_grad(), whole.saes(sae):
        expected, expected_cache = whole.run_with_cache(TOKENS, names_filter=name)
    with torch.no_grad(), dispatched.saes(sae):
        got, cache = dispatched.run_with_cache(TOKENS, names_filter=name)
    assert expected_cache[name].count_nonzero() > 0
    assert torch.equal(cache[name], expected_cache[name])
    assert torch.equal(got, expected)


def test_auto_map_keeps_blocks_whole_and_overflows_to_disk(folder, whole, tmp_path):
    block = sum(p.numel() * 4 for p in whole.blocks[0].parameters())
    embed = sum(p.numel() * 4 for p in whole.embed.parameters())
    budget = embed + 2 * block + block // 2  # the embedding, then room for two blocks and a half
    model = interp.load(folder, device_map="auto", max_memory={"cpu": budget}, offload_folder=tmp_path)
    placed = model.hf_device_map
    assert not any(name.startswith("blocks.") and name.count(".") > 1 for name in placed)  # no block split
    assert "disk" in placed.values() and placed["embed"] == "cpu"
    with torch.no_grad():
        assert torch.equal(model(TOKENS), whole(TOKENS))


def test_tied_embeddings_keep_the_unembedding_with_the_embedding(tied_folder, tmp_path):
    whole = interp.load(tied_folder)
    budget = sum(p.numel() * 4 for p in [*whole.embed.parameters(), *whole.blocks[0].parameters()])
    model = interp.load(tied_folder, device_map="auto", max_memory={"cpu": budget}, offload_folder=tmp_path)
    assert model.hf_device_map["unembed"] == model.hf_device_map["embed"] == "cpu"
    with torch.no_grad():
        assert torch.equal(model(TOKENS), whole(TOKENS))
    assert "disk" in model.hf_device_map.values()


def test_a_bfloat16_model_is_placed_the_same(folder, tmp_path):
    whole = interp.load(folder, dtype="bfloat16")
    model = interp.load(folder, dtype="bfloat16", device_map=MIXED, offload_folder=tmp_path)
    assert model.dtype == torch.bfloat16 and model.blocks[0].attn.W_Q.dtype == torch.bfloat16
    with torch.no_grad():
        assert torch.equal(model(TOKENS), whole(TOKENS))
