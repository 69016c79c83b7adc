"""A dictionary's folder read for a model, for ``interp dashboards --dictionary PATH``.

Which kind and format a folder holds is told in one place, :func:`interp.sae.formats.load_dictionary`;
everything else reads the result through :class:`~interp.dictionary.SparseDictionary`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from interp.dictionary import SparseDictionary


def load_dictionary(path: str | Path, model: Any) -> SparseDictionary:
    """Read the SAE or transcoders at ``path`` for ``model`` (on its device and dtype) and check they fit it
    (:func:`interp.sae.formats.load_dictionary`)."""
    from interp.sae.formats import load_dictionary as load

    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"--dictionary {path} does not exist; give an SAE or transcoder folder")
    return load(path, model=model, device=model.device, dtype=model.dtype)
