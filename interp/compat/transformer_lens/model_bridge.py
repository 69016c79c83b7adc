"""``transformer_lens.model_bridge``: ``TransformerBridge``, TransformerLens 3's loader, as interp's model.

``TransformerBridge.boot_transformers(name)`` loads with ``interp.load`` (a packaged name, a folder, a GGUF
file) and returns the compat :class:`~interp.compat.transformer_lens.HookedTransformer` without weight
processing, as the bridge does; ``enable_compatibility_mode()`` then folds and centres the weights, as the
bridge's compatibility mode does.
"""

from __future__ import annotations

from typing import Any

from interp.compat.transformer_lens.model import HookedTransformer


class TransformerBridge(HookedTransformer):
    """The compat model under TransformerLens 3's bridge name."""

    @classmethod
    def boot_transformers(cls, model_name: str, **kwargs: Any) -> TransformerBridge:
        """Load ``model_name`` with ``interp.load`` and no weight processing."""
        return cls.from_pretrained_no_processing(model_name, **kwargs)

    def enable_compatibility_mode(self, disable_warnings: bool = False, no_processing: bool = False) -> None:
        """Fold LayerNorm and centre the weights (unless ``no_processing``), as HookedTransformer's loader does."""
        if not no_processing:
            self.process_weights(
                center_writing_weights=self.cfg.norm == "layernorm", fold_value_biases=not self.cfg.attn_sinks
            )
