"""``interp.sae.load``: recognise a dictionary's format from its files and read it.

Four formats are read: SAELens (``cfg.json`` + ``sae_weights.safetensors``), sparsify (``cfg.json`` +
``sae.safetensors``), Gemma Scope (``params.npz``) and llamascopium (``config.json`` naming its ``sae_type`` +
``sae_weights.safetensors``: a Lorsa, an SAE, a transcoder or a cross-layer transcoder, :mod:`.llamascopium`).
Pickles (``.pt``, ``.pth``, ``.bin``, ``.ckpt``, ``.pkl``) are refused without being opened: unpickling runs
arbitrary code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from interp.sae.formats import gemma_scope, llamascopium, saelens, sparsify
from interp.sae.formats.build import SAEFormatError, rebuilt
from interp.sae.module import SAE
from interp.sae.read_errors import damaged_files_named

PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt", ".pkl", ".pickle")

_CONVERT = (
    "pickles are never loaded, since unpickling runs arbitrary code. Convert it once in a session you trust: "
    "state = torch.load(path, weights_only=True); safetensors.torch.save_file(state, "
    "'FOLDER/sae_weights.safetensors'), then write FOLDER/cfg.json (SAELens names: d_in, d_sae, "
    "architecture, hook_name, ...) and load FOLDER"
)


def detect(path: Path) -> str:
    """``"saelens"``, ``"sparsify"``, ``"gemma_scope"`` or ``"llamascopium"`` for a folder or file; raises for
    anything else."""
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; give an SAE folder or a params.npz file")
    if path.is_file():
        if path.suffix in PICKLE_SUFFIXES:
            raise SAEFormatError(f"{path} is a pickle: " + _CONVERT)
        if path.suffix == ".npz":
            return "gemma_scope"
        if path.name in (saelens.WEIGHTS, sparsify.WEIGHTS, saelens.CFG, llamascopium.CONFIG):
            return detect(path.parent)
        raise SAEFormatError(
            f"{path} is not an SAE file this project reads; give a SAELens or sparsify folder or a "
            "Gemma Scope params.npz"
        )
    names = {p.name for p in path.iterdir()}
    if llamascopium.is_folder(path):
        return "llamascopium"
    if saelens.CFG in names and saelens.WEIGHTS in names:
        return "saelens"
    if sparsify.CFG in names and sparsify.WEIGHTS in names:
        return "sparsify"
    if gemma_scope.PARAMS in names:
        return "gemma_scope"
    pickles = sorted(n for n in names if Path(n).suffix in PICKLE_SUFFIXES)
    if pickles:
        raise SAEFormatError(f"{path} holds {pickles[0]}, a pickle: " + _CONVERT)
    shown = ", ".join(sorted(names)[:8]) or "nothing"
    raise SAEFormatError(
        f"{path} is not an SAE folder of a known format (it holds {shown}); expected SAELens (cfg.json + "
        "sae_weights.safetensors), sparsify (cfg.json + sae.safetensors), Gemma Scope (params.npz) or "
        "llamascopium (config.json + sae_weights.safetensors)"
    )


def load(
    path: str | Path,
    *,
    hook_name: str | None = None,
    hook_name_out: str | None = None,
    device: Any = None,
    dtype: Any = None,
    norm_scaling_factor: float | None = None,
) -> Any:
    """Load a sparse autoencoder or transcoder from a folder or file.

    Args:
        path: a SAELens, sparsify or llamascopium folder, a Gemma Scope ``params.npz`` (or its folder).
        hook_name: the hook it reads, overriding (or supplying) what the files say.
        hook_name_out: the hook a transcoder writes, likewise.
        device, dtype: where and in which dtype to put the parameters (default: CPU, as stored).
        norm_scaling_factor: SAELens's ``expected_average_only_in`` constant, folded into the weights.

    Returns:
        An :class:`SAE` whose ``cfg.metadata["format"]`` names the format it came in; for a llamascopium folder,
        what it holds: a :class:`~interp.sae.lorsa.Lorsa`, an SAE, a one-layer
        :class:`~interp.sae.TranscoderSet` or a :class:`~interp.sae.CrossLayerTranscoder`.

    Raises:
        SAEFormatError: an unknown format, a pickle, or a config that disagrees with its weights.
    """
    path = Path(path)
    kind = detect(path)
    with damaged_files_named(path):
        if kind == "llamascopium":
            folder = path if path.is_dir() else path.parent
            found = llamascopium.load(folder, device=device, dtype=dtype)
            if not isinstance(found, SAE):
                if hook_name is not None or hook_name_out is not None or norm_scaling_factor is not None:
                    raise ValueError(
                        f"{path} holds a {type(found).__name__}, whose hooks and scales its config sets; "
                        "hook_name, hook_name_out and norm_scaling_factor are for SAEs"
                    )
                return found
            sae = found
        elif kind == "gemma_scope":
            file = path if path.is_file() else path / gemma_scope.PARAMS
            sae = gemma_scope.load(file, device=device, dtype=dtype, hook_name=hook_name)
        elif kind == "sparsify":
            folder = path if path.is_dir() else path.parent
            sae = sparsify.load(folder, device=device, dtype=dtype, hook_name=hook_name)
        else:
            folder = path if path.is_dir() else path.parent
            sae = saelens.load(folder, device=device, dtype=dtype, norm_scaling_factor=norm_scaling_factor)
    changes = {}
    if hook_name is not None and sae.cfg.hook_name != hook_name:
        changes["hook_name"] = hook_name
    if hook_name_out is not None:
        if not sae.cfg.transcoder:
            raise ValueError(f"hook_name_out={hook_name_out!r} was given, but {path} is not a transcoder")
        changes["hook_name_out"] = hook_name_out
    if changes:
        sae = rebuilt(sae, **changes)
    return sae


def save(sae: SAE, path: str | Path) -> Path:
    """Write ``sae`` as a SAELens folder (``cfg.json`` + ``sae_weights.safetensors``) at ``path``."""
    return saelens.save(sae, path)
