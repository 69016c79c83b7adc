"""An MLP's write split into transcoder features: the part of the stream walk that reads a dictionary.

A transcoder replaces an MLP's write ``hook_mlp_out`` at a position by its active features' decoder writes
(``acts[f] * W_dec[f]``), its decoder bias ``b_dec`` and its skip term (``x @ W_skip.T``, where it has one);
what is left of the MLP's real write is the error node (:func:`~interp.analysis.decompose.decompose_stream`
adds it). A cross-layer transcoder's feature writes into its own layer and every later one; its writes into
the layers a stream gathers are one part per feature. The transcoder is read through
:class:`~interp.dictionary.SparseDictionary` only (hooks, ``encode``, ``decoder``, ``decoder_bias``,
``skip``), so the analysis layer does not depend on how it is stored.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import nn

from hooks import ActivationCache
from interp.analysis.node import Node
from interp.dictionary import SparseDictionary, check_fits, sources


def feature_names(transcoders: SparseDictionary, n_mlp: int) -> list[str]:
    """The input hooks :func:`feature_writes` reads to split the first ``n_mlp`` MLPs' writes."""
    return [transcoders.input_hook(s) for s in transcoders.layers if s < n_mlp]


def check_transcoders(model: nn.Module, transcoders: SparseDictionary) -> None:
    """Refuse transcoders made for another model (:func:`interp.dictionary.check_fits`), or ones that do not
    write the MLPs' outputs."""
    check_fits(model, transcoders)
    for layer in transcoders.layers:
        for out in transcoders.output_layers(layer):
            if transcoders.output_hook(out) != f"blocks.{out}.hook_mlp_out":
                raise ValueError(
                    f"splitting MLP writes into features needs transcoders that write each MLP's output; these "
                    f"write {transcoders.output_hook(out)!r}, not 'blocks.{out}.hook_mlp_out'"
                )


@torch.no_grad()
def feature_writes(
    transcoders: SparseDictionary, cache: ActivationCache, out_layer: int, pos: int, shown: str = ""
) -> Iterator[tuple[Node, torch.Tensor]]:
    """The transcoders' write into ``out_layer``'s MLP output at ``pos`` of batch row 0: features, ``b_dec``,
    skip, as ``(node, [d_model])`` pairs in float32.

    Each active feature of a source layer gives ``(feature node, acts[f] * W_dec[f])``; its node is the same
    for every output layer it writes to, so a cross-layer feature adds up to one part. ``shown`` is the token
    the nodes' labels show.
    """
    for source in sources(transcoders, out_layer):
        x = cache[transcoders.input_hook(source)][0, pos]  # [d_model]
        _, acts = transcoders.encode(x, source)  # [d_transcoder]
        active = acts.nonzero().flatten()
        if not len(active):
            continue
        index = transcoders.output_layers(source).index(out_layer)
        rows = transcoders.decoder(source, active)[:, index]  # [n_active, d_model]
        writes = acts[active, None].float() * rows.float()  # [n_active, d_model]
        for f, write in zip(active.tolist(), writes.unbind(0), strict=True):
            yield Node.feature_node(source, pos, f, shown=shown), write
    yield Node.decoder_bias(out_layer), transcoders.decoder_bias(out_layer).float()
    if out_layer in transcoders.layers:
        skip = transcoders.skip(cache[transcoders.input_hook(out_layer)][0, pos], out_layer)
        if skip is not None:
            yield Node.skip(out_layer, pos, shown=shown), skip.float()
