"""A dictionary's folder read for a model, for ``interp dashboards --dictionary PATH``.

Which format a folder is in is told in one place, :func:`read_folder`; everything else reads the result through
:class:`~interp.dictionary.SparseDictionary`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from interp.dictionary import SparseDictionary, check_fits
from interp.sae.dashboards.reading import as_dictionary


def read_folder(path: Path, model: Any) -> Any:
    """The SAE or transcoders at ``path``, on ``model``'s device and dtype: transcoders where the folder holds
    what :func:`interp.sae.load_transcoders` reads (circuit-tracer's config, a cross-layer transcoder's files,
    or ``layer_0.safetensors``), else an SAE (:func:`interp.sae.load`)."""
    from interp.sae.formats import circuit_tracer, circuit_tracer_clt

    transcoders = path.is_dir() and (
        (path / circuit_tracer.CONFIG).is_file()
        or circuit_tracer_clt.is_clt_folder(path)
        or (path / "layer_0.safetensors").is_file()
    )
    if transcoders:
        from interp.sae.formats.transcoders import load_transcoders

        return load_transcoders(path, model=model, device=model.device, dtype=model.dtype)
    from interp.sae.formats import load

    return load(path, device=model.device, dtype=model.dtype)


def load_dictionary(path: str | Path, model: Any) -> SparseDictionary:
    """Read the SAE or transcoders at ``path`` for ``model`` (on its device and dtype) and check they fit it
    (:func:`interp.dictionary.check_fits`)."""
    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"--dictionary {path} does not exist; give an SAE or transcoder folder")
    dictionary = as_dictionary(read_folder(path, model))
    check_fits(model, dictionary)
    return dictionary
