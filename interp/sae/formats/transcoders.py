"""``interp.sae.load_transcoders`` and ``save_transcoders``: recognise a transcoder's files and read or write them.

Read: a circuit-tracer folder (``config.yaml`` with ``model_kind: transcoder_set`` or
``cross_layer_transcoder``), a CLT folder without a config (``W_enc_0.safetensors``...: circuit-tracer's
default hooks, ``hook_resid_mid`` to ``hook_mlp_out``), a folder of ``layer_{i}.safetensors``, or a dict layer
-> file of Gemma Scope ``params.npz`` or Gemma Scope 2 files (per-layer or cross-layer, told apart by
``w_dec``). Given the model, the config's TransformerLens hook names are mapped onto its hooks
(:mod:`.tl_hooks`) and the transcoder is checked against it before it is returned.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from interp.dictionary import check_fits
from interp.sae.formats import circuit_tracer, circuit_tracer_clt, gemma_scope_2
from interp.sae.formats.build import SAEFormatError
from interp.sae.formats.tl_hooks import bind, check_names, config_names, sites
from interp.sae.transcoder import Transcoder, TranscoderSet

FORMATS = ("circuit_tracer", "gemma_scope_2")


def load_transcoders(
    path: str | Path | Mapping[int, str | Path],
    *,
    model: Any = None,
    input_hook: str | None = None,
    output_hook: str | None = None,
    lazy: bool = True,
    device: Any = None,
    dtype: Any = None,
) -> Transcoder:
    """Load a transcoder set or cross-layer transcoder.

    Args:
        path: a folder (see the module docstring) or a dict layer -> Gemma Scope / Gemma Scope 2 file.
        model: the :class:`~interp.HookedTransformer` it is for; maps the hook names and checks the fit.
        input_hook, output_hook: the TransformerLens hook names, where the files do not say them (Gemma
            Scope ``params.npz`` default to ``ln2.hook_normalized`` and ``hook_mlp_out``).
        lazy: read a CLT's decoders on demand (circuit-tracer folders).
        device, dtype: where and in which dtype to put the weights.

    Raises:
        SAEFormatError: unreadable, missing or mismatched files. ValueError: a hook convention the model's
        family cannot express, or a transcoder that does not fit the model.
    """
    tc = _read(path, input_hook, output_hook, lazy)
    if device is not None or dtype is not None:
        tc = tc.to(device=device, dtype=dtype)
    if model is not None:
        tc = bind(tc, model)
        check_fits(model, tc)
    return tc


def _read(path: Any, input_hook: str | None, output_hook: str | None, lazy: bool) -> Transcoder:
    if isinstance(path, Mapping):
        files = {int(layer): Path(file) for layer, file in path.items()}
        return _from_files(files, input_hook, output_hook)
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder; give a transcoder folder or a dict layer -> file")
    if (folder / circuit_tracer.CONFIG).is_file():
        config = circuit_tracer.read_config(folder)
        if config["model_kind"] == "transcoder_set":
            return circuit_tracer.load(folder, config)
        names = (config["feature_input_hook"], config["feature_output_hook"])
        if config.get("transcoders"):
            files = dict(enumerate(circuit_tracer.layer_files(folder, config)))
            return _from_files(files, *names)
        return _clt(folder, names, lazy, config)
    if circuit_tracer_clt.is_clt_folder(folder):
        return _clt(folder, (input_hook or "hook_resid_mid", output_hook or "hook_mlp_out"), lazy)
    if (folder / "layer_0.safetensors").is_file():
        if input_hook is None or output_hook is None:
            raise ValueError(
                f"{folder} has no config.yaml saying which hooks the transcoders read and write; pass "
                "input_hook= and output_hook= (TransformerLens names, e.g. 'mlp.hook_in', 'mlp.hook_out')"
            )
        config = {"feature_input_hook": input_hook, "feature_output_hook": output_hook}
        return circuit_tracer.load(folder, config)
    shown = ", ".join(sorted(p.name for p in folder.iterdir())[:8]) or "nothing"
    raise SAEFormatError(
        f"{folder} is not a transcoder folder (it holds {shown}); expected config.yaml, W_enc_0.safetensors "
        "or layer_0.safetensors"
    )


def _clt(
    folder: Path, names: tuple[str, str], lazy: bool, config: dict[str, Any] | None = None
) -> Transcoder:
    check_names(*names, str(folder))
    input_site, output_site, _ = sites(*names, None)
    config = config or {}
    activation = circuit_tracer.ACTIVATION_NAMES.get(config.get("activation") or "")
    return circuit_tracer_clt.load(
        folder,
        activation=activation,
        k=config.get("k") if activation in ("topk", "batchtopk") else None,
        input_site=input_site,
        output_site=output_site,
        lazy=lazy,
        config_hooks=names,
    )


def _from_files(files: dict[int, Path], input_hook: str | None, output_hook: str | None) -> Transcoder:
    if not files:
        raise ValueError("the dict of layer files is empty")
    for file in files.values():
        if not file.is_file():
            raise SAEFormatError(f"{file} does not exist")
    first = files[min(files)]
    npz = first.suffix == ".npz"
    if input_hook is None or output_hook is None:
        if not npz:
            raise ValueError(
                "Gemma Scope 2 files do not say which hooks they read and write; pass input_hook= and "
                "output_hook= (TransformerLens names, e.g. 'hook_resid_mid', 'hook_mlp_out')"
            )
        input_hook, output_hook = input_hook or "ln2.hook_normalized", output_hook or "hook_mlp_out"
    check_names(input_hook, output_hook, str(first))
    input_site, output_site, _ = sites(input_hook, output_hook, None)
    if not npz and gemma_scope_2.is_clt(first):
        clt = gemma_scope_2.load_clt(files, input_site=input_site, output_site=output_site)
        clt.metadata["config_hooks"] = (input_hook, output_hook)
        return clt
    layers = sorted(files)
    tensors = [circuit_tracer.read_layer(files[layer]) for layer in layers]

    def stack(key: str) -> torch.Tensor | None:
        if not all(key in t for t in tensors):
            return None
        return torch.stack([t[key] for t in tensors])

    return TranscoderSet(
        stack("W_enc"),
        stack("W_dec"),
        stack("b_enc"),
        stack("b_dec"),
        threshold=stack("activation_function.threshold"),
        W_skip=stack("W_skip"),
        activation="jumprelu",
        layers=layers,
        input_site=input_site,
        output_site=output_site,
        metadata={
            "format": "gemma_scope" if npz else "gemma_scope_2",
            "config_hooks": (input_hook, output_hook),
        },
    )


def save_transcoders(tc: Transcoder, folder: str | Path, *, format: str = "circuit_tracer") -> Path:
    """Write ``tc`` to ``folder``: circuit-tracer's set or CLT folder with ``config.yaml``, or Gemma Scope 2
    files (``format="gemma_scope_2"``, JumpReLU only)."""
    import yaml

    if format not in FORMATS:
        raise ValueError(f"format={format!r}; expected one of {list(FORMATS)}")
    folder = Path(folder)
    if format == "gemma_scope_2":
        gemma_scope_2.save(tc, folder)
        return folder
    if isinstance(tc, TranscoderSet):
        return circuit_tracer.save(tc, folder)
    circuit_tracer_clt.save(tc, folder)
    input_hook, output_hook = config_names(tc)
    config: dict[str, Any] = {
        "model_kind": "cross_layer_transcoder",
        "feature_input_hook": input_hook,
        "feature_output_hook": output_hook,
        "activation": circuit_tracer.CONFIG_ACTIVATIONS[tc.activation],
    }
    if tc.k is not None:  # circuit-tracer's CLTs are ReLU or JumpReLU; TopK ones load here
        config["k"] = tc.k
    (folder / circuit_tracer.CONFIG).write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return folder
