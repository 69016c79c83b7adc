"""QK attribution: why a head attends where it does.

An attention score is split into query-component x key-component terms that add up to it exactly. The modules,
in the order a score is computed:

- :mod:`~interp.analysis.qk.prompt`: one prompt, its tokens and positions;
- (no module here) the stream entering the layer at the query and at the key, split into parts named by
  :class:`~interp.analysis.node.Node`: :func:`~interp.analysis.decompose.decompose_stream`, the one walk over
  the stream (:mod:`~interp.analysis.feature_writes` splits an MLP's write into transcoder features);
- :mod:`~interp.analysis.qk.project`: each part pushed through the frozen norm, ``W_Q`` / ``W_K``, q/k norm
  and rotary;
- :mod:`~interp.analysis.qk.score`: the matrix of pairwise products for one score (:func:`qk_attribution`);
- :mod:`~interp.analysis.qk.difference`: the same for the difference of two scores (two keys, twin prompts);
- :mod:`~interp.analysis.qk.matrix`: the matrix type both return (and attention explained in a graph's nodes
  too), its top terms and its tables.
"""

from interp.analysis.qk.difference import QKDifference, qk_key_difference, qk_twin_difference
from interp.analysis.qk.matrix import QKMatrix, QKScore, Term, top_entries
from interp.analysis.qk.score import QKAttribution, qk_attribution, qk_names

__all__ = [
    "QKAttribution",
    "QKDifference",
    "QKMatrix",
    "QKScore",
    "Term",
    "qk_attribution",
    "qk_key_difference",
    "qk_names",
    "qk_twin_difference",
    "top_entries",
]
