"""Write the circuit-tracer golden files the transcoder format and hook-mapping tests compare against.

Run it with circuit-tracer 0.5.0 installed (it pins ``transformers<=4.57.3`` and ``nnsight==0.6.*``, so in a
virtual environment of its own), from the repository root::

    python tests/sae/golden/make_golden.py

For each format it writes small random transcoders with circuit-tracer's own writer (or, for Gemma Scope, in
the published layout), loads them with circuit-tracer's own loader, and records that loader's encoder
pre-activations, activations and reconstructions on fixed inputs (``expected.safetensors``). For each family
(Llama, Qwen3, Gemma 2, Gemma 3) it saves a tiny random checkpoint and records, through circuit-tracer's
TransformerLens-to-nnsight mapping, the tensor each config hook name reads at every layer.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import torch
import yaml
from safetensors.torch import save_file

HERE = Path(__file__).resolve().parent
N_LAYERS, D_MODEL, D_TC, N_POS = 3, 8, 16, 5


def rand(g, *shape, scale=0.4):
    return torch.randn(*shape, generator=g) * scale


def inputs(seed: int) -> torch.Tensor:
    return rand(torch.Generator().manual_seed(seed), N_LAYERS, N_POS, D_MODEL, scale=1.0)


def fresh(name: str) -> Path:
    folder = HERE / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def set_expected(ts, x: torch.Tensor) -> dict[str, torch.Tensor]:
    out = {"x": x}
    for i in range(N_LAYERS):
        pre = ts.encode_layer(x[i], i, apply_activation_function=False)
        acts = ts.encode_layer(x[i], i)
        out[f"pre_{i}"], out[f"acts_{i}"] = pre, acts
        out[f"recons_{i}"] = ts[i].decode(acts, x[i])
    return {k: v.detach().float().contiguous() for k, v in out.items()}


def transcoder_set(name: str, activation: str, *, skip: bool, k: int | None = None, seed: int = 0):
    from circuit_tracer.transcoder.activation_functions import JumpReLU, TopK
    from circuit_tracer.transcoder.single_layer_transcoder import SingleLayerTranscoder, load_transcoder_set

    g = torch.Generator().manual_seed(seed)
    folder = fresh(name)
    for i in range(N_LAYERS):
        fn = {"relu": torch.relu, "jump_relu": JumpReLU(rand(g, D_TC).abs(), 0.1), "topk": TopK(k)}[
            activation
        ]
        tc = SingleLayerTranscoder(
            D_MODEL, D_TC, fn, i, skip_connection=skip, device="cpu", dtype=torch.float32
        )
        with torch.no_grad():
            for p in (tc.W_enc, tc.W_dec, tc.b_enc, tc.b_dec) + ((tc.W_skip,) if skip else ()):
                p.copy_(rand(g, *p.shape))
        tc.to_safetensors(str(folder / f"layer_{i}.safetensors"))
    config = {
        "model_kind": "transcoder_set",
        "feature_input_hook": "mlp.hook_in",
        "feature_output_hook": "mlp.hook_out",
    }
    if activation != "jump_relu":
        config["activation"] = activation
    if k is not None:
        config["k"] = k
    (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    paths = {i: str(folder / f"layer_{i}.safetensors") for i in range(N_LAYERS)}
    ts = load_transcoder_set(
        paths,
        "golden",
        "mlp.hook_in",
        "mlp.hook_out",
        device=torch.device("cpu"),
        dtype=torch.float32,
        lazy_encoder=False,
        lazy_decoder=True,
    )
    if activation == "topk":  # 0.5.0's loader reads no activation from a config; TopK is its own module
        for tc in ts:
            tc.activation_function = TopK(k)
    save_file(set_expected(ts, inputs(seed + 100)), folder / "expected.safetensors")


def clt_expected(clt, x: torch.Tensor) -> dict[str, torch.Tensor]:
    out = {"x": x}
    acts = []
    for i in range(N_LAYERS):
        out[f"pre_{i}"] = clt.encode_layer(x[i], i, apply_activation_function=False)
        acts.append(clt.encode_layer(x[i], i))
        out[f"acts_{i}"] = acts[-1]
    recons = clt.decode(torch.stack(acts).to_sparse(), x)  # [n_layers, n_pos, d_model]
    for i in range(N_LAYERS):
        out[f"recons_{i}"] = recons[i]
    return {k: v.detach().float().contiguous() for k, v in out.items()}


def clt_folder(name: str, activation: str, seed: int = 1):
    from circuit_tracer.transcoder.cross_layer_transcoder import CrossLayerTranscoder, load_clt

    g = torch.Generator().manual_seed(seed)
    clt = CrossLayerTranscoder(
        N_LAYERS,
        D_TC,
        D_MODEL,
        activation_function=activation,
        lazy_decoder=False,
        device="cpu",
        dtype=torch.float32,
    )
    with torch.no_grad():
        for p in clt.parameters():
            p.copy_(rand(g, *p.shape))
        if activation == "jump_relu":
            clt.activation_function.threshold.abs_()
    folder = fresh(name)
    clt.to_safetensors(str(folder))
    config = {
        "model_kind": "cross_layer_transcoder",
        "feature_input_hook": "hook_resid_mid",
        "feature_output_hook": "hook_mlp_out",
    }
    (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    loaded = load_clt(str(folder), device=torch.device("cpu"), dtype=torch.float32, lazy_decoder=True)
    save_file(clt_expected(loaded, inputs(seed + 100)), folder / "expected.safetensors")


def gemma_scope(seed: int = 2):
    from circuit_tracer.transcoder.single_layer_transcoder import TranscoderSet, load_gemma_scope_transcoder

    g = torch.Generator().manual_seed(seed)
    folder = fresh("gemma_scope")
    layers = {}
    for i in range(N_LAYERS):
        arrays = {
            "W_enc": rand(g, D_MODEL, D_TC),
            "W_dec": rand(g, D_TC, D_MODEL),
            "b_enc": rand(g, D_TC),
            "b_dec": rand(g, D_MODEL),
            "threshold": rand(g, D_TC).abs(),
        }
        file = folder / f"layer_{i}" / "params.npz"
        file.parent.mkdir()
        np.savez(file, **{k: v.numpy() for k, v in arrays.items()})
        layers[i] = load_gemma_scope_transcoder(str(file), i, device=torch.device("cpu"))
    ts = TranscoderSet(layers, "ln2.hook_normalized", "hook_mlp_out")
    save_file(set_expected(ts, inputs(seed + 100)), folder / "expected.safetensors")


def gemma_scope_2(seed: int = 3):
    from circuit_tracer.transcoder.cross_layer_transcoder import load_gemma_scope_2_clt
    from circuit_tracer.transcoder.single_layer_transcoder import TranscoderSet, load_gemma_scope_2_transcoder

    g = torch.Generator().manual_seed(seed)
    folder = fresh("gemma_scope_2")
    layers = {}
    for i in range(N_LAYERS):
        t = {
            "w_enc": rand(g, D_MODEL, D_TC),
            "w_dec": rand(g, D_TC, D_MODEL),
            "b_enc": rand(g, D_TC),
            "b_dec": rand(g, D_MODEL),
            "threshold": rand(g, D_TC).abs(),
            "affine_skip_connection": rand(g, D_MODEL, D_MODEL),
        }
        save_file(t, folder / f"layer_{i}.safetensors")
        layers[i] = load_gemma_scope_2_transcoder(
            str(folder / f"layer_{i}.safetensors"), i, device=torch.device("cpu")
        )
    ts = TranscoderSet(layers, "hook_resid_mid", "hook_mlp_out")
    save_file(set_expected(ts, inputs(seed + 100)), folder / "expected.safetensors")

    folder = fresh("gemma_scope_2_clt")
    paths = {}
    for i in range(N_LAYERS):
        w_dec = rand(g, D_TC, N_LAYERS, D_MODEL)
        w_dec[:, :i] = 0  # the published files hold zeros where a layer cannot write
        t = {
            "w_enc": rand(g, D_MODEL, D_TC),
            "w_dec": w_dec,
            "b_enc": rand(g, D_TC),
            "b_dec": rand(g, D_MODEL),
            "threshold": rand(g, D_TC).abs(),
        }
        paths[i] = str(folder / f"layer_{i}.safetensors")
        save_file(t, paths[i])
    # circuit-tracer 0.5.0 reads layers range(max(paths)): one key past the last layer makes it read them all.
    clt = load_gemma_scope_2_clt({**paths, N_LAYERS: ""}, device=torch.device("cpu"), dtype=torch.float32)
    save_file(clt_expected(clt, inputs(seed + 200)), folder / "expected.safetensors")


def tokenizer(folder: Path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"t{i}": i for i in range(64)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="t0"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.save(str(folder / "tokenizer.json"))
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="t0", eos_token="t0", pad_token="t1")


def families():
    import transformers
    from circuit_tracer.replacement_model.replacement_model_nnsight import NNSightReplacementModel
    from circuit_tracer.utils.tl_nnsight_mapping import get_mapping
    from nnsight import LanguageModel, save

    common = dict(
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=32,
        vocab_size=64,
        max_position_embeddings=64,
        head_dim=8,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=1,
    )
    builds = {
        "llama": lambda: transformers.LlamaForCausalLM(transformers.LlamaConfig(**common)),
        "qwen3": lambda: transformers.Qwen3ForCausalLM(
            transformers.Qwen3Config(**common, tie_word_embeddings=False)
        ),
        "gemma2": lambda: transformers.Gemma2ForCausalLM(
            transformers.Gemma2Config(**common, query_pre_attn_scalar=8)
        ),
        "gemma3": lambda: transformers.Gemma3ForCausalLM(
            transformers.Gemma3TextConfig(**common, query_pre_attn_scalar=8)
        ),
    }
    ids = torch.tensor([[0, 5, 9, 17, 33, 2, 41]])
    for name, build in builds.items():
        torch.manual_seed(0)
        model = build().eval()
        with torch.no_grad():  # norms' weights away from their init, so a missing gain shows
            for pname, p in model.named_parameters():
                if "norm" in pname:
                    p.copy_(torch.randn(p.shape) * 0.5 + (0.0 if "gemma" in name else 1.0))
        folder = fresh(f"families/{name}")
        model.save_pretrained(folder)
        tok = tokenizer(folder)
        mapping = get_mapping(type(model).__name__)
        lm = LanguageModel(model, tokenizer=tok)
        saved = {}
        order = ["hook_resid_mid", "ln2.hook_normalized", "mlp.hook_in", "hook_mlp_out", "mlp.hook_out"]
        hooks = sorted(mapping.feature_hook_mapping, key=order.index)  # nnsight reads in forward order
        with torch.no_grad(), lm.trace(ids):
            for layer in range(common["num_hidden_layers"]):
                seen = {}
                for hook in hooks:
                    pattern, io = mapping.feature_hook_mapping[hook]
                    if (pattern, io) not in seen:
                        envoy = NNSightReplacementModel._resolve_attr(lm, pattern.format(layer=layer))
                        seen[pattern, io] = save(envoy.output if io == "output" else envoy.input)
                    saved[f"{hook}/{layer}"] = seen[pattern, io]
        tensors = {k: (v.value if hasattr(v, "value") else v) for k, v in saved.items()}
        tensors = {
            k: (t[0] if isinstance(t, tuple) else t).detach().float().clone() for k, t in tensors.items()
        }
        tensors["ids"] = ids
        save_file(tensors, folder / "mapping.safetensors")
        (folder / "hooks.json").write_text(json.dumps(sorted(mapping.feature_hook_mapping)))


if __name__ == "__main__":
    transcoder_set("circuit_tracer_relu_skip", "relu", skip=True)
    transcoder_set("circuit_tracer_jumprelu", "jump_relu", skip=False, seed=4)
    transcoder_set("circuit_tracer_topk", "topk", skip=False, k=3, seed=5)
    clt_folder("circuit_tracer_clt_relu", "relu")
    clt_folder("circuit_tracer_clt_jumprelu", "jump_relu", seed=6)
    gemma_scope()
    gemma_scope_2()
    families()
