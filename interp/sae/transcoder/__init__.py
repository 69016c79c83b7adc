"""Transcoders: per-layer sets and cross-layer transcoders behind one interface, and the replacement model.

- ``base.py``: :class:`Transcoder`, what both kinds share (hooks, ``encode``, ``decode``, ``reconstruct``): the
  :class:`~interp.dictionary.SparseDictionary` interface;
- ``per_layer.py``: :class:`TranscoderSet`, one transcoder per layer, optional skip connection;
- ``cross_layer.py``: :class:`CrossLayerTranscoder`, features writing to their layer and every later one,
  decoders in memory or read lazily;
- ``layer_tensors.py``: the per-layer tensors both are built from, checked and stacked.

``model.transcoders(tc)``, the replacement model, is the one splice of every dictionary
(:mod:`interp.sae.splice`).

The activation functions are :mod:`interp.sae.activation`'s, with circuit-tracer's convention.
"""

from interp.sae.transcoder.base import Transcoder
from interp.sae.transcoder.cross_layer import CrossLayerTranscoder
from interp.sae.transcoder.per_layer import TranscoderSet

__all__ = [
    "CrossLayerTranscoder",
    "Transcoder",
    "TranscoderSet",
]
