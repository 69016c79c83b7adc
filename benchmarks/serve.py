"""``interp serve`` under load: what an endpoint costs over the library call it wraps, many clients at once, and the
folder listing a home page reads.

1. **Overhead.** On the packaged SmolLM2 with random transcoders at every layer, each of ``activation/all``,
   ``steer/completion`` and ``/generate-graph`` is timed as a client sees it (an HTTP round trip to a server on
   loopback, JSON and queue included) and as the library call it wraps (``feature_activations`` of every layer
   plus the ranking's sort; ``generate`` with the steering hook; ``attribute`` plus ``graph_json``), alternating
   within each round, same threads; each ratio is the median of per-round ratios.
2. **Clients at once.** ``--clients`` threads send a mix of requests (tokenize, activation single/all,
   topk-by-token, steering, sae-vector, decoder cosine, graphs) for ``--duration`` seconds: every request sent
   must be answered 200; the process's resident memory is sampled every half second: after the first quarter
   (warm-up), its level at rest (the least of each quarter) must stay flat, and its peaks (a request's working
   memory) stay below the model's size, so no second copy of the model is ever made.
3. **Listing.** ``--graphs`` graphs and ``--scans`` dashboard scans in the named folders: the server's time to
   list them (``Folders.catalogue``) and the round trip of ``GET /api/folders``.

    python benchmarks/serve.py --threads 1 --out benchmarks/results/serve-cpu.json
    python benchmarks/serve.py --duration 10 --rounds 2                 # a quick look

This is a measurement script, not a test.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path

import provenance
import torch

import interp
from interp.analysis.feature_activations import feature_activations
from interp.analysis.steering import steer
from interp.circuits.features import attribute
from interp.circuits.features.neuronpedia import graph_json
from interp.sae import TranscoderSet
from interp.serve import Limits, Served, Sources, serving
from interp.serve.folders import Folders

PROMPT = "The cat sat on the mat because it was tired, and the dog"


def transcoders(cfg, width: int, seed: int = 0) -> TranscoderSet:
    """Random skip transcoders at every layer, a third of their features active at a position."""
    g = torch.Generator().manual_seed(seed)
    n, d = cfg.n_layers, cfg.d_model
    return TranscoderSet(
        torch.randn(n, width, d, generator=g) / d**0.5,
        torch.randn(n, width, d, generator=g) / width**0.5,
        -0.4 - 0.2 * torch.rand(n, width, generator=g),
        0.1 * torch.randn(n, d, generator=g),
        W_skip=0.3 * torch.randn(n, d, d, generator=g) / d**0.5,
        input_site="ln2.hook_normalized",
    )


def post(url: str, path: str, payload: dict) -> tuple[int, bytes]:
    host, port = url.split("//")[1].split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=600)
    try:
        connection.request("POST", path, json.dumps(payload), {"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def get(url: str, path: str) -> tuple[int, bytes]:
    host, port = url.split("//")[1].split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=600)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def requests(model_id: str, n_tokens: int, max_nodes: int) -> dict[str, tuple[str, dict]]:
    """The endpoints measured, as ``name -> (route, body)``."""
    steer_body = {
        "prompt": PROMPT,
        "model": model_id,
        "steer_method": "SIMPLE_ADDITIVE",
        "normalize_steering": False,
        "types": ["STEERED"],
        "features": [{"model": model_id, "source": "6-tc", "index": 3, "strength": 8.0}],
        "n_completion_tokens": n_tokens,
        "temperature": 0,
        "strength_multiplier": 1,
        "freq_penalty": 0,
        "seed": 0,
    }
    return {
        "activation/all": (
            "/v1/activation/all",
            {
                "prompt": PROMPT,
                "model": model_id,
                "source_set": "tc",
                "selected_sources": [],
                "sort_by_token_indexes": [],
                "ignore_bos": True,
                "num_results": 25,
            },
        ),
        "steer/completion": ("/v1/steer/completion", steer_body),
        "generate-graph": (
            "/generate-graph",
            {
                "prompt": PROMPT,
                "model_id": model_id,
                "max_n_logits": 5,
                "batch_size": 64,
                "max_feature_nodes": max_nodes,
                "slug_identifier": "bench",
            },
        ),
    }


def library_calls(served: Served, n_tokens: int, max_nodes: int) -> dict:
    """What each endpoint wraps, called directly."""
    model, tc = served.model, served.transcoders
    bos_ids = model.to_tokens(PROMPT, prepend_bos=True).ids[0]
    row = tc.decoder(6, torch.tensor([3]))[0, 0]

    def activation_all():
        acts = feature_activations(model, tc, bos_ids)
        keys = torch.cat([a.max(0).values for a in acts.values()])
        return torch.sort(keys, descending=True, stable=True).indices[:25]

    def completion():
        return model.generate(bos_ids, n_tokens, fwd_hooks=[(tc.output_hook(6), steer(row, 8.0))]).text

    def graph():
        g = attribute(
            model, tc, PROMPT, max_logits=5, batch_size=64, max_feature_nodes=max_nodes, progress=False
        )
        return graph_json(g, slug="bench", vocab=model.cfg.d_vocab)

    return {"activation/all": activation_all, "steer/completion": completion, "generate-graph": graph}


def overhead(url: str, served: Served, rounds: int, n_tokens: int, max_nodes: int) -> dict:
    calls, asked = library_calls(served, n_tokens, max_nodes), requests(served.model_id, n_tokens, max_nodes)
    out = {}
    for name, fn in calls.items():
        route, body = asked[name]
        assert post(url, route, body)[0] == 200
        fn()  # warm both
        ratios, library, endpoint = [], [], []
        for r in range(rounds):
            order = [0, 1] if r % 2 == 0 else [1, 0]
            times = [0.0, 0.0]
            for which in order:
                start = time.perf_counter()
                if which == 0:
                    fn()
                else:
                    status, _ = post(url, route, body)
                    assert status == 200
                times[which] = time.perf_counter() - start
            library.append(times[0])
            endpoint.append(times[1])
            ratios.append(times[1] / times[0])
        out[name] = {
            "ratio_median": statistics.median(ratios),
            "ratios": ratios,
            "library_s": library,
            "endpoint_s": endpoint,
        }
        print(f"{name:18s} endpoint / library {statistics.median(ratios):.3f}x "
              f"(library median {statistics.median(library) * 1000:.0f} ms)")  # fmt: skip
    return out


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def clients(url: str, served: Served, n_clients: int, duration: float, n_tokens: int, max_nodes: int) -> dict:
    model_id = served.model_id
    asked = requests(model_id, n_tokens, max_nodes)
    mix = [
        ("/v1/tokenize", {"model": model_id, "text": PROMPT}),
        ("/v1/activation/single", {"prompt": PROMPT, "model": model_id, "source": "3-tc", "index": "5"}),
        asked["activation/all"],
        ("/v1/activation/topk-by-token", {"prompt": PROMPT, "model": model_id, "source": "9-tc", "ignore_bos": True}),
        asked["steer/completion"],
        ("/v1/util/sae-vector", {"model": model_id, "source": "2-tc", "index": 7}),
        ("/v1/util/sae-topk-by-decoder-cossim", {"model": model_id, "source": "2-tc", "num_results": 10,
                                                 "vector": [0.1] * 576}),
        asked["generate-graph"],
    ]  # fmt: skip
    sent, answered, errors, by_route = [0], [0], [], {}
    lock, stop = threading.Lock(), time.monotonic() + duration
    samples: list[tuple[float, int]] = []

    def client(seed: int) -> None:
        rng = random.Random(seed)
        while time.monotonic() < stop:
            route, body = rng.choice(mix)
            name = route.lstrip("/")  # stored runs hold no string starting with "/"
            with lock:
                sent[0] += 1
            try:
                status, reply = post(url, route, body)
            except OSError as err:
                with lock:
                    errors.append(f"{name}: {err}")
                continue
            with lock:
                answered[0] += 1
                by_route[route.lstrip("/")] = (
                    by_route.get(route.lstrip("/"), 0) + 1
                )  # stored runs hold no "/..."
                if status != 200:
                    errors.append(f"{name}: {status} {reply[:200]!r}")

    def sampler() -> None:
        start = time.monotonic()
        while time.monotonic() < stop:
            samples.append((time.monotonic() - start, _rss()))
            time.sleep(0.5)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n_clients)]
    watch = threading.Thread(target=sampler)
    start = time.monotonic()
    for t in [*threads, watch]:
        t.start()
    for t in [*threads, watch]:
        t.join()
    elapsed = time.monotonic() - start
    warm = [rss for t, rss in samples if t >= duration / 4]
    model_bytes = sum(p.numel() * p.element_size() for p in served.model.parameters())
    rise = max(warm) - warm[0] if warm else 0
    quarter = max(
        1, len(warm) // 4
    )  # memory at rest: the least of a window, between one request's peak and the next
    floors = (min(warm[:quarter]), min(warm[-quarter:])) if warm else (0, 0)
    result = {
        "clients": n_clients,
        "seconds": elapsed,
        "sent": sent[0],
        "answered": answered[0],
        "errors": errors[:20],
        "n_errors": len(errors),
        "by_route": by_route,
        "rss_after_warmup_mb": warm[0] / 2**20 if warm else None,
        "rss_rise_after_warmup_mb": rise / 2**20,
        "rss_at_rest_first_quarter_mb": floors[0] / 2**20,
        "rss_at_rest_last_quarter_mb": floors[1] / 2**20,
        "model_mb": model_bytes / 2**20,
        "rss_samples_mb": [round(rss / 2**20, 1) for _, rss in samples],
    }
    print(f"{n_clients} clients, {elapsed:.0f} s: {sent[0]} sent, {answered[0]} answered, {len(errors)} errors; "
          f"resident memory at rest {floors[0] / 2**20:.1f} MB after warm-up, {floors[1] / 2**20:.1f} MB at the end; "
          f"peaks {rise / 2**20:.0f} MB above (a request's working memory; "
          f"the model is {model_bytes / 2**20:.0f} MB)")  # fmt: skip
    return result


def listing(url: str, root: Path, folders: Folders, n_graphs: int, n_scans: int, rounds: int) -> dict:
    for i in range(n_graphs):
        folder = root / "graphs" / f"g{i // 10}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "graph-metadata.json"
        listed = json.loads(path.read_text()) if path.exists() else {"graphs": []}
        listed["graphs"].append({"slug": f"graph-{i}", "scan": "tc", "prompt": PROMPT, "node_threshold": 0.8})
        path.write_text(json.dumps(listed))
        (folder / f"graph-{i}.json").write_text("{}")
    for i in range(n_scans):
        scan = root / "dashboards" / "features" / f"scan-{i}"
        scan.mkdir(parents=True)
        (scan / "run.json").write_text(json.dumps({"model": "smollm2-135m"}))
        (scan / "index.json").write_text(
            json.dumps({"features": [{"layer": 0, "feature": j} for j in range(1000)]})
        )
    server, trips = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        found = folders.catalogue()
        server.append(time.perf_counter() - start)
        start = time.perf_counter()
        status, body = get(url, "/api/folders")
        trips.append(time.perf_counter() - start)
        assert status == 200 and json.loads(body) == found
    counted = sum(len(f["graphs"]) for f in found["folders"]), sum(len(f["scans"]) for f in found["folders"])
    assert counted == (n_graphs, n_scans), counted
    print(f"listing {n_graphs} graphs and {n_scans} scans: server {statistics.median(server) * 1000:.1f} ms, "
          f"round trip {statistics.median(trips) * 1000:.1f} ms (medians)")  # fmt: skip
    return {"graphs": n_graphs, "scans": n_scans, "server_s": server, "round_trip_s": trips}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads, for the library calls and the server"
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the overhead and listing timings")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of the clients' run")
    parser.add_argument("--clients", type=int, default=16, help="clients at once")
    parser.add_argument("--width", type=int, default=512, help="features per layer of the transcoders")
    parser.add_argument("--new-tokens", type=int, default=8, help="tokens per steered completion")
    parser.add_argument("--max-feature-nodes", type=int, default=64, help="feature nodes per graph")
    parser.add_argument("--graphs", type=int, default=100, help="graphs in the listed folders")
    parser.add_argument("--scans", type=int, default=20, help="dashboard scans in the listed folders")
    parser.add_argument("--out", default=None, help="append this run to a JSON file (benchmarks/results/...)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    env = provenance.environment(["fastapi", "uvicorn", "pydantic"])
    model = interp.load("smollm2-135m")
    tc = transcoders(model.cfg, args.width)
    figures: dict = {"settings": {k: v for k, v in vars(args).items() if k != "out"}}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "graphs").mkdir()
        (root / "dashboards").mkdir()
        folders = Folders([root / "graphs", root / "dashboards"])
        limits = Limits(max_waiting=max(64, 2 * args.clients))
        served = Served(
            model, "smollm2-135m", Sources([("tc", tc)]), transcoders=tc, folders=folders, limits=limits
        )
        with serving(served) as url:
            figures["overhead"] = overhead(url, served, args.rounds, args.new_tokens, args.max_feature_nodes)
            figures["clients"] = clients(
                url, served, args.clients, args.duration, args.new_tokens, args.max_feature_nodes
            )
            figures["listing"] = listing(url, root, folders, args.graphs, args.scans, args.rounds)
    if args.out:
        provenance.write_run(args.out, figures, env)


if __name__ == "__main__":
    main()
