"""Model-agnostic instrumentation: hook points, hooked modules, activation caches.

This package knows nothing about transformers; ``interp`` builds on it.
"""

from hooks.attach import attach
from hooks.attention_spec import AttentionSpec
from hooks.cache import ActivationCache
from hooks.module import HookedModule
from hooks.names import UnknownHookError, resolve_names
from hooks.point import HookEditError, HookPoint, listeners, listening

__all__ = [
    "ActivationCache",
    "AttentionSpec",
    "attach",
    "HookEditError",
    "HookPoint",
    "HookedModule",
    "listeners",
    "listening",
    "UnknownHookError",
    "resolve_names",
]
