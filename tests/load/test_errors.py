"""Bad input fails with an error that names the file or value and says what to do."""

from __future__ import annotations

import json
import shutil

import gguf
import numpy as np
import pytest

from interp.load import CheckpointError, load, load_checkpoint
from tests.load.builders import SEED, byte_level_bpe, save_folder, write_llama_gguf
from tests.load.families import build, tiny_llama


@pytest.fixture(scope="module")
def bpe():
    return byte_level_bpe()


@pytest.fixture(scope="module")
def llama_folder(tmp_path_factory, bpe):
    return save_folder(tiny_llama(bpe.get_vocab_size()), bpe, tmp_path_factory.mktemp("llama") / "model")


@pytest.fixture
def copy(tmp_path, llama_folder):
    def make():
        target = tmp_path / "copy"
        shutil.copytree(llama_folder, target)
        return target

    return make


def _edit_config(folder, **changes):
    path = folder / "config.json"
    values = json.loads(path.read_text())
    values.update(changes)
    path.write_text(json.dumps(values))


def test_missing_paths_and_names(tmp_path):
    with pytest.raises(FileNotFoundError, match="no model file or folder at"):
        load_checkpoint(tmp_path / "absent")
    with pytest.raises(
        FileNotFoundError, match=r"neither a packaged model \(\['minilm-l6', 'smollm2-135m'\]\)"
    ):
        load_checkpoint("gpt-5")
    with pytest.raises(FileNotFoundError, match="has no config.json"):
        load_checkpoint(tmp_path)


def test_missing_weights_and_tokenizer(copy):
    folder = copy()
    (folder / "tokenizer.json").unlink()
    with pytest.raises(FileNotFoundError, match="has no tokenizer.json"):
        load_checkpoint(folder)
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="pytorch_model.bin, a pickle"):
        load_checkpoint(folder)
    (folder / "pytorch_model.bin").unlink()
    with pytest.raises(FileNotFoundError, match="has no model.safetensors"):
        load_checkpoint(folder)


def test_truncated_and_corrupt_safetensors(copy):
    folder = copy()
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(
        CheckpointError, match=r"model.safetensors is not a readable safetensors file; .*truncated"
    ):
        load_checkpoint(folder)
    weights.write_bytes(b"\x00" * 64)
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        load_checkpoint(folder)


def test_missing_shard(tmp_path, bpe):
    folder = save_folder(tiny_llama(bpe.get_vocab_size()), bpe, tmp_path / "sharded", max_shard_size="40KB")
    shards = sorted(folder.glob("model-*.safetensors"))
    shards[-1].unlink()
    with pytest.raises(FileNotFoundError, match=f"lists the shard {shards[-1].name}, which is missing"):
        load_checkpoint(folder)


def test_invalid_config_json(copy):
    folder = copy()
    (folder / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="config.json is not valid JSON"):
        load_checkpoint(folder)


def test_config_that_does_not_match_the_weights(copy):
    folder = copy()
    _edit_config(folder, num_key_value_heads=1)
    pattern = (
        r"tensor 'model.layers.0.self_attn.k_proj.weight' in .* has shape \[32, 64\], but the config implies "
        r"\[16, 64\] \(num_key_value_heads \* head_dim, hidden_size\); the config does not match the weights"
    )
    with pytest.raises(CheckpointError, match=pattern):
        load_checkpoint(folder)
    _edit_config(folder, num_key_value_heads=2, intermediate_size=100)
    with pytest.raises(
        CheckpointError, match=r"gate_proj.weight' .* \[96, 64\], but the config implies \[100, 64\]"
    ):
        load_checkpoint(folder)


def test_unsupported_architecture_lists_the_supported(copy):
    folder = copy()
    _edit_config(folder, model_type="t5")
    with pytest.raises(
        CheckpointError, match=r"model_type 't5' is not supported; supported: \['bert', 'gemma', "
    ):
        load_checkpoint(folder)


def test_unimplemented_features_are_refused(copy):
    folder = copy()
    _edit_config(folder, rope_parameters={"rope_type": "proportional", "rope_theta": 1e4, "factor": 8.0})
    with pytest.raises(CheckpointError, match="rotary scaling 'proportional' is not implemented.*'llama3'"):
        load_checkpoint(folder)
    _edit_config(folder, rope_parameters={"rope_type": "llama3", "rope_theta": 1e4, "factor": 8.0})
    with pytest.raises(CheckpointError, match=r"'llama3' needs \['low_freq_factor', 'high_freq_factor'\]"):
        load_checkpoint(folder)
    _edit_config(folder, rope_parameters={"rope_type": "linear", "rope_theta": 1e4, "factor": 2.0, "warp": 3})
    with pytest.raises(CheckpointError, match=r"parameters this loader does not implement: \['warp'\]"):
        load_checkpoint(folder)
    _edit_config(folder, rope_parameters={"rope_type": "default", "rope_theta": 1e4}, hidden_act="tanh")
    with pytest.raises(CheckpointError, match="hidden_act='tanh' is not a supported activation"):
        load_checkpoint(folder)


def test_unknown_tensors_are_refused(tmp_path):
    from tests.load.builders import wordpiece

    backend = wordpiece()
    folder = tmp_path / "classifier"
    build("bert-classifier", backend.get_vocab_size(), None, widen=False, folder=folder, tokenizer=backend)
    with pytest.raises(CheckpointError, match=r"tensors this loader does not understand: 'classifier.bias'"):
        load_checkpoint(folder)


def test_text_longer_than_the_context(llama_folder):
    model = load(llama_folder)
    assert model.tokenizer.n_ctx == model.cfg.n_ctx == 128
    with pytest.raises(ValueError, match=r"is \d+ tokens long, more than the model's context n_ctx=128"):
        model.to_tokens(" ".join([SEED] * 8))


