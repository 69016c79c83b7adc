"""A workbench the page tests share: the packaged SmolLM2 with the server tests' tiny random dictionaries
(:func:`tests.serve.helpers.dictionaries`) and one named folder holding what the home page lists, made by the
library as a user's commands make it: dashboards of the layer-3 SAE (``interp dashboards``), explanations of
three of its features (``interp autointerp``'s rows), and a graph of :data:`PROMPT` traced with the served
transcoders (``interp attribute``, which names the transcoders' folder in the graph)."""

from __future__ import annotations

import json
from pathlib import Path

from interp.circuits import attribute
from interp.feature_id import FeatureId
from interp.sae.dashboards import Settings, write_dashboards
from interp.serve.folders import Folders
from interp.serve.sources import read_dictionary
from tests.serve.helpers import dictionaries, served_with

PROMPT = "The cat sat on the"
LABELS = {5: "cats and dogs", 7: "years and dates in history", 9: "the past tense of verbs"}
"""Explanations of features of the layer-3 SAE (source ``3-res``), by index."""
TEXTS = [
    "The cat sat on the mat.",
    "Dogs and cats are animals.",
    "In 1969 the first people walked on the moon.",
    "She walked home and cooked dinner.",
] * 3


def build(model, root: Path, **settings):
    """``(served, graph)``: the server's state over ``root/work`` and the graph saved there (``work/graph``,
    slug ``cat``)."""
    paths = dictionaries(model, root / "dicts")
    work = root / "work"
    res3 = read_dictionary(paths["res3"], model)
    write_dashboards(model, res3, work, TEXTS, scan="res3", settings=Settings(sample=4))
    rows = [
        {"feature": f"3:{f}", "layer": 3, "index": f, "featureIndex": FeatureId(3, f).index, "scan": "res3",
         "explanation": text}
        for f, text in LABELS.items()
    ]  # fmt: skip
    (work / "explanations.jsonl").write_text(
        "".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8"
    )
    served = served_with(model, paths, folders=Folders([work]), **settings)
    tc = served.transcoders
    graph = attribute(model, tc, PROMPT, max_logits=3, max_feature_nodes=30, progress=False)
    graph.metadata.update(transcoders=served.transcoders_name)  # as interp attribute names them
    graph.save(work / "graph", model=model, transcoders=tc, slug="cat")
    return served, graph
