"""Transcoders: per-layer sets and cross-layer transcoders behind one interface, and the replacement model.

- ``base.py``: :class:`Transcoder`, what both kinds share (hooks, ``encode``, ``decode``, ``reconstruct``);
- ``per_layer.py``: :class:`TranscoderSet`, one transcoder per layer, optional skip connection;
- ``cross_layer.py``: :class:`CrossLayerTranscoder`, features writing to their layer and every later one,
  decoders in memory or read lazily;
- ``activation.py``: ReLU, JumpReLU, TopK, BatchTopK;
- ``splice.py``: ``model.transcoders(tc, error=...)``, the replacement model.
"""

from interp.sae.transcoder.activation import ACTIVATIONS, activate
from interp.sae.transcoder.base import Transcoder
from interp.sae.transcoder.cross_layer import CrossLayerTranscoder
from interp.sae.transcoder.per_layer import TranscoderSet
from interp.sae.transcoder.splice import check_transcoder_fits, spliced_transcoders

__all__ = [
    "ACTIVATIONS",
    "CrossLayerTranscoder",
    "Transcoder",
    "TranscoderSet",
    "activate",
    "check_transcoder_fits",
    "spliced_transcoders",
]
