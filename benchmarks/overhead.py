"""What instrumentation costs: our forward against the plain ``transformers`` forward on the same weights.

For GPT-2-small-, SmolLM2-135M-, Pythia-410M- and Gemma-2-2B-shaped models and five mixtures of experts routed
as Mixtral-8x7B, Qwen1.5-MoE-A2.7B, Qwen3-30B-A3B, OLMoE-1B-7B and GPT-OSS-20B are (random weights), and two
input shapes each, every variant is
timed in alternating repetitions (one of each per round, the order rotating between rounds) and reported as the
median of per-round ratios to the plain ``transformers`` forward, so that drift in machine load hits numerator
and denominator alike. The baseline is ``transformers`` with SDPA, or with eager attention where
``transformers`` itself cannot use SDPA (Gemma 2, whose scores are soft-capped, and GPT-OSS, whose attention
has sinks; our soft-capped and sink layers run the explicit path too). The Gemma-2-2B row keeps every
per-layer size of the real model (d_model 2304, 8 heads of 256, 4 key/value heads, d_mlp 9216, vocabulary
256000, soft-caps 50 and 30) but 4 of its 26 layers, so that two copies fit in memory and a round takes seconds,
not minutes. The mixture-of-experts rows keep their models' routing (8 experts, 2 per token; 60, 4 per token and
a gated shared expert; 128 or 64 experts, 8 per token; 32, 4 per token) with a quarter of each width and 4
layers; both sides run only the chosen experts (``transformers`` with its default grouped products).

Memory: the bytes each cache holds against the bytes its hooks should hold, whether anything is retained once
the cache is dropped, and the process's peak resident memory.

    python benchmarks/overhead.py --threads 1 --out benchmarks/results/overhead-cpu.json
    python benchmarks/overhead.py --device cuda --dtype bfloat16

This is a measurement script, not a test.
"""

from __future__ import annotations

import argparse
import gc
import platform
import resource
import statistics
import sys
import time
import weakref
from collections.abc import Callable

import provenance
import torch

MODELS = {
    "gpt2-small": dict(
        family="gpt2", n_layers=12, d_model=768, n_heads=12, n_kv_heads=12, d_mlp=3072, d_vocab=50257
    ),
    "smollm2-135m": dict(
        family="llama", n_layers=30, d_model=576, n_heads=9, n_kv_heads=3, d_mlp=1536, d_vocab=49152
    ),
    "pythia-410m": dict(
        family="gpt_neox", n_layers=24, d_model=1024, n_heads=16, n_kv_heads=16, d_mlp=4096, d_vocab=50304
    ),
    "gemma2-2b-4layers": dict(
        family="gemma2",
        n_layers=4,
        d_model=2304,
        n_heads=8,
        n_kv_heads=4,
        d_head=256,
        d_mlp=9216,
        d_vocab=256000,
        shapes=("2x128", "1x512"),
    ),
    # Mixture of experts: Qwen3-30B-A3B's and OLMoE-1B-7B's routing (128 experts, top 8; 64 experts, top 8) with
    # every width a quarter of theirs, 4 layers and a 16384-token vocabulary, so that the experts, not the
    # unembedding, take most of the time, and two copies fit in memory.
    "qwen3-moe-quarter": dict(
        family="qwen3_moe",
        n_layers=4,
        d_model=512,
        n_heads=8,
        n_kv_heads=1,
        d_head=32,
        d_mlp=1536,
        n_experts=128,
        experts_per_token=8,
        d_expert=192,
        d_vocab=16384,
    ),
    "olmoe-quarter": dict(
        family="olmoe",
        n_layers=4,
        d_model=512,
        n_heads=4,
        n_kv_heads=4,
        d_mlp=256,
        n_experts=64,
        experts_per_token=8,
        d_expert=256,
        d_vocab=16384,
    ),
    # Mixtral-8x7B's routing (8 experts, top 2, softmax over the chosen) with every width a quarter of its (d_model
    # 1024, 8 heads of 128, experts of 3584), 4 layers and a 16384-token vocabulary.
    "mixtral-quarter": dict(
        family="mixtral",
        n_layers=4,
        d_model=1024,
        n_heads=8,
        n_kv_heads=2,
        d_head=128,
        d_mlp=3584,
        n_experts=8,
        experts_per_token=2,
        d_expert=3584,
        d_vocab=16384,
    ),
    # Qwen1.5-MoE-A2.7B's routing (60 experts, top 4, not renormalised, and a gated shared expert four experts
    # wide) with every width a quarter of its, 4 layers and a 16384-token vocabulary.
    "qwen2-moe-quarter": dict(
        family="qwen2_moe",
        n_layers=4,
        d_model=512,
        n_heads=4,
        n_kv_heads=4,
        d_head=128,
        d_mlp=1408,
        n_experts=60,
        experts_per_token=4,
        d_expert=352,
        d_vocab=16384,
    ),
    # GPT-OSS-20B's routing (32 experts, top 4), its 128-token windows on alternate layers and its attention
    # sinks, with every width a quarter of its (d_model 720, 16 heads of 64, experts of 720), 4 layers and a
    # 16384-token vocabulary. transformers runs GPT-OSS with eager attention only; so do our sink layers.
    "gpt-oss-quarter": dict(
        family="gpt_oss",
        n_layers=4,
        d_model=720,
        n_heads=16,
        n_kv_heads=2,
        d_head=64,
        d_mlp=720,
        n_experts=32,
        experts_per_token=4,
        d_expert=720,
        d_vocab=16384,
    ),
}
SHAPES = {"4x128": (4, 128), "1x1024": (1, 1024), "2x128": (2, 128), "1x512": (1, 512)}
DEFAULT_SHAPES = ("4x128", "1x1024")


