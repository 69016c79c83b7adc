"""Mixture-of-experts checkpoints the converters cannot express are refused in one line, before any forward.

An expert count or top k that contradicts itself, a router setting of another family (sigmoid scores, group
routing, scaled weights), a Qwen MoE sliding window, OLMoE's clipped projections, GPT-OSS's activation
settings, weights stored quantized (a folder's ``quantization_config`` other than GPT-OSS's MXFP4, a GGUF
expert tensor in a type the reader lacks), and DeepSeek V2/V3, whose multi-head
latent attention is named in the message, in folders and in GGUF files alike.
"""

from __future__ import annotations

import json

import gguf
import numpy as np
import pytest

from interp import TransformerConfig
from interp.load import CheckpointError, load_checkpoint
from tests.load.builders import byte_level_bpe, save_folder, write_llama_gguf
from tests.load.families import build, tiny_llama


@pytest.fixture(scope="module")
def bpe():
    return byte_level_bpe()


@pytest.fixture(scope="module")
def folders(tmp_path_factory, bpe):
    root = tmp_path_factory.mktemp("moe")
    return {
        name: save_folder(build(name, bpe.get_vocab_size()), bpe, root / name)
        for name in ("qwen2-moe", "qwen3-moe", "olmoe", "mixtral", "gpt-oss")
    }


def _with_config(folder, tmp_path, **changes):
    """A copy of ``folder`` whose config.json has ``changes``."""
    copy = tmp_path / folder.name
    copy.mkdir()
    for file in folder.iterdir():
        (copy / file.name).symlink_to(file)
    config = json.loads((folder / "config.json").read_text())
    (copy / "config.json").unlink()
    (copy / "config.json").write_text(json.dumps({**config, **changes}))
    return copy


@pytest.mark.parametrize(
    "name, changes, message",
    [
        ("qwen2-moe", dict(num_experts_per_tok=9), r"num_experts_per_tok=9 must be from 1 to num_experts=8"),
        (
            "mixtral",
            dict(num_experts_per_tok=0),
            r"num_experts_per_tok=0 must be from 1 to num_local_experts=4",
        ),
        ("olmoe", dict(num_experts=0), r"num_experts=0; a mixture-of-experts layer needs 1 or more"),
        ("qwen3-moe", dict(scoring_func="sigmoid"), r"scoring_func='sigmoid' is not supported"),
        ("qwen3-moe", dict(n_group=8, topk_group=4), r"n_group=8 is not supported \(group-limited routing"),
        ("qwen2-moe", dict(routed_scaling_factor=2.5), r"routed_scaling_factor=2.5 is not supported"),
        ("qwen2-moe", dict(norm_topk_prob="yes"), r"norm_topk_prob='yes' is not supported \(it is a flag\)"),
        ("qwen3-moe", dict(use_sliding_window=True), r"use_sliding_window=True is not supported"),
        ("qwen2-moe", dict(mlp_only_layers=[7]), r"mlp_only_layers=\[7\] must list layers from 0 to 2"),
        ("olmoe", dict(clip_qkv=8.0), r"clip_qkv=8.0 is not supported \(clamping"),
        ("gpt-oss", dict(swiglu_alpha=1.0), r"swiglu_alpha=1.0 is not supported \(the experts' gate is"),
        ("gpt-oss", dict(swiglu_limit=-7.0), r"swiglu_limit=-7.0; the experts' clamp must be a positive"),
        (
            "gpt-oss",
            dict(num_experts_per_tok=9),
            r"num_experts_per_tok=9 must be from 1 to num_local_experts=8",
        ),
        (
            "qwen3-moe",
            dict(quantization_config={"quant_method": "fp8", "weight_block_size": [128, 128]}),
            r"quant_method='fp8' is not supported \(the weights are stored quantized",
        ),
        (
            "qwen2-moe",
            dict(model_type="deepseek_v3"),
            r"'deepseek_v3' is not supported: DeepSeek V3 uses multi-head",
        ),
        (
            "qwen2-moe",
            dict(model_type="deepseek_v2"),
            r"'deepseek_v2' is not supported: DeepSeek V2 uses multi-head",
        ),
    ],
)
def test_folder_settings_that_cannot_be_expressed_are_refused(folders, tmp_path, name, changes, message):
    folder = _with_config(folders[name], tmp_path, **changes)
    with pytest.raises(CheckpointError, match=message) as err:
        load_checkpoint(folder)
    assert "\n" not in str(err.value)


