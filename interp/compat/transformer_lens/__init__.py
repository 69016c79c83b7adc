"""TransformerLens's API over interp: ``import interp.compat.transformer_lens as transformer_lens``.

The names a TransformerLens notebook uses, on interp's model and cache: ``HookedTransformer`` (with
``from_pretrained``, ``return_type=``, ``loss_fn``, stacked weights, ``OV``/``QK``, token helpers, and
``model.tokenizer`` as a Hugging Face tokenizer), ``ActivationCache`` (``accumulated_resid``,
``decompose_resid``, ``stack_head_results``, ``apply_ln_to_stack``, ``logit_attrs``), ``FactoredMatrix``,
``utils``/``utilities`` (``get_act_name``, ``tokenize_and_concatenate``...), ``hook_points`` (``HookPoint``,
``HookedRootModule``) and ``patching`` (``get_act_patch_*``, ``generic_activation_patch``). TransformerLens 3's
canonical hook names (``blocks.3.hook_in``...) are aliases of interp's hook points on every interp model.
:func:`install` makes ``import transformer_lens`` itself give this package, for code that cannot be edited.

Numbers: the cache methods are exact without folding (see :mod:`interp.compat.transformer_lens.cache`), and
``from_pretrained`` folds and centres the weights as TransformerLens's does, so results match TransformerLens
on the same checkpoint.
"""

from __future__ import annotations

import sys

from interp.compat.transformer_lens import evals, hook_points, patching, utils
from interp.compat.transformer_lens.cache import ActivationCache
from interp.compat.transformer_lens.factored_matrix import FactoredMatrix
from interp.compat.transformer_lens.hook_points import HookedRootModule, HookPoint
from interp.compat.transformer_lens.model import HookedTransformer

utilities = utils

__all__ = [
    "ActivationCache",
    "FactoredMatrix",
    "evals",
    "HookPoint",
    "HookedRootModule",
    "HookedTransformer",
    "hook_points",
    "install",
    "patching",
    "utilities",
    "utils",
]

_SUBMODULES = (
    "utils",
    "utilities",
    "hook_points",
    "HookedRootModule",
    "FactoredMatrix",
    "ActivationCache",
    "HookedTransformer",
    "model_bridge",
    "evals",
    "patching",
)


def install() -> None:
    """Register this package as ``transformer_lens`` (and its submodules) in ``sys.modules``.

    For notebooks that ``import transformer_lens`` and cannot be edited. It refuses to shadow a real
    TransformerLens that is already imported.
    """
    import importlib

    current = sys.modules.get("transformer_lens")
    if current is not None and current is not sys.modules[__name__]:
        raise RuntimeError(
            "transformer_lens is already imported (the real library); install() would shadow it. Restart the "
            "interpreter and call install() before importing it, or import interp.compat.transformer_lens directly"
        )
    sys.modules["transformer_lens"] = sys.modules[__name__]
    for name in _SUBMODULES:
        module = importlib.import_module(f"{__name__}.{_MODULE_FILES.get(name, name)}")
        sys.modules[f"transformer_lens.{name}"] = module


_MODULE_FILES = {
    "utilities": "utils",
    "HookedRootModule": "hook_points",
    "FactoredMatrix": "factored_matrix",
    "ActivationCache": "cache",
    "HookedTransformer": "model",
}
