"""A lazy cross-layer transcoder (decoder rows read from its files) spliced into a model, against a loaded one
and against the cost model of a spliced forward, in one process.

A random Llama-shaped model (``--layers``, ``--d-model``) and a random ReLU CLT of ``--features`` features a
layer, about ``--active`` of them active at a position, written as a circuit-tracer CLT folder and read back
twice: loaded (``lazy=False``) and lazy (its decoder cache at its default cap, or ``--cache-mib``). Timed per
round, the variants in rotating order, each a forward of ``--batch`` prompts of ``--pos`` tokens under
``torch.no_grad``:

- ``plain``: the model alone;
- ``cost model``: the plain forward plus the bare arithmetic of the CLT: per layer the encoder product, its bias
  and ReLU; per (source, output) layer pair the active features' decoder rows gathered from an in-memory
  tensor and multiplied by their activations (the activations are those of the spliced forward, computed
  beforehand); per output layer the bias. Nothing else is needed;
- ``loaded``: the loaded CLT spliced; ``lazy, first call``: the lazy CLT spliced with its cache emptied (every
  row it needs read from the files), ``lazy``: again, warm;

and the attribution graph of the first prompt (``interp.circuits.attribute``) on the lazy CLT (warm) over that on
the loaded one. Times are the process's CPU time (one thread: the work's own time, whatever else the machine
runs); the wall times are in the JSON too. The figures are medians of per-round ratios with their spread.

    python benchmarks/lazy_clt.py --threads 1 --rounds 5 --out benchmarks/results/lazy-clt-cpu.json

This is a measurement script, not a test.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import provenance
import torch

ROOT = Path(__file__).resolve().parents[1]


def clock(fn) -> tuple[float, float, object]:
    """``(cpu seconds, wall seconds, result)`` of ``fn()``."""
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn()
    return time.process_time() - cpu, time.perf_counter() - wall, out


def build(args: argparse.Namespace, folder: Path):
    import interp
    from interp.sae import load_transcoders, save_transcoders
    from interp.sae.transcoder import CrossLayerTranscoder

    n, d, f = args.layers, args.d_model, args.features
    cfg = interp.TransformerConfig(
        n_layers=n, d_model=d, n_heads=max(1, d // 64), d_vocab=2048, n_ctx=max(64, args.pos), d_mlp=4 * d,
        norm="rmsnorm", positional="rotary", mlp="gated", seed=0,
    )  # fmt: skip
    model = interp.HookedTransformer(cfg).eval()
    g = torch.Generator().manual_seed(1)
    threshold = math.sqrt(2) * torch.erfinv(torch.tensor(1 - 2 * args.active)).item()
    clt = CrossLayerTranscoder(
        torch.randn(n, f, d, generator=g) / math.sqrt(d),
        [torch.randn(f, n - i, d, generator=g) / math.sqrt(f * args.active * n) for i in range(n)],
        torch.full((n, f), -threshold),
        torch.zeros(n, d),
        input_site="ln2.hook_normalized",
    )
    save_transcoders(clt, folder)
    loaded = load_transcoders(folder, model=model, lazy=False)
    lazy = load_transcoders(folder, model=model)
    if args.cache_mib is not None:
        lazy.decoder_cache.max_bytes = args.cache_mib * 2**20
    return model, loaded, lazy


class CostModel:
    """The bare arithmetic of a spliced CLT forward (see the module docstring), on the activations of one."""

    def __init__(self, model, clt, ids: torch.Tensor) -> None:
        self.model, self.ids = model, ids
        self.w_enc, self.b_enc, self.b_dec = clt.W_enc.detach(), clt.b_enc.detach(), clt.b_dec.detach()
        self.w_dec = [w.detach() for w in clt.W_dec]
        with torch.no_grad(), model.transcoders(clt):
            _, cache = model.run_with_cache(ids, names_filter="*.hook_sae_acts_post")
        acts = {s: cache[clt.output_hook(s) + ".hook_sae_acts_post"] for s in clt.layers}
        self.inputs = {s: torch.randn(*ids.shape, clt.d_model) for s in clt.layers}  # any input of the shape
        self.acts = acts
        self.active = {s: a.reshape(-1, a.shape[-1]).any(0).nonzero()[:, 0] for s, a in acts.items()}

    @torch.no_grad()
    def __call__(self) -> None:
        self.model(self.ids)
        n = len(self.w_enc)
        for s in range(n):
            torch.relu(torch.addmm(self.b_enc[s], self.inputs[s].flatten(0, 1), self.w_enc[s].T))
        for out in range(n):
            total = self.b_dec[out].expand(*self.ids.shape, -1)
            for s in range(out + 1):
                rows = self.w_dec[s][self.active[s], out - s]  # [m, d_model]
                total = total + self.acts[s].index_select(-1, self.active[s]) @ rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--features", type=int, default=4096)
    p.add_argument("--active", type=float, default=0.01, help="the share of features active at a position")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--pos", type=int, default=32)
    p.add_argument("--graph-pos", type=int, default=16, help="tokens of the attribution graph's prompt")
    p.add_argument("--cache-mib", type=int, default=None, help="the lazy CLT's cache cap (default: its own)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    sys.path.insert(0, str(ROOT))
    from interp.circuits import attribute

    env = provenance.environment()
    with tempfile.TemporaryDirectory() as tmp:
        model, loaded, lazy = build(args, Path(tmp) / "clt")
        ids = torch.randint(
            0, model.cfg.d_vocab, (args.batch, args.pos), generator=torch.Generator().manual_seed(2)
        )
        graph_ids = ids[0, : args.graph_pos]
        cost = CostModel(model, loaded, ids)

        def spliced(clt):
            def run():
                with torch.no_grad(), model.transcoders(clt):
                    return model(ids)

            return run

        def cold():
            lazy.decoder_cache.clear()
            return spliced(lazy)()

        def graph(clt):
            return lambda: attribute(model, clt, graph_ids, batch_size=64, progress=False)

        variants = {
            "plain": lambda: model(ids),
            "cost model": cost,
            "loaded": spliced(loaded),
            "lazy, first call": cold,
            "lazy": spliced(lazy),
        }
        with torch.no_grad():
            want = spliced(loaded)()
            assert torch.equal(spliced(lazy)(), want), "the lazy CLT's forward differs from the loaded one's"
        g_loaded, g_lazy = graph(loaded)(), graph(lazy)()
        assert torch.equal(g_loaded.adjacency, g_lazy.adjacency), "the graphs differ"
        rounds = []
        for r in range(args.rounds):
            names = list(variants)
            names = names[r % len(names) :] + names[: r % len(names)]
            times = {}
            for name in names:
                with torch.no_grad():
                    cpu, wall, _ = clock(variants[name])
                times[name] = {"seconds": cpu, "wall_seconds": wall}
            for name, clt in (("graph, loaded", loaded), ("graph, lazy", lazy)):
                cpu, wall, _ = clock(graph(clt))
                times[name] = {"seconds": cpu, "wall_seconds": wall}
            t = {k: v["seconds"] for k, v in times.items()}
            ratios = {
                "loaded / cost model": t["loaded"] / t["cost model"],
                "lazy / cost model": t["lazy"] / t["cost model"],
                "lazy first call / cost model": t["lazy, first call"] / t["cost model"],
                "graph lazy / loaded": t["graph, lazy"] / t["graph, loaded"],
            }
            rounds.append({"times": times, "ratios": ratios, "load": os.getloadavg()[0]})
            print(f"round {r + 1}: " + ", ".join(f"{k} {v:.3f}" for k, v in ratios.items()))
        cache = lazy.decoder_cache
        summary = {
            k: {
                "median": statistics.median(r["ratios"][k] for r in rounds),
                "min": min(r["ratios"][k] for r in rounds),
                "max": max(r["ratios"][k] for r in rounds),
            }
            for k in rounds[0]["ratios"]
        }
        for k, v in summary.items():
            print(f"{k}: median {v['median']:.3f} ({v['min']:.3f}-{v['max']:.3f})")
        print(f"cache: {cache.nbytes / 2**20:.1f} MiB kept of a {cache.max_bytes / 2**20:.0f} MiB cap")
        results = {
            "args": vars(args),
            "rounds": rounds,
            "summary": summary,
            "cache_mib": cache.nbytes / 2**20,
            "cache_cap_mib": cache.max_bytes / 2**20,
            "active_rows": {s: len(a) for s, a in cost.active.items()},
            "graph_nodes": int(g_lazy.adjacency.shape[0]),
        }
    if args.out:
        provenance.write_run(args.out, results, env)


if __name__ == "__main__":
    main()
