"""Write circuit-tracer 0.5.0's attribution graphs of tiny random checkpoints, the golden files of
``tests/circuits/test_golden.py``.

Run it with the Python of an environment that has ``circuit-tracer==0.5.0`` and ``nnsight==0.6.*`` (they pin
``transformers<=4.57.3``, so they stay out of the project's test environment)::

    python tests/circuits/golden/make_golden.py

For each family (Llama, Qwen3, Gemma 2, Gemma 3) it writes ``MODEL/`` (a random checkpoint with a word-level
tokenizer, saved with ``save_pretrained``), and for each kind of transcoder (per-layer, per-layer with a skip
connection, cross-layer) ``MODEL-KIND.safetensors``: the transcoder's weights as circuit-tracer holds them, the
graph circuit-tracer's ``attribute`` builds with its nnsight backend, and what ``prune_graph`` and
``compute_graph_scores`` give on it. One more case caps ``max_feature_nodes``, so the influence-ranked order
in which features are visited is compared too.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import torch
import transformers
from circuit_tracer import ReplacementModel, attribute
from circuit_tracer.graph import compute_graph_scores, prune_graph
from circuit_tracer.transcoder.cross_layer_transcoder import CrossLayerTranscoder
from circuit_tracer.transcoder.single_layer_transcoder import SingleLayerTranscoder, TranscoderSet
from safetensors.torch import save_file
from tokenizers import Tokenizer, models, pre_tokenizers

HERE = Path(__file__).parent
VOCAB = 64
D_TRANSCODER = 16
PROMPT = [0, 17, 33, 5, 48, 21, 9]  # a special token first, as circuit-tracer expects
SITES = {  # circuit-tracer's hook names per family: (per-layer input, output), (cross-layer input, output)
    "llama": (("mlp.hook_in", "hook_mlp_out"), ("hook_resid_mid", "hook_mlp_out")),
    "qwen3": (("mlp.hook_in", "mlp.hook_out"), ("mlp.hook_in", "mlp.hook_out")),
    "gemma2": (("ln2.hook_normalized", "hook_mlp_out"), ("hook_resid_mid", "hook_mlp_out")),
    "gemma3": (("mlp.hook_in", "hook_mlp_out"), ("hook_resid_mid", "hook_mlp_out")),
}
CASES = [(f, k, None) for f in SITES for k in ("per-layer", "skip", "clt")] + [("llama", "per-layer", 12)]


def config(family: str):
    common = dict(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=48,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=2,
        tie_word_embeddings=False,
    )
    if family == "llama":
        return transformers.LlamaConfig(**common)
    if family == "qwen3":
        return transformers.Qwen3Config(**common, head_dim=8)
    if family == "gemma2":
        return transformers.Gemma2Config(
            **common,
            head_dim=8,
            query_pre_attn_scalar=8,
            attn_logit_softcapping=4.0,
            final_logit_softcapping=6.0,
            sliding_window=4,
        )
    return transformers.Gemma3TextConfig(
        **common,
        head_dim=8,
        query_pre_attn_scalar=8,
        sliding_window=4,
        layer_types=["sliding_attention", "full_attention"],
    )


def save_model(family: str) -> Path:
    folder = HERE / family
    cfg = config(family)
    cls = transformers.Gemma3ForCausalLM if family == "gemma3" else transformers.AutoModelForCausalLM
    torch.manual_seed(0)
    model = cls.from_config(cfg) if cls is transformers.AutoModelForCausalLM else cls(cfg)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():  # matrices ~ 1.5 / sqrt(fan_in); norms and biases around their init
            if p.ndim >= 2:
                p.copy_(torch.randn(p.shape, generator=g) * 1.5 / math.sqrt(p.shape[-1]))
            else:
                p.add_(0.3 * torch.randn(p.shape, generator=g))
    model.save_pretrained(folder, safe_serialization=True)
    words = ["<bos>", "<eos>", "<pad>"] + [f"w{i}" for i in range(3, VOCAB)]
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<pad>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", unk_token="<pad>"
    )
    tok.save_pretrained(folder)
    return folder


def transcoders(family: str, kind: str, seed: int):
    g = torch.Generator().manual_seed(seed)
    n, d, f = 2, 32, D_TRANSCODER
    (pl_in, pl_out), (clt_in, clt_out) = SITES[family]
    weights: dict[str, torch.Tensor] = {}
    if kind == "clt":
        tc = CrossLayerTranscoder(
            n_layers=n,
            d_transcoder=f,
            d_model=d,
            lazy_decoder=False,
            feature_input_hook=clt_in,
            feature_output_hook=clt_out,
            device=torch.device("cpu"),
            dtype=torch.float32,
        )
        with torch.no_grad():
            tc.W_enc.copy_(torch.randn(tc.W_enc.shape, generator=g) / math.sqrt(d))
            tc.b_enc.copy_(-0.4 - 0.2 * torch.rand(tc.b_enc.shape, generator=g))
            tc.b_dec.copy_(0.1 * torch.randn(tc.b_dec.shape, generator=g))
            for i, w in enumerate(tc.W_dec):
                w.copy_(torch.randn(w.shape, generator=g) / math.sqrt(f))
                weights[f"W_dec.{i}"] = w.detach().clone()
        weights.update(
            W_enc=tc.W_enc.detach().clone(), b_enc=tc.b_enc.detach().clone(), b_dec=tc.b_dec.detach().clone()
        )
        return tc, weights
    layers = {}
    for layer in range(n):
        t = SingleLayerTranscoder(
            d,
            f,
            torch.nn.functional.relu,
            layer,
            skip_connection=kind == "skip",
            device=torch.device("cpu"),
            dtype=torch.float32,
        )
        with torch.no_grad():
            t.W_enc.copy_(torch.randn(t.W_enc.shape, generator=g) / math.sqrt(d))
            t.b_enc.copy_(-0.4 - 0.2 * torch.rand(t.b_enc.shape, generator=g))
            t.W_dec.copy_(torch.randn(t.W_dec.shape, generator=g) / math.sqrt(f))
            t.b_dec.copy_(0.1 * torch.randn(t.b_dec.shape, generator=g))
            if t.W_skip is not None:
                t.W_skip.copy_(0.3 * torch.randn(t.W_skip.shape, generator=g) / math.sqrt(d))
        for name in ("W_enc", "b_enc", "W_dec", "b_dec", "W_skip"):
            if getattr(t, name, None) is not None:
                weights[f"{name}.{layer}"] = getattr(t, name).detach().clone()
        layers[layer] = t
    return TranscoderSet(layers, feature_input_hook=pl_in, feature_output_hook=pl_out), weights


def main() -> None:
    folders = {family: save_model(family) for family in SITES}
    index = {}
    for seed, (family, kind, cap) in enumerate(CASES):
        tc, weights = transcoders(family, kind, seed + 10)
        model = ReplacementModel.from_pretrained_and_transcoders(
            str(folders[family]), tc, backend="nnsight", device=torch.device("cpu"), dtype=torch.float32
        )
        graph = attribute(
            torch.tensor(PROMPT),
            model,
            max_n_logits=5,
            desired_logit_prob=0.95,
            batch_size=32,
            max_feature_nodes=cap,
            update_interval=1,
        )
        pruned = prune_graph(graph, node_threshold=0.8, edge_threshold=0.98)
        replacement, completeness = compute_graph_scores(graph)
        name = f"{family}-{kind}" + (f"-cap{cap}" if cap else "")
        tensors = {f"tc.{k}": v.contiguous() for k, v in weights.items()}
        tensors.update(
            adjacency=graph.adjacency_matrix.float().contiguous(),
            active_features=graph.active_features.long().contiguous(),
            selected_features=graph.selected_features.long().contiguous(),
            activation_values=graph.activation_values.float().contiguous(),
            input_tokens=graph.input_tokens.long().contiguous(),
            logit_tokens=graph.logit_token_ids.long().contiguous(),
            logit_probabilities=graph.logit_probabilities.float().contiguous(),
            node_mask=pruned.node_mask.contiguous(),
            edge_mask=pruned.edge_mask.contiguous(),
            cumulative_scores=pruned.cumulative_scores.float().contiguous(),
        )
        (pl_in, pl_out), (clt_in, clt_out) = SITES[family]
        meta = {
            "family": family,
            "kind": kind,
            "max_feature_nodes": str(cap or ""),
            "input_hook": clt_in if kind == "clt" else pl_in,
            "output_hook": clt_out if kind == "clt" else pl_out,
            "replacement": repr(replacement),
            "completeness": repr(completeness),
        }
        save_file(tensors, str(HERE / f"{name}.safetensors"), metadata=meta)
        index[name] = {**meta, "n_nodes": int(graph.adjacency_matrix.shape[0])}
        print(name, index[name], file=sys.stderr)
    versions = {
        "circuit-tracer": "0.5.0",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
    }
    (HERE / "index.json").write_text(json.dumps({"versions": versions, "cases": index}, indent=1) + "\n")


if __name__ == "__main__":
    main()
