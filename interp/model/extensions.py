"""Model methods implemented above the model layer: a registry the package root fills.

``model.generate`` and ``model.saes`` are there for users, but the sampling loop and the sparse dictionaries
sit above the model layer, which may not import them (not even inside a function): the layers would then
circle. So the model calls through this registry by name, and ``interp/__init__.py``, which sits above every
layer, registers a loader for each name. A loader imports its package only when first called, so
``import interp`` stays light and a model without dictionaries never imports ``interp.sae``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_loaders: dict[str, Callable[[], Callable[..., Any]]] = {}


def register(name: str, loader: Callable[[], Callable[..., Any]]) -> None:
    """Register ``loader``, which returns the function behind the model method ``name`` (called lazily)."""
    _loaders[name] = loader


def implementation(name: str) -> Callable[..., Any]:
    """The function behind the model method ``name``; its first argument is the model.

    >>> from interp.model import extensions
    >>> callable(extensions.implementation("generate"))  # registered by ``import interp``
    True
    """
    loader = _loaders.get(name)
    if loader is None:
        known = ", ".join(sorted(_loaders)) or "none"
        raise LookupError(f"no implementation registered for model.{name}; registered: {known}")
    return loader()
