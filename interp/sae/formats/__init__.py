"""Recognise a dictionary's kind and format from its files, and read or write it.

- :func:`load_dictionary`: any dictionary (an SAE, a transcoder set, a cross-layer transcoder), told from its
  files, as a :class:`~interp.dictionary.SparseDictionary`, mapped onto a model's hooks and checked against it;
  :func:`save_dictionary` writes one in its kind's format (SAELens for an SAE, circuit-tracer's for
  transcoders);
- :func:`load` and :func:`save`: an SAE as an :class:`~interp.sae.SAE` (SAELens's API). Three formats are read:
  SAELens (``cfg.json`` + ``sae_weights.safetensors``), sparsify (``cfg.json`` + ``sae.safetensors``) and Gemma
  Scope (``params.npz``); the transcoders' formats are read by
  :func:`~interp.sae.formats.transcoders.load_transcoders`.

Pickles (``.pt``, ``.pth``, ``.bin``, ``.ckpt``, ``.pkl``) are refused without being opened: unpickling runs
arbitrary code.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from interp.dictionary import SparseDictionary, check_fits
from interp.sae.formats import circuit_tracer, circuit_tracer_clt, gemma_scope, saelens, sparsify
from interp.sae.formats.build import SAEFormatError, rebuilt
from interp.sae.module import SAE
from interp.sae.read_errors import damaged_files_named
from interp.sae.sae_set import SAESet, as_dictionary

PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt", ".pkl", ".pickle")

_CONVERT = (
    "pickles are never loaded, since unpickling runs arbitrary code. Convert it once in a session you trust: "
    "state = torch.load(path, weights_only=True); safetensors.torch.save_file(state, "
    "'FOLDER/sae_weights.safetensors'), then write FOLDER/cfg.json (SAELens names: d_in, d_sae, "
    "architecture, hook_name, ...) and load FOLDER"
)


def detect(path: Path) -> str:
    """``"saelens"``, ``"sparsify"`` or ``"gemma_scope"`` for a folder or file; raises for anything else."""
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; give an SAE folder or a params.npz file")
    if path.is_file():
        if path.suffix in PICKLE_SUFFIXES:
            raise SAEFormatError(f"{path} is a pickle: " + _CONVERT)
        if path.suffix == ".npz":
            return "gemma_scope"
        if path.name in (saelens.WEIGHTS, sparsify.WEIGHTS, saelens.CFG):
            return detect(path.parent)
        raise SAEFormatError(
            f"{path} is not an SAE file this project reads; give a SAELens or sparsify folder or a "
            "Gemma Scope params.npz"
        )
    names = {p.name for p in path.iterdir()}
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
        "sae_weights.safetensors), sparsify (cfg.json + sae.safetensors) or Gemma Scope (params.npz)"
    )


def load(
    path: str | Path,
    *,
    hook_name: str | None = None,
    hook_name_out: str | None = None,
    device: Any = None,
    dtype: Any = None,
    norm_scaling_factor: float | None = None,
) -> SAE:
    """Load a sparse autoencoder or transcoder from a folder or file.

    Args:
        path: a SAELens or sparsify folder, a Gemma Scope ``params.npz`` (or its folder).
        hook_name: the hook it reads, overriding (or supplying) what the files say.
        hook_name_out: the hook a transcoder writes, likewise.
        device, dtype: where and in which dtype to put the parameters (default: CPU, as stored).
        norm_scaling_factor: SAELens's ``expected_average_only_in`` constant, folded into the weights.

    Returns:
        An :class:`SAE` whose ``cfg.metadata["format"]`` names the format it came in.

    Raises:
        SAEFormatError: an unknown format, a pickle, or a config that disagrees with its weights.
    """
    path = Path(path)
    kind = detect(path)
    with damaged_files_named(path):
        if kind == "gemma_scope":
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


def holds_transcoders(path: str | Path) -> bool:
    """Whether ``path`` is a folder of transcoders (a circuit-tracer set or CLT, with ``config.yaml`` or without:
    ``W_enc_0.safetensors``, ``layer_0.safetensors``) rather than an SAE."""
    folder = Path(path)
    return folder.is_dir() and (
        (folder / circuit_tracer.CONFIG).is_file()
        or circuit_tracer_clt.is_clt_folder(folder)
        or (folder / "layer_0.safetensors").is_file()
    )


def load_dictionary(
    path: str | Path | Mapping[int, str | Path],
    *,
    model: Any = None,
    device: Any = None,
    dtype: Any = None,
    **options: Any,
) -> SparseDictionary:
    """Read the dictionary at ``path``, whatever its kind, as a :class:`~interp.dictionary.SparseDictionary`.

    An SAE's folder or file (SAELens, sparsify, Gemma Scope ``params.npz``) gives an :class:`~interp.sae.SAESet`
    of one (the SAE is ``dictionary.sae(layer)``); a transcoder folder, or a dict layer -> file, gives a
    :class:`~interp.sae.TranscoderSet` or :class:`~interp.sae.CrossLayerTranscoder`. Given the model, a
    transcoder's TransformerLens hook names are mapped onto its hooks and the dictionary is checked against it
    (:func:`~interp.dictionary.check_fits`) before it is returned.

    Args:
        path: the folder or file (a dict layer -> file for per-layer Gemma Scope transcoder files).
        model: the :class:`~interp.HookedTransformer` it is for (``None``: read as the files say, unchecked).
        device, dtype: where and in which dtype to put the weights (default: as stored).
        **options: what the kind's reader takes: :func:`load`'s ``hook_name``, ``hook_name_out``,
            ``norm_scaling_factor``; :func:`~interp.sae.formats.transcoders.load_transcoders`'s ``input_hook``,
            ``output_hook``, ``lazy``.

    Raises:
        FileNotFoundError: nothing at ``path``. SAEFormatError: files of no known format, or damaged.
        UnknownHookError, ValueError: a dictionary that does not fit ``model`` (each with what would).
    """
    from interp.sae.formats.transcoders import load_transcoders

    if isinstance(path, Mapping) or holds_transcoders(path):
        dictionary = load_transcoders(path, model=model, device=device, dtype=dtype, **options)
    else:
        path = Path(path).expanduser()
        if not path.exists():
            raise FileNotFoundError(
                f"{path} does not exist; give an SAE folder or file, or a transcoder folder"
            )
        dictionary = SAESet(load(path, device=device, dtype=dtype, **options))
    if model is not None:
        check_fits(model, dictionary)
    return dictionary


def save_dictionary(dictionary: Any, folder: str | Path) -> Path:
    """Write ``dictionary`` to ``folder`` in its kind's format: an SAE (or an SAESet of one) as a SAELens folder,
    a transcoder set or CLT as circuit-tracer's folder (:func:`load_dictionary` reads both back).

    Raises:
        ValueError: an SAESet of several SAEs (save each SAE to its own folder).
    """
    from interp.sae.formats.transcoders import save_transcoders

    dictionary = as_dictionary(dictionary)
    if isinstance(dictionary, SAESet):
        if len(dictionary.layers) != 1:
            raise ValueError(
                f"an SAESet of {len(dictionary.layers)} SAEs (layers {dictionary.layers}) is several folders; save "
                "each SAE with interp.sae.save(dictionary.sae(layer), folder)"
            )
        return save(dictionary.sae(dictionary.layers[0]), folder)
    return save_transcoders(dictionary, folder)
