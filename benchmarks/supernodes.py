"""Wall time of proposing supernodes for a graph of ``--features`` feature nodes (2,000 by default).

The graph is random (``--layers`` layers, ``--positions`` positions, about a tenth of the allowed edges present)
with random transcoders of ``--d-model``; it is timed twice: with the default criterion (few pairs qualify, the
usual case) and with every pair at one position allowed (``decoder_cosine=-1``, ``effect_cosine=0``: the most
groups, the most work for the tolerance). It prints the seconds, the groups and the influence kept, and with
``--out`` appends them to a JSON file of runs (with the versions, threads and load).

    python benchmarks/supernodes.py --threads 1 --out benchmarks/results/supernodes-cpu.json

This is a measurement script, not a test.
"""

from __future__ import annotations

import argparse
import time

import provenance
import torch

from interp.circuits import AttributionGraph
from interp.circuits.features.supernodes import propose_supernodes
from interp.sae.transcoder import TranscoderSet


def random_graph(n_features: int, layers: int, positions: int, d_model: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    per = n_features // (layers * (positions - 1)) + 1
    cells = [(lay, p, k) for lay in range(layers) for p in range(1, positions) for k in range(per)]
    features = torch.tensor(cells)[:n_features]
    n_logits = 5
    layer_of = torch.cat(
        [
            features[:, 0],
            torch.arange(layers).repeat_interleave(positions),
            torch.full((positions,), -1),
            torch.full((n_logits,), layers),
        ]
    )
    n = len(layer_of)
    allowed = (layer_of[:, None] > layer_of[None, :]) & (torch.rand(n, n, generator=g) < 0.1)
    adjacency = torch.randn(n, n, generator=g) * allowed
    adjacency[n_features : n - n_logits] = 0  # nothing is attributed into errors and tokens
    graph = AttributionGraph(
        adjacency=adjacency,
        features=features,
        activations=torch.ones(n_features),
        input_tokens=torch.arange(positions),
        logit_tokens=torch.arange(n_logits),
        logit_probabilities=torch.full((n_logits,), 0.19),
        n_layers=layers,
    )
    d_tc = 4 * d_model
    tc = TranscoderSet(
        torch.randn(layers, d_tc, d_model, generator=g),
        torch.randn(layers, d_tc, d_model, generator=g),
        torch.zeros(layers, d_tc),
        torch.zeros(layers, d_model),
    )
    return graph, tc


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--features", type=int, default=2000)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--positions", type=int, default=20)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=None, help="append the results to this JSON file of runs")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    env = provenance.environment()
    rows = []
    graph, tc = random_graph(args.features, args.layers, args.positions, args.d_model)
    for label, criterion in (
        ("default criterion", {}),
        ("every pair allowed", {"decoder_cosine": -1.0, "effect_cosine": 0.0}),
    ):
        start = time.perf_counter()
        proposal = propose_supernodes(graph, tc, **criterion)
        seconds = time.perf_counter() - start
        rows.append({"criterion": label, "seconds": seconds, "groups": len(proposal.groups),
                     "units": proposal.n_units, "influence_kept": proposal.influence_kept})  # fmt: skip
        print(
            f"{len(graph.nodes)} nodes ({graph.n_features} features), {label}: {seconds:.2f} s, "
            f"{len(proposal.groups)} groups, {proposal.n_units} units, influence kept {proposal.influence_kept:.3f}"
        )
    if args.out:
        figures = {"features": args.features, "layers": args.layers, "positions": args.positions,
                   "d_model": args.d_model, "threads": args.threads, "nodes": len(graph.nodes),
                   "rows": rows}  # fmt: skip
        provenance.write_run(args.out, figures, env)


if __name__ == "__main__":
    main()
