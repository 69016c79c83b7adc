"""A model split between devices computes what it computes on one: logits, cache and greedy tokens; time per token.

Three placements of the same checkpoint: whole on ``--device``; the first half of the blocks there and the rest
in CPU memory (accelerate's ``"cpu"``: on a GPU machine those blocks' weights are copied to the GPU for each
forward); and the last quarter on disk besides. On a CPU-only machine ``--device cpu`` runs the same check with
the CPU and disk. The logits, every cached activation (gathered on the CPU) and the greedy tokens must match
the whole model's to ``--rtol`` of each tensor's largest magnitude (bfloat16 tolerance by default); the time
per generated token of each placement is printed, with its ratio to the whole model's, measured in this run.

    python scripts/device_split.py --device cuda --dtype bfloat16
    python scripts/device_split.py --device cpu --dtype float32 --new-tokens 8     # anywhere, a minute

Exit status 1 when a placement disagrees. This is a check script, not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time

import torch

import interp

PROMPTS = ["The capital of France is", "def fibonacci(n):\n    "]


def placements(n_layers: int, device: str) -> dict[str, dict[str, int | str]]:
    """Device maps of the split placements, by name."""
    home: int | str = 0 if device.startswith("cuda") else "cpu"
    half, quarter = n_layers // 2, n_layers - n_layers // 4
    ends = {"embed": home, "ln_final": home, "unembed": home}
    split = {**ends, **{f"blocks.{i}": home if i < half else "cpu" for i in range(n_layers)}}
    disk = {**split, **{f"blocks.{i}": "disk" for i in range(quarter, n_layers)}}
    return {"split-cpu": split, "split-cpu-disk": disk} if home != "cpu" else {"split-cpu-disk": disk}


def worst(got: torch.Tensor, want: torch.Tensor) -> float:
    """``max |got - want|`` relative to ``max |want|``."""
    got, want = got.float().cpu(), want.float().cpu()
    return float((got - want).abs().max() / want.abs().max().clamp(min=1e-6))


def per_token(model, tokens: torch.Tensor, new: int, device: str) -> tuple[float, torch.Tensor]:
    """Seconds per generated token of greedy decoding with the KV cache, and the tokens."""
    model.generate(tokens, 2)  # warm-up: kernels, allocator, accelerate's first load
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    out = model.generate(tokens, new)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / new, out.tokens.cpu()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--rtol", type=float, default=2e-2, help="of each tensor's largest magnitude")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    args = parser.parse_args(argv)

    whole = interp.load(args.model, device=args.device, dtype=args.dtype)
    ids, _ = whole.to_tokens(PROMPTS[:1])
    with torch.no_grad():
        logits, cache = whole.run_with_cache(ids, device="cpu")
    seconds, tokens = per_token(whole, ids, args.new_tokens, args.device)
    rows = {"whole": {"s_per_token": seconds, "ratio": 1.0}}
    failed = False
    for name, device_map in placements(whole.cfg.n_layers, args.device).items():
        with tempfile.TemporaryDirectory() as folder:
            model = interp.load(args.model, dtype=args.dtype, device_map=device_map, offload_folder=folder)
            with torch.no_grad():
                got, got_cache = model.run_with_cache(ids, device="cpu")
            far = max(worst(got_cache[k], cache[k]) for k in cache)
            assert all(t.device.type == "cpu" for t in got_cache.values())
            kv_devices = _kv_devices(model, ids)
            seconds, got_tokens = per_token(model, ids, args.new_tokens, args.device)
            del model
        row = {
            "logits": worst(got, logits),
            "cache": far,
            "same_tokens": bool(torch.equal(got_tokens, tokens)),
            "kv_devices": kv_devices,
            "s_per_token": seconds,
            "ratio": seconds / rows["whole"]["s_per_token"],
        }
        rows[name] = row
        ok = row["logits"] <= args.rtol and row["cache"] <= args.rtol and row["same_tokens"]
        failed |= not ok
        print(
            f"{name:>15}: logits {row['logits']:.2e}, cache {row['cache']:.2e} (of the largest magnitude), "
            f"tokens {'same' if row['same_tokens'] else 'DIFFERENT'}, KV cache on {kv_devices}; "
            f"{1000 * seconds:.1f} ms/token, {row['ratio']:.2f}x the whole model's  {'ok' if ok else 'FAILED'}"
        )
    print(f"{'whole':>15}: {1000 * rows['whole']['s_per_token']:.1f} ms/token on {args.device}, {args.dtype}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(
                {"model": args.model, "device": args.device, "dtype": args.dtype, "rows": rows}, f, indent=1
            )
    return 1 if failed else 0


def _kv_devices(model, ids: torch.Tensor) -> list[str]:
    """The device of each layer's cached keys after one forward with a KV cache."""
    from interp.model.kv_cache import KVCache

    kv = KVCache(model.cfg.n_layers)
    with torch.no_grad():
        model(ids, kv_cache=kv)
    return sorted({str(k.device) for k in kv.keys if k is not None})


if __name__ == "__main__":
    sys.exit(main())
