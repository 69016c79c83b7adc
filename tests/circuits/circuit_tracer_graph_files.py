"""Run in circuit-tracer's own environment (``tests/reference_envs.py``): hand circuit-tracer an attribution graph
interp saved, as circuit-tracer's own ``Graph`` in its ``.pt`` format, and write its graph files.

    python circuit_tracer_graph_files.py SETTINGS.json OUT_FOLDER

``SETTINGS.json`` names interp's ``graph.safetensors`` (``graph``), the model's shape (``n_layers``,
``d_model``, ``n_heads``, ``d_head``, ``d_mlp``, ``d_vocab``), a tokenizer folder (``tokenizer``), the prompt,
``slug``, ``scan`` and the two pruning thresholds. The graph's nodes are interp's in circuit-tracer's order, so
the tensors carry over as they are: every feature node is an active feature, selected in order. A target with
no token (a direction) gets circuit-tracer's virtual index, ``d_vocab`` plus its place among the targets.
``OUT_FOLDER`` receives ``graph.pt`` and what ``create_graph_files`` writes (``{slug}.json``,
``graph-metadata.json``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from circuit_tracer.attribution.targets import LogitTarget
from circuit_tracer.graph import Graph
from circuit_tracer.utils.create_graph_files import create_graph_files
from circuit_tracer.utils.tl_nnsight_mapping import UnifiedConfig
from safetensors import safe_open
from safetensors.torch import load_file


def main(settings_file: str, out: str) -> None:
    settings = json.loads(Path(settings_file).read_text())
    tensors = load_file(settings["graph"])
    with safe_open(settings["graph"], "pt") as f:
        labels = json.loads(f.metadata()["logit_labels"])
    cfg = UnifiedConfig(
        **{k: settings[k] for k in ("n_layers", "d_model", "d_head", "n_heads", "d_mlp", "d_vocab")},
        tokenizer_name=settings["tokenizer"],
        model_name="tiny",
        original_architecture="LlamaForCausalLM",
    )
    vocab = settings["d_vocab"]
    targets = [
        LogitTarget(token_str=label, vocab_idx=token if token >= 0 else vocab + i)
        for i, (label, token) in enumerate(zip(labels, tensors["logit_tokens"].tolist(), strict=True))
    ]
    n_features = len(tensors["features"])
    graph = Graph(
        input_string=settings["prompt"],
        input_tokens=tensors["input_tokens"],
        active_features=tensors["features"],
        adjacency_matrix=tensors["adjacency"],
        cfg=cfg,
        selected_features=torch.arange(n_features),
        activation_values=tensors["activations"],
        logit_targets=targets,
        logit_probabilities=tensors["logit_probabilities"],
        scan=settings["scan"],
        vocab_size=vocab,
    )
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    graph.to_pt(str(folder / "graph.pt"))
    create_graph_files(
        str(folder / "graph.pt"),
        settings["slug"],
        str(folder),
        scan=settings["scan"],
        node_threshold=settings["node_threshold"],
        edge_threshold=settings["edge_threshold"],
    )


if __name__ == "__main__":
    main(*sys.argv[1:3])
