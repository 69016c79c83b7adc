"""interp: an instrumented transformer for mechanistic interpretability."""

from interp.config import TransformerConfig
from interp.model import HookedTransformer

__all__ = ["HookedTransformer", "TransformerConfig"]
__version__ = "0.1.0"