def build_hf(spec: dict, attn: str):
    """A random-weight ``transformers`` model of the given shape (seeded, so both attention versions match)."""
    import transformers

    torch.manual_seed(0)
    if spec["family"] == "gpt2":
        cfg = transformers.GPT2Config(
            n_layer=spec["n_layers"],
            n_embd=spec["d_model"],
            n_head=spec["n_heads"],
            vocab_size=spec["d_vocab"],
            n_positions=1024,
            n_inner=spec["d_mlp"],
        )
        cls = transformers.GPT2LMHeadModel
    elif spec["family"] == "gpt_neox":
        cfg = transformers.GPTNeoXConfig(
            num_hidden_layers=spec["n_layers"],
            hidden_size=spec["d_model"],
            num_attention_heads=spec["n_heads"],
            intermediate_size=spec["d_mlp"],
            vocab_size=spec["d_vocab"],
            max_position_embeddings=2048,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
            use_parallel_residual=True,
        )
        cls = transformers.GPTNeoXForCausalLM
    elif spec["family"] == "gemma2":
        cfg = transformers.Gemma2Config(
            num_hidden_layers=spec["n_layers"],
            hidden_size=spec["d_model"],
            num_attention_heads=spec["n_heads"],
            num_key_value_heads=spec["n_kv_heads"],
            head_dim=spec["d_head"],
            intermediate_size=spec["d_mlp"],
            vocab_size=spec["d_vocab"],
            max_position_embeddings=8192,
            query_pre_attn_scalar=256,
            attn_logit_softcapping=50.0,
            final_logit_softcapping=30.0,
            sliding_window=4096,
        )
        cls = transformers.Gemma2ForCausalLM
    elif spec["family"] == "qwen3_moe":
        cfg = transformers.Qwen3MoeConfig(
            num_hidden_layers=spec["n_layers"],
            hidden_size=spec["d_model"],
            num_attention_heads=spec["n_heads"],
            num_key_value_heads=spec["n_kv_heads"],
            head_dim=spec["d_head"],
            intermediate_size=spec["d_mlp"],
            moe_intermediate_size=spec["d_expert"],
            num_experts=spec["n_experts"],
            num_experts_per_tok=spec["experts_per_token"],
            norm_topk_prob=True,
            vocab_size=spec["d_vocab"],
            max_position_embeddings=2048,
        )
        cls = transformers.Qwen3MoeForCausalLM
    elif spec["family"] == "mixtral":
        cfg = transformers.MixtralConfig(
            num_hidden_layers=spec["n_layers"],
            hidden_size=spec["d_model"],
            num_attention_heads=spec["n_heads"],
            num_key_value_heads=spec["n_kv_heads"],
            head_dim=spec["d_head"],
            intermediate_size=spec["d_expert"],
            num_local_experts=spec["n_experts"],
            num_experts_per_tok=spec["experts_per_token"],
            vocab_size=spec["d_vocab"],
            max_position_embeddings=2048,
        )
        cls = transformers.MixtralForCausalLM
    elif spec["family"] == "qwen2_moe":
        cfg = transformers.Qwen2MoeConfig(
            num_hidden_layers=spec["n_layers"],
            hidden_size=spec["d_model"],
            num_attention_heads=spec["n_heads"],
            num_key_value_heads=spec["n_kv_heads"],
            intermediate_size=spec["d_mlp"],
            moe_intermediate_size=spec["d_expert"],
            shared_expert_intermediate_size=spec["d_mlp"],
            num_experts=spec["n_experts"],
            num_experts_per_tok=spec["experts_per_token"],
            norm_topk_prob=False,
            decoder_sparse_step=1,
            mlp_only_layers=[],
            vocab_size=spec["d_vocab"],
            max_position_embeddings=2048,
        )
        cls = transformers.Qwen2MoeForCausalLM
    elif spec["family"] == "olmoe":
        cfg = transformers.OlmoeConfig(
            num_hidden_layers=spec["n_layers"],
            hidden_size=spec["d_model"],
            num_attention_heads=spec["n_heads"],
            num_key_value_heads=spec["n_kv_heads"],
            intermediate_size=spec["d_expert"],
            num_experts=spec["n_experts"],
            num_experts_per_tok=spec["experts_per_token"],
            vocab_size=spec["d_vocab"],
            max_position_embeddings=2048,
        )
        cls = transformers.OlmoeForCausalLM
    elif spec["family"] == "gpt_oss":
        cfg = transformers.GptOssConfig(
            num_hidden_layers=spec["n_layers"],
            hidden_size=spec["d_model"],
            num_attention_heads=spec["n_heads"],
            num_key_value_heads=spec["n_kv_heads"],
            head_dim=spec["d_head"],
            intermediate_size=spec["d_expert"],
            num_local_experts=spec["n_experts"],
            num_experts_per_tok=spec["experts_per_token"],
            sliding_window=128,
            vocab_size=spec["d_vocab"],
        )
        cls = transformers.GptOssForCausalLM
    else:
        cfg = transformers.LlamaConfig(
            num_hidden_layers=spec["n_layers"],
            hidden_size=spec["d_model"],
            num_attention_heads=spec["n_heads"],
            num_key_value_heads=spec["n_kv_heads"],
            intermediate_size=spec["d_mlp"],
            vocab_size=spec["d_vocab"],
            max_position_embeddings=2048,
            rope_theta=100000.0,
            tie_word_embeddings=True,
        )
        cls = transformers.LlamaForCausalLM
    cfg._attn_implementation = attn
    return cls(cfg).eval()


