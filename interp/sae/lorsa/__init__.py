"""Lorsa: low-rank sparse attention, the attention sublayer replaced by sparse heads (He et al. 2025).

One file per concern:

- ``config.py``: :class:`LorsaConfig`, one layer's settings (heads, QK groups, positions, q/k norm, activation);
- ``layer.py``: :class:`LorsaLayer`, one layer's weights and its computation step by step (queries and keys,
  values, pattern, value mixture, activation, output);
- ``by_layer.py``: :class:`Lorsa`, layers by model layer as a :class:`~interp.dictionary.SparseDictionary`.

Files written by OpenMOSS's llamascopium (formerly lm-saes) are read by :func:`interp.sae.load`.
"""

from interp.sae.lorsa.by_layer import Lorsa
from interp.sae.lorsa.config import LorsaConfig
from interp.sae.lorsa.layer import LorsaLayer

__all__ = ["Lorsa", "LorsaConfig", "LorsaLayer"]
