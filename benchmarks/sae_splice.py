"""What SAEs spliced into a model cost a forward pass, against a cost model of their arithmetic.

The cost model: a spliced forward must do the plain forward's work and, for each SAE, its encode and decode,

- encode: ``(x - b_dec) @ W_enc + b_enc``, ``d_in * d_sae`` multiply-adds a token, then the activation (TopK:
  the ``k`` largest of ``d_sae``, through a ReLU);
- decode: for TopK, ``k`` rows of ``W_dec`` weighted and summed, ``k * d_out`` multiply-adds a token (the code
  has ``k`` active latents); for other activations the dense ``acts @ W_dec + b_dec``, ``d_sae * d_out``.

Nothing else is needed: hook points that nothing hooks, the dense ``[..., d_sae]`` code that nothing reads, and
a second (clean) pass for the error term when no hook edits anything are overhead. The script counts the model
in multiply-adds a token (the model's matmuls: projections, causal attention, MLP, unembedding; the SAEs' encode
and decode), and measures it in the same run as the spliced forwards: ``cost model`` is the plain forward
plus, for every SAE, a bare encode, activation and decode of the activation it reads (cached beforehand).
The figure to watch is each spliced variant's time over the cost model's.

Memory: each variant runs again in a fresh process (``--worker splice``), with glibc's malloc told to map every
block of 128 KiB or more on its own and unmap it when freed (``MALLOC_MMAP_THRESHOLD_``), so that resident memory
follows the live tensors; after a warm-up call the peak resident memory is reset (Linux
``/proc/self/clear_refs``; elsewhere the peak since the warm-up counts) and the script prints the peak above the
memory resident before the call (on CUDA: the peak allocated above the allocated).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

VARIANTS = ("no SAE", "cost model", "spliced", "spliced + error term", "spliced + error term, latents cached")


def build(args: argparse.Namespace, shapes: dict) -> tuple:
    """The random-weight model, a TopK SAE at every ``hook_resid_post``, and the token ids."""
    from interp import HookedTransformer, TransformerConfig
    from interp.sae import SAE, SAEConfig

    torch.set_num_threads(args.threads or torch.get_num_threads())
    cfg = TransformerConfig(**shapes[args.shape], n_ctx=max(args.pos, 128), seed=0)
    model = HookedTransformer(cfg).to(args.device).eval()
    saes = []
    for layer in range(cfg.n_layers):
        sae_cfg = SAEConfig(
            d_in=cfg.d_model, d_sae=args.splice_d_sae, k=args.k, hook_name=f"blocks.{layer}.hook_resid_post"
        )
        sae = SAE(sae_cfg)
        with torch.no_grad():
            for p in sae.parameters():
                p.normal_(0, 0.02)
        saes.append(sae.to(args.device))
    ids = torch.randint(0, cfg.d_vocab, (args.batch, args.pos), generator=torch.Generator().manual_seed(0))
    return model, saes, ids.to(args.device)


def bare_sae(sae, x: torch.Tensor) -> torch.Tensor:
    """The SAE's arithmetic and nothing else: encode, activation, decode (k rows for TopK)."""
    pre = (x - sae.b_dec) @ sae.W_enc + sae.b_enc  # [batch, pos, d_sae]
    if sae.cfg.architecture != "topk":
        return pre.relu() @ sae.W_dec + sae.b_dec
    values, indices = pre.topk(sae.cfg.k, dim=-1, sorted=False)  # [batch, pos, k]
    k = sae.cfg.k
    rows = F.embedding_bag(
        indices.reshape(-1, k), sae.W_dec, per_sample_weights=values.relu().reshape(-1, k), mode="sum"
    )  # [batch * pos, d_out]
    return rows.reshape(*x.shape[:-1], -1) + sae.b_dec


def variants(model, saes, ids) -> dict:
    """Each variant as a function of no arguments; ``cost model`` is the bare SAEs, each on the activation it
    reads (cached beforehand), then the plain forward."""
    names = [sae.cfg.hook_name for sae in saes]
    with torch.no_grad():
        cache = model.run_with_cache(ids, names_filter=names)[1]
    inputs = [cache[name] for name in names]  # [batch, pos, d_model] each

    def cost_model():
        for sae, x in zip(saes, inputs, strict=True):
            bare_sae(sae, x)
        return model(ids)

    def spliced():
        with model.saes(saes):
            return model(ids)

    def with_error():
        with model.saes(saes, use_error_term=True):
            return model(ids)

    def with_error_cached():
        with model.saes(saes, use_error_term=True):
            return model.run_with_cache(ids, names_filter="*.hook_sae_acts_post")

    fns = (lambda: model(ids), cost_model, spliced, with_error, with_error_cached)
    return dict(zip(VARIANTS, fns, strict=True))


