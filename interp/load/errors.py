"""The loader's error type.

A checkpoint that exists but cannot be loaded faithfully (corrupt, truncated, an unsupported variant, a
config that contradicts its weights) raises :class:`CheckpointError`, a ``ValueError`` whose message names the
file and says what to do. Missing files and packages raise ``FileNotFoundError``.
"""

from __future__ import annotations


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded as it stands; the message names the file and the fix."""
