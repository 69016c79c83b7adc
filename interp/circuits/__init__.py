"""Circuit discovery: the edge graph of a model, edge attribution, exact edge patching, selection, faithfulness.

One concern per module:

- :mod:`~interp.circuits.graph`: nodes (``input``, ``L{l}.H{h}``, ``L{l}.MLP``, or a mixture of experts'
  ``L{l}.E{e}`` and ``L{l}.SE``, ``logits``), their inputs (``L{l}.H{h}.q``, ``L{l}.KV{g}.k``, ``L{l}.KV{g}.v``,
  ``L{l}.MLP``, ``logits``) and the edges between them, as data; :mod:`~interp.circuits.circuit`: a set of edges.
- :mod:`~interp.circuits.pairs`: clean and corrupted inputs, the batch a metric sees (the metric type and
  :func:`logit_difference` are :mod:`interp.analysis.metric`'s, one for every caller).
- :mod:`~interp.circuits.patched_run`: the model with every edge outside a circuit patched from the corrupted input.
- :mod:`~interp.circuits.edge_attribution`: EAP and EAP-IG scores; :mod:`~interp.circuits.exact`: exact edge
  patching, to check them.
- :mod:`~interp.circuits.select`: top-n and greedy circuits, pruned to paths from input to logits.
- :mod:`~interp.circuits.faithfulness`: faithfulness, its curve against size, MIB's CPR and CMD.
- :mod:`~interp.circuits.draw`: the circuit as a layered figure.
- :mod:`~interp.circuits.features`: attribution graphs of transcoder features (:func:`attribute`,
  :class:`AttributionGraph`).

Every graph names its nodes with :class:`Node` (:mod:`interp.analysis.node`), the values that also name the
parts of a decomposed stream.

Example (see the README for a whole run)::

    pairs = Pairs(clean=clean_ids, corrupt=corrupt_ids, labels={"answer": she, "foil": he})
    scores = eap_ig(model, pairs, logit_difference)            # [n_sources, n_inputs] scores
    circuit = top_n(scores, 200)                                 # pruned to input -> logits paths
    evaluate(model, circuit, held_out, logit_difference).faithfulness
"""

from interp.analysis.node import Node
from interp.circuits.circuit import Circuit
from interp.circuits.draw import draw_circuit
from interp.circuits.edge_attribution import EdgeScores, eap, eap_ig, edge_attribution, merge_scores
from interp.circuits.exact import exact_edge_scores
from interp.circuits.faithfulness import (
    MIB_FRACTIONS,
    Evaluation,
    area_metrics,
    evaluate,
    faithfulness,
    faithfulness_curve,
)
from interp.circuits.features import (
    AttributionGraph,
    FeatureEdit,
    Target,
    attribute,
    generate_with_features,
    intervene,
)
from interp.circuits.graph import Graph, GraphStructureError, UnknownNameError
from interp.circuits.pairs import Metric, Pairs, logit_difference
from interp.circuits.patched_run import CorruptRun, corrupt_run, run_circuit
from interp.circuits.select import greedy, prune, top_n

__all__ = [
    "MIB_FRACTIONS",
    "AttributionGraph",
    "Circuit",
    "CorruptRun",
    "EdgeScores",
    "Evaluation",
    "FeatureEdit",
    "Graph",
    "GraphStructureError",
    "Metric",
    "Node",
    "Pairs",
    "Target",
    "UnknownNameError",
    "area_metrics",
    "attribute",
    "corrupt_run",
    "draw_circuit",
    "eap",
    "eap_ig",
    "edge_attribution",
    "evaluate",
    "exact_edge_scores",
    "faithfulness",
    "faithfulness_curve",
    "generate_with_features",
    "greedy",
    "intervene",
    "logit_difference",
    "merge_scores",
    "prune",
    "run_circuit",
    "top_n",
]
