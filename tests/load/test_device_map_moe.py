"""A mixture-of-experts model placed by a device map: whole blocks, experts included, compute what it computes.

A tiny Qwen2-MoE (routed experts, a gated shared expert, one dense layer) is saved as a folder and loaded
whole and with some blocks offloaded to disk; everything is compared exactly, as in ``test_device_map.py``.
"""

from __future__ import annotations

import pytest
import torch

import interp
from tests.load.builders import byte_level_bpe, save_folder
from tests.load.families import build

pytest.importorskip("accelerate")

MIXED = {
    "embed": "cpu",
    "blocks.0": "disk",
    "blocks.1": "cpu",
    "blocks.2": "disk",
    "blocks.3": "cpu",
    "ln_final": "cpu",
    "unembed": "cpu",
}
TOKENS = torch.tensor([[0, 5, 17, 42, 99, 7, 3, 250], [0, 8, 8, 120, 64, 2, 31, 77]])


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    tokenizer = byte_level_bpe()
    model = build("qwen2-moe", tokenizer.get_vocab_size(), num_hidden_layers=4, mlp_only_layers=[1])
    return save_folder(model, tokenizer, tmp_path_factory.mktemp("qwen2-moe"))


@pytest.fixture(scope="module")
def whole(folder):
    return interp.load(folder)


@pytest.fixture(scope="module")
def dispatched(folder, tmp_path_factory):
    return interp.load(folder, device_map=MIXED, offload_folder=tmp_path_factory.mktemp("offload"))


def test_experts_live_with_their_block(whole, dispatched):
    assert whole.cfg.mlp_types == ("moe", "dense", "moe", "moe")
    assert dispatched.hf_device_map == MIXED
    offloaded, resident = dispatched.blocks[2].mlp, dispatched.blocks[3].mlp
    assert offloaded.W_gate.device.type == "meta" and offloaded.shared_expert.W_in.device.type == "meta"
    assert resident.W_gate.device.type == "cpu" and resident.W_router.device.type == "cpu"


def test_logits_and_every_activation_are_exactly_the_whole_models(whole, dispatched):
    with torch.no_grad():
        expected, expected_cache = whole.run_with_cache(TOKENS)
        logits, cache = dispatched.run_with_cache(TOKENS, device="cpu")
        plain = dispatched(TOKENS)  # no expert hooked: the experts in grouped products
        assert torch.equal(plain, whole(TOKENS))
    assert torch.equal(logits, expected)
    assert list(cache) == list(expected_cache) == whole.hook_names()
    assert any(".experts." in name for name in cache)
    for name in expected_cache:
        assert torch.equal(cache[name], expected_cache[name]), name


def test_greedy_generation_gives_the_same_tokens(whole, dispatched):
    expected = whole.generate(TOKENS[:, :4], 10)
    assert torch.equal(dispatched.generate(TOKENS[:, :4], 10).tokens, expected.tokens)


def test_auto_map_keeps_blocks_and_their_experts_whole(folder, whole, tmp_path):
    block = max(sum(p.numel() * 4 for p in b.parameters()) for b in whole.blocks)
    embed = sum(p.numel() * 4 for p in whole.embed.parameters())
    model = interp.load(
        folder, device_map="auto", max_memory={"cpu": embed + 2 * block}, offload_folder=tmp_path
    )
    placed = model.hf_device_map
    assert not any(name.startswith("blocks.") and name.count(".") > 1 for name in placed)  # no block split
    assert "disk" in placed.values()
    with torch.no_grad():
        assert torch.equal(model(TOKENS), whole(TOKENS))