def baseline_attention(spec: dict) -> str:
    """The attention ``transformers`` runs this family with by default: SDPA, or eager for Gemma 2 and GPT-OSS."""
    return "eager" if spec["family"] in ("gemma2", "gpt_oss") else "sdpa"


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    out = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    del out
    return time.perf_counter() - start


def variants(
    ours, hf_base, hf_eager, tokens: torch.Tensor, n_layers: int, base: str
) -> dict[str, Callable[[], object]]:
    mid = n_layers // 2
    return {
        f"transformers {base}": lambda: hf_base(tokens).logits,
        "ours, no hooks": lambda: ours(tokens),
        "ours, cache resid stream": lambda: ours.run_with_cache(
            tokens, names_filter="blocks.*.hook_resid_post"
        ),
        "ours, cache one pattern": lambda: ours.run_with_cache(
            tokens, names_filter=f"blocks.{mid}.attn.hook_pattern"
        ),
        "ours, cache all patterns": lambda: ours.run_with_cache(
            tokens, names_filter="blocks.*.attn.hook_pattern"
        ),
        "ours, cache everything": lambda: ours.run_with_cache(tokens),
        "transformers eager, output_attentions": lambda: hf_eager(tokens, output_attentions=True).logits,
    }


CACHE_FILTERS = {
    "ours, cache resid stream": "blocks.*.hook_resid_post",
    "ours, cache one pattern": "one",
    "ours, cache all patterns": "blocks.*.attn.hook_pattern",
    "ours, cache everything": None,
}


def expected_bytes(model, names: list[str], batch: int, pos: int) -> int:
    """The bytes the named activations must take, from the hook contract's shapes."""
    cfg, item = model.cfg, model.dtype.itemsize
    per_name = {
        "hook_resid_post": batch * pos * cfg.d_model,
        "hook_pattern": batch * cfg.n_heads * pos * pos,
    }
    return sum(per_name[n.rsplit(".", 1)[-1]] for n in names) * item


