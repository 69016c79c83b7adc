"""Generation speed: interp's ``generate`` against ``transformers`` ``generate`` on the same weights.

Greedy decoding of ``--new-tokens`` tokens after a prompt of ``--prompt-tokens`` random ids (no early stop:
EOS is off on both sides), for each batch size: tokens per second of ``transformers`` (SDPA, its default
cache), of ours with no hooks, of ours with one steering hook (a vector added to one layer's stream at every
position, the common intervention) and, for reference, of ``transformers`` with the same addition as a
PyTorch forward hook; and the cost of recomputing the prefix at every step (``use_kv_cache=False``,
``use_cache=False``) against the cache. Variants alternate within each round, in an order that rotates
between rounds, and each ratio is the median of per-round ratios, so drift in machine load hits numerator
and denominator alike. Both sides must produce the same tokens (checked and printed).

    python benchmarks/generate.py --threads 1 --rounds 3                       # SmolLM2-135M, batch 1 and 8
    python benchmarks/generate.py --model tiny --new-tokens 8 --rounds 1       # seconds: a random 4-layer model
    python benchmarks/generate.py --model tiny --profile                       # where a step's time goes
    python benchmarks/generate.py --device cuda --dtype bfloat16 --batch-sizes 1,8,32

``--model smollm2-135m`` reads the packaged GGUF with ``transformers``' own GGUF reader and converts that
model with ``interp.from_hf``, so both run the very same tensors. This is a measurement script, not a test.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import platform
import pstats
import statistics
import sys
import time
from collections.abc import Callable

import provenance
import torch

import interp
from interp.analysis import steer


def load_models(name: str, device: str = "cpu", dtype: str = "float32"):
    """``(transformers model, interp model)`` holding the same weights, on ``device`` in ``dtype``."""
    import transformers

    transformers.logging.set_verbosity_error()
    if name == "tiny":
        torch.manual_seed(0)
        cfg = transformers.LlamaConfig(
            hidden_size=64,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=128,
            vocab_size=1000,
            max_position_embeddings=512,
        )
        hf = transformers.LlamaForCausalLM(cfg)
    elif name == "smollm2-135m":
        from transformers import AutoConfig, AutoModelForCausalLM
        from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

        from interp.load.packaged import packaged_path

        path = str(packaged_path(name))
        config = AutoConfig.for_model(**load_gguf_checkpoint(path)["config"])
        hf = AutoModelForCausalLM.from_config(config)
        tensors = load_gguf_checkpoint(path, return_tensors=True, model_to_load=hf)["tensors"]
        hf.load_state_dict(tensors, strict=False)
        hf.tie_weights()
    else:
        raise SystemExit(f"--model {name!r}: expected 'smollm2-135m' or 'tiny'")
    hf = hf.eval().to(device=device, dtype=getattr(torch, dtype))
    hf.config._attn_implementation = "sdpa"
    hf.generation_config.eos_token_id = None
    hf.generation_config.pad_token_id = 0
    return hf, interp.from_hf(hf)


def variants(hf, ours, ids: torch.Tensor, new: int, layer: int, vector: torch.Tensor, no_cache: bool):
    """Name -> a function that generates and returns the ``[batch, prompt + new]`` tokens."""
    mask = torch.ones_like(ids)
    vector = vector.to(device=ids.device, dtype=ours.dtype)

    def theirs(use_cache: bool = True, hooked: bool = False) -> Callable[[], torch.Tensor]:
        def run() -> torch.Tensor:
            handle = None
            if hooked:

                def add(module, args, output):
                    if isinstance(output, tuple):
                        return (output[0] + vector, *output[1:])
                    return output + vector

                handle = hf.model.layers[layer].register_forward_hook(add)
            try:
                with torch.no_grad():
                    return hf.generate(
                        input_ids=ids,
                        attention_mask=mask,
                        max_new_tokens=new,
                        do_sample=False,
                        use_cache=use_cache,
                    )
            finally:
                if handle is not None:
                    handle.remove()

        return run

    def mine(use_kv_cache: bool = True, hooked: bool = False) -> Callable[[], torch.Tensor]:
        hooks = [(f"blocks.{layer}.hook_resid_post", steer(vector))] if hooked else []

        def run() -> torch.Tensor:
            return ours.generate(
                ids, new, stop_at_eos=False, fwd_hooks=hooks, use_kv_cache=use_kv_cache
            ).tokens

        return run

    out = {
        "transformers generate": theirs(),
        "ours, no hooks": mine(),
        "ours, one steering hook": mine(hooked=True),
        "transformers, steering forward hook": theirs(hooked=True),
    }
    if no_cache:
        out["ours, no KV cache"] = mine(use_kv_cache=False)
        out["transformers, no KV cache"] = theirs(use_cache=False)
    return out


def measure(fns: dict[str, Callable[[], torch.Tensor]], rounds: int) -> tuple[dict[str, list[float]], dict]:
    names = list(fns)
    outputs = {name: fns[name]() for name in names}  # warm-up, and the tokens to compare
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            start = time.perf_counter()
            fns[name]()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            times[name].append(time.perf_counter() - start)
    return times, outputs


def profile(fn: Callable[[], torch.Tensor], top: int = 25) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    fn()
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
    return text.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m", help="'smollm2-135m' or 'tiny' (random, 4 layers)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--prompt-tokens", type=int, default=16)
    parser.add_argument("--batch-sizes", default="1,8")
    parser.add_argument(
        "--no-cache-batch-sizes", default="1", help="batch sizes that also run without a cache"
    )
    parser.add_argument("--profile", action="store_true", help="print where one generation's time goes")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--out", default=None, help="write the figures as JSON")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    env = provenance.environment(["transformers"])
    hf, ours = load_models(args.model, args.device, args.dtype)
    layer = ours.cfg.n_layers // 2
    vector = torch.randn(ours.cfg.d_model, generator=torch.Generator().manual_seed(0))
    results = []
    for batch in (int(b) for b in args.batch_sizes.split(",")):
        generator = torch.Generator().manual_seed(1)
        ids = torch.randint(3, ours.cfg.d_vocab, (batch, args.prompt_tokens), generator=generator)
        ids = ids.to(args.device)
        no_cache = str(batch) in args.no_cache_batch_sizes.split(",")
        fns = variants(hf, ours, ids, args.new_tokens, layer, vector, no_cache)
        times, outputs = measure(fns, args.rounds)
        if args.profile:  # after the warm-up, so imports and first-call costs are not in it
            print(f"--- ours, no hooks, batch {batch}: one generation of {args.new_tokens} tokens ---")
            print(profile(fns["ours, no hooks"]))
        base = times["transformers generate"]
        same = torch.equal(outputs["ours, no hooks"], outputs["transformers generate"])
        same_steered = torch.equal(
            outputs["ours, one steering hook"], outputs["transformers, steering forward hook"]
        )
        print(f"\n{args.model}, batch {batch}, {args.prompt_tokens} prompt + {args.new_tokens} new tokens")
        print(f"tokens identical: no hooks {same}, steered {same_steered}")
        print(f"{'variant':38s} {'median s':>9s} {'tokens/s':>9s} {'x transformers tok/s':>21s}")
        for name, ts in times.items():
            tps = batch * args.new_tokens / statistics.median(ts)
            ratio = statistics.median(b / t for b, t in zip(base, ts, strict=True))
            print(f"{name:38s} {statistics.median(ts):9.3f} {tps:9.1f} {ratio:21.3f}")
            results.append(dict(batch=batch, variant=name, median_s=statistics.median(ts), tokens_per_s=tps,
                                ratio_to_transformers=ratio, times_s=ts))  # fmt: skip
        if no_cache:
            for side, cached in (("ours", times["ours, no hooks"]), ("transformers", base)):
                full = times[f"{side}, no KV cache"]
                cost = statistics.median(f / c for f, c in zip(full, cached, strict=True))
                print(f"{side}: recomputing the prefix at every step takes {cost:.2f}x the cached time")
                results.append(dict(batch=batch, variant=f"{side}, no-cache / cache", ratio=cost))
    if args.out:
        meta = dict(
            model=args.model,
            threads=args.threads,
            rounds=args.rounds,
            new_tokens=args.new_tokens,
            prompt_tokens=args.prompt_tokens,
            torch=torch.__version__,
            python=platform.python_version(),
        )
        provenance.write_run(args.out, {"meta": meta, "results": results}, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