def counted(model, saes, pos: int) -> dict:
    """Multiply-adds a token: the model's matmuls (causal attention over ``pos`` positions on average half
    long) and each SAE's encode and decode."""
    c = model.cfg
    attention = c.d_model * c.d_head * 2 * (c.n_heads + c.n_kv_heads) + c.n_heads * c.d_head * (pos + 1)
    mlp = c.d_model * c.d_mlp * (3 if c.mlp == "gated" else 2)
    plain = c.n_layers * (attention + mlp) + c.d_model * c.d_vocab
    encode = sum(s.d_in * s.d_sae for s in saes)
    decode = sum((s.cfg.k if s.cfg.architecture == "topk" else s.d_sae) * s.d_out for s in saes)
    return {"plain": plain, "encode": encode, "decode": decode, "x plain": (plain + encode + decode) / plain}


def timings(args: argparse.Namespace, shapes: dict) -> dict:
    """Median time of each variant over ``--rounds`` rounds in this process, in rotating order."""
    model, saes, ids = build(args, shapes)
    fns = variants(model, saes, ids)
    times: dict[str, list[float]] = {name: [] for name in fns}
    with torch.no_grad():
        for fn in fns.values():
            fn()
        for r in range(args.rounds):
            names = list(fns)[r % len(fns) :] + list(fns)[: r % len(fns)]
            for name in names:
                start = time.perf_counter()
                fns[name]()
                if args.device.startswith("cuda"):
                    torch.cuda.synchronize()
                times[name].append(time.perf_counter() - start)
    plain, cost = statistics.median(times["no SAE"]), statistics.median(times["cost model"])
    out = {
        name: {"median_s": statistics.median(t), "x plain": statistics.median(t) / plain,
               "x cost model": statistics.median(t) / cost}
        for name, t in times.items()
    }  # fmt: skip
    out["counted"] = counted(model, saes, args.pos)
    return out


def _status_mib(field: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def memory_worker(args: argparse.Namespace, shapes: dict, peak_rss_mib) -> None:
    """Run one variant (``--splice-variant``) in this process and print its peak memory above baseline."""
    model, saes, ids = build(args, shapes)
    fn = variants(model, saes, ids)[args.splice_variant]
    cuda = args.device.startswith("cuda")
    with torch.no_grad():
        fn()
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
        else:
            try:
                Path("/proc/self/clear_refs").write_text("5")  # reset the peak to the current resident size
                base = _status_mib("VmRSS")
            except OSError:
                base = None
            base = peak_rss_mib() if base is None else base
        fn()
        if cuda:
            torch.cuda.synchronize()
            growth = (torch.cuda.max_memory_allocated() - base) / 2**20
        else:
            peak = _status_mib("VmHWM")
            growth = (peak_rss_mib() if peak is None else peak) - base
    print(json.dumps({"peak_growth_mib": growth}))


def memory(args: argparse.Namespace, script: str) -> dict:
    """Each variant's peak memory above baseline, from a fresh process per variant."""
    out = {}
    for name in VARIANTS:
        cmd = [sys.executable, script, "--worker", "splice", "--splice-variant", name, *sys.argv[1:]]
        env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            out[name] = None
            print(f"  memory of {name!r} failed: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            continue
        out[name] = json.loads(done.stdout.strip().splitlines()[-1])["peak_growth_mib"]
    return out


def report(args: argparse.Namespace, shapes: dict, script: str) -> dict:
    """Time the variants in one process, measure their memory in one process each, and print both."""
    result = timings(args, shapes)
    mib = memory(args, script)
    n = result["counted"]
    print(f"splicing: {args.shape}, {args.batch} x {args.pos} tokens, a TopK SAE (d_sae={args.splice_d_sae}, "
          f"k={args.k}) at every hook_resid_post, median of {args.rounds} rounds")  # fmt: skip
    print(f"  counted, multiply-adds a token: the model {n['plain'] / 1e6:.2f} M, the SAEs' encode "
          f"{n['encode'] / 1e6:.2f} M and decode {n['decode'] / 1e6:.3f} M: the cost model is "
          f"{n['x plain']:.2f} x the plain forward")  # fmt: skip
    for name in VARIANTS:
        r = result[name]
        peak = "failed" if mib[name] is None else f"+{mib[name]:.0f} MiB"
        r["peak_growth_mib"] = mib[name]
        print(f"  {name:38s} {r['median_s'] * 1e3:9.1f} ms  {r['x plain']:5.2f} x no SAE  "
              f"{r['x cost model']:5.2f} x cost model  peak {peak}")  # fmt: skip
    return result