def memory(ours, tokens: torch.Tensor) -> dict[str, dict]:
    out = {}
    batch, pos = tokens.shape
    for label, names_filter in CACHE_FILTERS.items():
        if names_filter == "one":
            names_filter = f"blocks.{ours.cfg.n_layers // 2}.attn.hook_pattern"
        _, cache = ours.run_with_cache(tokens, names_filter=names_filter)
        names = list(cache)
        refs = [weakref.ref(t) for t in cache.values()]
        row = {"cache_bytes": cache.nbytes, "hooks": len(names)}
        if names_filter is not None:
            row["expected_bytes"] = expected_bytes(ours, names, batch, pos)
        del cache, _
        gc.collect()
        row["retained_after_drop"] = sum(r() is not None for r in refs)
        out[label] = row
    return out


def run(args: argparse.Namespace) -> dict:
    import interp

    torch.set_num_threads(args.threads)
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    results = {
        "threads": args.threads,
        "device": args.device,
        "dtype": args.dtype,
        "rounds": args.rounds,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "runs": [],
    }
    for model_name in args.models:
        spec = MODELS[model_name]
        base_attn = baseline_attention(spec)
        hf_base = build_hf(spec, base_attn).to(device, dtype)
        hf_eager = hf_base if base_attn == "eager" else build_hf(spec, "eager").to(device, dtype)
        ours = interp.from_hf(hf_base).to(device, dtype).eval()
        for shape_name in args.shapes or spec.get("shapes", DEFAULT_SHAPES):
            batch, pos = SHAPES[shape_name]
            tokens = torch.randint(
                0, spec["d_vocab"], (batch, pos), generator=torch.Generator().manual_seed(0)
            )
            tokens = tokens.to(device)
            with torch.inference_mode():
                fns = variants(ours, hf_base, hf_eager, tokens, spec["n_layers"], base_attn)
                for fn in fns.values():  # warm-up
                    for _ in range(args.warmup):
                        timed(fn)
                times: dict[str, list[float]] = {k: [] for k in fns}
                order = list(fns)
                for r in range(args.rounds):
                    for name in order[r % len(order) :] + order[: r % len(order)]:
                        times[name].append(timed(fns[name]))
                mem = memory(ours, tokens)
            base = times[f"transformers {base_attn}"]
            no_hooks = times["ours, no hooks"]
            rows = {}
            for name, ts in times.items():
                rows[name] = {
                    "median_s": statistics.median(ts),
                    "ratio_to_transformers": statistics.median(t / b for t, b in zip(ts, base, strict=True)),
                    "ratio_to_ours_no_hooks": statistics.median(
                        t / b for t, b in zip(ts, no_hooks, strict=True)
                    ),
                    **mem.get(name, {}),
                }
            results["runs"].append(
                {"model": model_name, "shape": shape_name, "baseline": base_attn, "variants": rows}
            )
            print_table(model_name, shape_name, rows)
        del hf_base, hf_eager, ours
        gc.collect()
    results["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if torch.cuda.is_available() and args.device.startswith("cuda"):
        results["peak_cuda_mib"] = torch.cuda.max_memory_allocated() / 2**20
    return results


def print_table(model: str, shape: str, rows: dict) -> None:
    print(f"\n{model}, batch x pos = {shape}")
    print(
        f"{'variant':40s} {'median ms':>10s} {'x hf':>8s} {'x ours':>8s} "
        f"{'cache MiB':>10s} {'expected':>9s} {'kept':>5s}"
    )
    for name, row in rows.items():
        cache = f"{row['cache_bytes'] / 2**20:10.1f}" if "cache_bytes" in row else " " * 10
        exp = f"{row['expected_bytes'] / 2**20:9.1f}" if "expected_bytes" in row else " " * 9
        kept = f"{row['retained_after_drop']:5d}" if "retained_after_drop" in row else " " * 5
        print(
            f"{name:40s} {row['median_s'] * 1e3:10.1f} {row['ratio_to_transformers']:8.3f} "
            f"{row['ratio_to_ours_no_hooks']:8.3f} {cache} {exp} {kept}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument(
        "--shapes", nargs="+", default=None, choices=list(SHAPES), help="default: each model's own shapes"
    )
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    env = provenance.environment(["transformers"])
    results = run(args)
    print(f"\npeak resident memory: {results['peak_rss_mib']:.0f} MiB")
    if args.out:
        provenance.write_run(args.out, results, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