def test_weights_that_contradict_the_expert_count_name_the_tensor(folders, tmp_path):
    folder = _with_config(folders["olmoe"], tmp_path, num_experts=16)
    message = r"'model.layers.0.mlp.gate.weight' .* has shape \[8, 64\], but the config implies \[16, 64\]"
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(folder)


@pytest.mark.parametrize(
    "fields, message",
    [
        (
            dict(experts_per_token=2),
            r"\['experts_per_token'\] describe mixture-of-experts layers; set n_experts",
        ),
        (dict(n_experts=4, experts_per_token=5), r"experts_per_token=5 must be from 1 to n_experts=4"),
        (dict(n_experts=4), r"experts_per_token must be set"),
        (dict(n_experts=4, experts_per_token=2, mlp_types=("moe",)), r"mlp_types must give one of"),
        (dict(mlp_types=("moe", "moe")), r"mlp_types has mixture-of-experts layers but n_experts is not set"),
        (
            dict(shared_expert_gate=True),
            r"shared_expert_gate=True gates a shared expert; set d_shared_expert",
        ),
        (dict(n_experts=4, experts_per_token=2, expert_weights="sigmoid"), r"expert_weights='sigmoid'"),
    ],
)
def test_configs_that_contradict_themselves_are_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig(n_layers=2, d_model=16, n_heads=2, d_vocab=10, n_ctx=8, **fields)


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            lambda w: (w.add_expert_count(8), w.add_expert_used_count(2)),
            # named as the GGUF file names its tensors, not by the family's Hugging Face names
            r"moe.gguf has no router for layer 0 \('blk.0.ffn_gate_inp.weight'\), which its config",
        ),
        (
            lambda w: (w.add_expert_count(8), w.add_expert_used_count(9)),
            r"num_experts_per_tok=9 must be from 1",
        ),
        (
            lambda w: (
                w.add_expert_count(8),
                w.add_expert_used_count(2),
                w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID),
            ),
            r"expert_gating_func=2 is not supported \(the router's scores are a softmax here",
        ),
        (
            lambda w: (w.add_expert_count(8), w.add_expert_used_count(2), w.add_expert_weights_scale(2.5)),
            r"expert_weights_scale=2.5 is not supported",
        ),
        (
            lambda w: (w.add_expert_count(8), w.add_expert_used_count(2), w.add_expert_group_count(4)),
            r"expert_group_count=4 is not supported",
        ),
    ],
    ids=["no-router", "top-k", "sigmoid", "scale", "groups"],
)
def test_gguf_routing_settings_that_cannot_be_expressed_are_refused(tmp_path, bpe, extra, message):
    path = write_llama_gguf(tiny_llama(bpe.get_vocab_size()), bpe, tmp_path / "moe.gguf", extra=extra)
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(path, use_cache=False)


def test_gguf_deepseek_is_refused_by_name(tmp_path):
    path = _bare_gguf(tmp_path / "deepseek.gguf", "deepseek2", {})
    with pytest.raises(
        CheckpointError, match=r"'deepseek2' is not supported: DeepSeek V2 and V3 files use multi-head"
    ):
        load_checkpoint(path, use_cache=False)


def test_an_expert_tensor_in_a_quantization_the_reader_lacks_is_named(tmp_path):
    from interp.load.gguf_file import GGUFFile

    block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.IQ2_XXS]
    data = np.zeros((4, 2, size), dtype=np.uint8)  # 4 experts of [2, 256] in IQ2_XXS blocks
    path = _bare_gguf(tmp_path / "iq2.gguf", "gpt-oss", {"blk.0.ffn_gate_exps.weight": data})
    with pytest.raises(
        CheckpointError, match=r"'blk.0.ffn_gate_exps.weight' has type IQ2_XXS, which this loader"
    ):
        GGUFFile(path).tensors()


def _bare_gguf(path, arch, tensors):
    writer = gguf.GGUFWriter(str(path), arch)
    for name, array in tensors.items():
        writer.add_tensor(name, array, raw_dtype=gguf.GGMLQuantizationType.IQ2_XXS)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
