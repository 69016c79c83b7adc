"""interp: an instrumented transformer for mechanistic interpretability."""

from interp.config import TransformerConfig
from interp.hf import from_hf
from interp.model import HookedTransformer

__all__ = ["HookedTransformer", "TransformerConfig", "from_hf"]
__version__ = "0.1.0"
