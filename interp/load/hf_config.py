"""Reading a Hugging Face ``config.json`` with errors that name the file and the key."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from interp.config import Activation
from interp.load.errors import CheckpointError

_MISSING = object()

# Hugging Face activation names -> TransformerConfig.act.
_ACTIVATIONS: dict[str, Activation] = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
}


class HFConfig:
    """A ``config.json`` as a dict, plus where it came from (for messages).

    Args:
        values: the parsed JSON.
        source: the file (or other origin) to name in errors.
    """

    def __init__(self, values: dict[str, Any], source: str) -> None:
        self.values = values
        self.source = source

    @property
    def model_type(self) -> str | None:
        """``model_type``, the key of the family table."""
        return self.values.get("model_type")

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key``, or ``default`` when it is absent or null."""
        value = self.values.get(key)
        return default if value is None else value

    def require(self, key: str) -> Any:
        """The value of ``key``; raises :class:`CheckpointError` naming the file when it is absent."""
        value = self.values.get(key, _MISSING)
        if value is _MISSING or value is None:
            raise CheckpointError(f"{self.source} has no {key!r}, which a {self.model_type!r} config needs")
        return value

    def expect(self, key: str, allowed: Iterable[Any], default: Any, why: str) -> Any:
        """The value of ``key`` (``default`` if absent), raising unless it is one of ``allowed``.

        Used for features the loader does not implement: loading them anyway would silently change the model.
        """
        value = self.get(key, default)
        allowed = list(allowed)
        if value not in allowed:
            raise CheckpointError(
                f"{self.source}: {key}={value!r} is not supported ({why}); supported: {allowed}"
            )
        return value

    def activation(self, key: str) -> Activation:
        """``key`` as a :data:`~interp.config.Activation`."""
        name = self.require(key)
        if name not in _ACTIVATIONS:
            raise CheckpointError(
                f"{self.source}: {key}={name!r} is not a supported activation; "
                f"supported: {sorted(_ACTIVATIONS)}"
            )
        return _ACTIVATIONS[name]
