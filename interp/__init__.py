"""interp: an instrumented transformer for mechanistic interpretability.

>>> import interp
>>> model = interp.load("smollm2-135m")  # doctest: +SKIP
>>> text = "The animal didn't cross the street because it was too tired"
>>> logits, cache = model.run_with_cache(text)  # doctest: +SKIP
>>> cache["pattern", 3].shape  # doctest: +SKIP
torch.Size([1, 9, 12, 12])

The subpackages (``interp.analysis``, ``interp.report``, ``interp.store``, ``interp.distributed``...) are
imported on first use, so ``import interp`` stays light (no matplotlib, no pandas) while
``interp.report.attention_view(model, text)`` works without importing ``interp.report`` first.
"""

import importlib
import importlib.util
import pkgutil
from typing import Any

from interp.config import TransformerConfig
from interp.hf import from_hf
from interp.load import load
from interp.model import HookedTransformer, extensions

__all__ = ["HookedTransformer", "TransformerConfig", "from_hf", "load"]
__version__ = "0.1.0"


def _generate() -> Any:
    from interp.generation import generate

    return generate


def _spliced() -> Any:
    from interp.sae import spliced

    return spliced


def _spliced_transcoders() -> Any:
    from interp.sae import spliced

    def transcoders(model: Any, tc: Any, *, error: bool = False) -> Any:
        return spliced(model, tc, use_error_term=error)

    return transcoders


# The model's methods that packages above it implement (see interp.model.extensions).
extensions.register("generate", _generate)
extensions.register("saes", _spliced)
extensions.register("transcoders", _spliced_transcoders)


def __getattr__(name: str) -> Any:
    """Import a subpackage or module the first time it is used as an attribute (PEP 562)."""
    if name == "generate":  # the public function, from the package that implements it
        return _generate()
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")  # also binds it on this package
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*__all__, "__version__", "generate", *(m.name for m in pkgutil.iter_modules(__path__))})
