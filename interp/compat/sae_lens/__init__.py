"""SAELens 6's API over interp: ``import interp.compat.sae_lens as sae_lens``.

The names SAELens notebooks use, on interp's SAEs and model: :class:`SAE` (``load_from_disk``,
``from_pretrained`` from a release found on this machine, ``from_dict``, ``cfg`` with ``cfg.metadata``,
``encode``/``decode``/``forward``, ``use_error_term``, the ``hook_sae_*`` points), :class:`HookedSAETransformer`
(the TransformerLens face with ``add_sae``, ``reset_saes``, ``saes()``, ``run_with_saes``,
``run_with_cache_with_saes``), and :class:`ActivationsStore` over a local dataset. The SAE is interp's
:class:`~interp.sae.SAE` and splicing is interp's ``model.saes``, so the numbers are interp's, which follow
SAELens's inference code. :func:`install` makes ``import sae_lens`` (and ``import transformer_lens``) give these
faces, for code that cannot be edited.
"""

from __future__ import annotations

import importlib
import sys

import interp.compat.transformer_lens as _transformer_lens
from interp.compat.sae_lens.activations_store import ActivationsStore
from interp.compat.sae_lens.config import SAELensConfig as SAEConfig
from interp.compat.sae_lens.config import SAEMetadata
from interp.compat.sae_lens.model import HookedSAETransformer
from interp.compat.sae_lens.sae import SAE

__all__ = ["ActivationsStore", "HookedSAETransformer", "SAE", "SAEConfig", "SAEMetadata", "install"]

_SUBMODULES = {
    "saes": "sae",
    "saes.sae": "sae",
    "analysis": "model",
    "analysis.hooked_sae_transformer": "model",
    "training": "activations_store",
    "training.activations_store": "activations_store",
}
"""``sae_lens.<name>`` -> the module of this package that answers for it."""


def install() -> None:
    """Register this package as ``sae_lens`` (with the submodules notebooks import from) in ``sys.modules``,
    and the TransformerLens face as ``transformer_lens``.

    Refuses to shadow a real SAELens that is already imported.
    """
    current = sys.modules.get("sae_lens")
    if current is not None and current is not sys.modules[__name__]:
        raise RuntimeError(
            "sae_lens is already imported (the real library); install() would shadow it. Restart the "
            "interpreter and call install() before importing it, or import interp.compat.sae_lens directly"
        )
    if sys.modules.get("transformer_lens") is not _transformer_lens:
        _transformer_lens.install()
    sys.modules["sae_lens"] = sys.modules[__name__]
    for name, module in _SUBMODULES.items():
        sys.modules[f"sae_lens.{name}"] = importlib.import_module(f"{__name__}.{module}")
