"""Scores, an evaluation and exact patches of a tiny model, as one process or under torchrun (rank 0 saves)."""

import sys

import torch

from interp import distributed
from interp.circuits import eap_ig, evaluate, exact_edge_scores, logit_difference, top_n
from tests.circuits.models import tiny, tiny_pairs


def compute() -> dict:
    model = tiny("llama-gqa")
    pairs = tiny_pairs(model, n=7)
    scores = eap_ig(model, pairs, logit_difference, steps=2, batch_size=2)
    circuit = top_n(scores, 15)
    result = evaluate(model, [circuit], pairs, logit_difference, batch_size=2)
    exact = exact_edge_scores(model, pairs, logit_difference, circuit.edges[:5], batch_size=2)
    return {
        "scores": scores.scores,
        "metrics": (scores.clean_metric, scores.corrupt_metric),
        "evaluation": (result.full, result.corrupt, result.values),
        "exact": exact.scores,
    }


if __name__ == "__main__":
    torch.set_num_threads(1)
    with distributed.session():
        out = compute()
        if distributed.rank() == 0:
            torch.save(out, sys.argv[1])