def test_bad_device_and_dtype(llama_folder):
    with pytest.raises(ValueError, match="dtype='int8' is not a floating torch dtype"):
        load(llama_folder, dtype="int8")
    with pytest.raises(ValueError, match="dtype='float33'"):
        load(llama_folder, dtype="float33")
    with pytest.raises(ValueError, match="device='gpu' is not a device"):
        load(llama_folder, device="gpu")


@pytest.fixture(scope="module")
def gguf_path(tmp_path_factory, bpe):
    return write_llama_gguf(tiny_llama(bpe.get_vocab_size()), bpe, tmp_path_factory.mktemp("g") / "tiny.gguf")


def test_not_a_gguf_file(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"NOPE" + b"\x00" * 100)
    with pytest.raises(CheckpointError, match=r"model.gguf is not a GGUF file: it starts with b'NOPE'"):
        load_checkpoint(path, use_cache=False)
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    with pytest.raises(CheckpointError, match="neither a model folder nor a GGUF file"):
        load_checkpoint(other)


@pytest.mark.parametrize("fraction", [0.05, 0.5, 0.97])
def test_truncated_gguf(tmp_path, gguf_path, fraction):
    data = gguf_path.read_bytes()
    path = tmp_path / "cut.gguf"
    path.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(CheckpointError, match=r"cut.gguf.*(truncated or corrupt)"):
        load_checkpoint(path, use_cache=False)


def _write_gguf(path, tensors, arch="llama", metadata=None):
    writer = gguf.GGUFWriter(str(path), arch)
    for key, value in (metadata or {}).items():
        writer.add_string(key, value)
    for name, (array, qtype) in tensors.items():
        writer.add_tensor(name, array, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_unknown_quantization_type_names_the_tensor(tmp_path):
    from interp.load.gguf_file import GGUFFile

    block = np.zeros((4, 66), dtype=np.uint8)  # four IQ2_XXS blocks of 256 values
    path = _write_gguf(
        tmp_path / "iq.gguf", {"blk.0.attn_q.weight": (block, gguf.GGMLQuantizationType.IQ2_XXS)}
    )
    with pytest.raises(
        CheckpointError, match=r"tensor 'blk.0.attn_q.weight' has type IQ2_XXS, which this loader"
    ):
        GGUFFile(path).tensors()


def test_unsupported_gguf_architecture(tmp_path):
    path = _write_gguf(tmp_path / "gpt2.gguf", {}, arch="gpt2")
    supported = (
        r"\['gemma', 'gemma2', 'gemma3', 'gpt-oss', 'gptneox', 'llama', 'olmo2', 'olmoe', 'phi3', 'qwen2', 'qwen2moe', "
        r"'qwen3', 'qwen3moe'\]"
    )
    with pytest.raises(
        CheckpointError, match=rf"GGUF architecture 'gpt2' is not supported; supported: {supported}"
    ):
        load_checkpoint(path, use_cache=False)


@pytest.mark.parametrize(
    "extra, message",
    [
        (lambda w: w.add_string("llama.rope.scaling.type", "su"), r"rope.scaling.type='su' is not supported"),
        (
            lambda w: w.add_rope_scaling_type(gguf.RopeScalingType.YARN),
            r"yarn needs rope.scaling.factor and original_context_length",
        ),
        (
            lambda w: (
                w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR),
                w.add_rope_scaling_factor(2.0),
                w.add_tensor("rope_freqs.weight", np.ones(8, dtype=np.float32)),
            ),
            r"rope.scaling.type='linear' is not supported \(together with a rope_freqs tensor\)",
        ),
        (
            lambda w: (
                w.add_rope_scaling_type(gguf.RopeScalingType.YARN),
                w.add_rope_scaling_factor(2.0),
                w.add_rope_scaling_orig_ctx_len(64),
                w.add_float32("llama.rope.scaling.yarn_log_multiplier", 0.1),
            ),
            r"yarn_log_multiplier=0.1 is not supported",
        ),
        (
            lambda w: w.add_uint32("llama.attention.some_new_setting", 3),
            r"metadata this loader does not understand: \['llama.attention.some_new_setting'\]",
        ),
        (
            lambda w: w.add_uint32("llama.expert_count", 8),  # tests/load/test_moe_errors.py has the others
            r"has no metadata key 'llama.expert_used_count', which loading it needs",
        ),
        (lambda w: w.add_bool("llama.attention.causal", False), r"attention.causal=False is not supported"),
        (lambda w: w.add_uint16("split.count", 3), r"part of a GGUF file split in 3; merge the parts first"),
        (
            lambda w: w.add_array("llama.feed_forward_length", [96, 96]),
            r"llama.feed_forward_length differs per layer",
        ),
    ],
    ids=[
        "unknown-rope",
        "yarn-incomplete",
        "freqs-and-linear",
        "yarn-log",
        "unknown-key",
        "moe",
        "bidir",
        "split",
        "per-layer",
    ],
)
def test_gguf_settings_that_would_change_the_model_are_refused(tmp_path, bpe, extra, message):
    path = write_llama_gguf(tiny_llama(bpe.get_vocab_size()), bpe, tmp_path / "odd.gguf", extra=extra)
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(path, use_cache=False)


def test_gguf_tokenizer_kinds_are_named(tmp_path, bpe):
    def unigram(writer):
        writer.add_string("tokenizer.ggml.model", "t5")

    path = write_llama_gguf(tiny_llama(bpe.get_vocab_size()), bpe, tmp_path / "t5.gguf", extra=unigram)
    with pytest.raises(
        CheckpointError, match=r"tokenizer.ggml.model='t5' is not supported; supported: \['gpt2', 'llama'\]"
    ):
        load_checkpoint(path, use_cache=False)
