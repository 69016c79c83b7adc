"""interp: an instrumented transformer for mechanistic interpretability.

>>> import interp
>>> model = interp.load("smollm2-135m")  # doctest: +SKIP
>>> text = "The animal didn't cross the street because it was too tired"
>>> logits, cache = model.run_with_cache(text)  # doctest: +SKIP
>>> cache["pattern", 3].shape  # doctest: +SKIP
torch.Size([1, 9, 12, 12])
"""

from interp.config import TransformerConfig
from interp.hf import from_hf
from interp.load import load
from interp.model import HookedTransformer

__all__ = ["HookedTransformer", "TransformerConfig", "from_hf", "load"]
__version__ = "0.1.0"
