"""circuit-tracer's transcoder set: a folder with ``config.yaml`` and one ``layer_{i}.safetensors`` per layer.

``config.yaml`` says ``model_kind`` (``transcoder_set``, or ``cross_layer_transcoder`` for a CLT folder, read
by :mod:`.circuit_tracer_clt`), ``feature_input_hook`` and ``feature_output_hook`` (TransformerLens names, see
:mod:`.tl_hooks`), optionally ``transcoders`` (one file per layer, in layer order: circuit-tracer
safetensors, Gemma Scope ``params.npz`` or Gemma Scope 2 safetensors), ``activation`` (``relu``,
``jump_relu``, ``topk``) and ``k``. A layer file holds ``W_enc [d_transcoder, d_model]``, ``W_dec
[d_transcoder, d_model]``, ``b_enc``, ``b_dec``, optionally ``activation_function.threshold`` (JumpReLU) and
``W_skip [d_model, d_model]`` (the skip adds ``x @ W_skip.T``). Without ``activation``, a file with a threshold
is JumpReLU and one without is ReLU, as circuit-tracer's loader decides. JumpReLU is ``pre * (pre >
threshold)`` and TopK keeps the ``k`` largest pre-activations as they are, negative ones included
(circuit-tracer 0.5.0's ``jumprelu`` and ``TopK``): the transcoders' convention, ``rectify=False`` in
:mod:`interp.sae.activation`, also for Gemma Scope files listed here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from interp.sae.formats import gemma_scope, gemma_scope_2
from interp.sae.formats.build import SAEFormatError
from interp.sae.formats.tl_hooks import check_names, config_names, sites
from interp.sae.transcoder import TranscoderSet
from interp.store.files import write_safetensors

CONFIG = "config.yaml"
MODEL_KINDS = ("transcoder_set", "cross_layer_transcoder")
ACTIVATION_NAMES = {
    "relu": "relu",
    "jump_relu": "jumprelu",
    "jumprelu": "jumprelu",
    "topk": "topk",
    "batchtopk": "batchtopk",
}
CONFIG_ACTIVATIONS = {"relu": "relu", "jumprelu": "jump_relu", "topk": "topk", "batchtopk": "batchtopk"}
"""interp's activation -> the config's name (circuit-tracer's own; ``batchtopk`` only this project reads)."""
_KEYS = ("W_enc", "W_dec", "b_enc", "b_dec", "activation_function.threshold", "W_skip", "k")


def read_config(folder: Path) -> dict[str, Any]:
    """``config.yaml`` of ``folder``, checked: a known ``model_kind``, activation and hook names."""
    import yaml

    file = folder / CONFIG
    config = yaml.safe_load(file.read_text(encoding="utf-8"))
    if not isinstance(config, dict):
        raise SAEFormatError(f"{file} is not a mapping of settings")
    kind = config.get("model_kind")
    if kind not in MODEL_KINDS:
        raise SAEFormatError(f"{file}: model_kind={kind!r}; expected one of {list(MODEL_KINDS)}")
    activation = config.get("activation")
    if activation is not None and activation not in ACTIVATION_NAMES:
        raise SAEFormatError(f"{file}: activation={activation!r}; expected one of {list(ACTIVATION_NAMES)}")
    if activation in ("topk", "batchtopk") and not isinstance(config.get("k"), int):
        raise SAEFormatError(f"{file}: activation 'topk' needs an integer k, got k={config.get('k')!r}")
    for key in ("feature_input_hook", "feature_output_hook"):
        if not isinstance(config.get(key), str):
            raise SAEFormatError(
                f"{file} has no {key}; it names the TransformerLens hook, e.g. 'hook_resid_mid'"
            )
    try:
        check_names(config["feature_input_hook"], config["feature_output_hook"], str(file))
    except ValueError as err:
        raise SAEFormatError(str(err)) from None
    return config


def layer_files(folder: Path, config: dict[str, Any]) -> list[Path]:
    """The per-layer files, layer 0 first: ``transcoders:`` from the config, else ``layer_{i}.safetensors``."""
    listed = config.get("transcoders")
    if (
        "layers" in config and listed is None
    ):  # written here for a set with gaps (circuit-tracer needs 0..n-1)
        files = [folder / f"layer_{i}.safetensors" for i in config["layers"]]
    elif listed is not None:
        remote = [p for p in listed if str(p).startswith("hf://")]
        if remote:
            raise SAEFormatError(
                f"{folder / CONFIG} lists {remote[0]!r}, a file on the Hugging Face hub; nothing is downloaded "
                "here: download the files and list their local paths"
            )
        files = [Path(p) if Path(p).is_absolute() else folder / p for p in listed]
    else:
        found = sorted(folder.glob("layer_*.safetensors"), key=lambda p: p.name)
        files = [folder / f"layer_{i}.safetensors" for i in range(len(found))]
    for file in files:
        if not file.is_file():
            raise SAEFormatError(f"{file} does not exist; the transcoder set needs one file per layer")
    if not files:
        raise SAEFormatError(f"{folder} has no layer_0.safetensors and its config lists no transcoders")
    return files


def read_layer(file: Path) -> dict[str, torch.Tensor]:
    """One layer's tensors in circuit-tracer's names and orientation, from any of the three file kinds."""
    if file.suffix == ".npz":
        return gemma_scope.read_transcoder(file)
    tensors = load_file(str(file))
    if "w_enc" in tensors:
        return gemma_scope_2.to_circuit_tracer(tensors, file)
    unknown = sorted(set(tensors) - set(_KEYS))
    missing = [k for k in ("W_enc", "W_dec", "b_enc", "b_dec") if k not in tensors]
    if unknown or missing:
        what = f"lacks {missing}" if missing else f"holds {unknown}, which a transcoder layer has not"
        raise SAEFormatError(f"{file} {what}; expected {list(_KEYS[:4])} and optionally {list(_KEYS[4:])}")
    return tensors


def load(folder: Path, config: dict[str, Any]) -> TranscoderSet:
    """The :class:`TranscoderSet` of a circuit-tracer folder whose config is ``config``."""
    files = layer_files(folder, config)
    layer_numbers = list(config["layers"]) if "layers" in config else list(range(len(files)))
    layers = [read_layer(f) for f in files]
    shapes = {tuple(t["W_enc"].shape) for t in layers}
    if len(shapes) > 1:
        raise SAEFormatError(f"{folder}: the layers' W_enc shapes differ: {sorted(shapes)}")
    activation = ACTIVATION_NAMES.get(config.get("activation") or "", None)
    thresholds = ["activation_function.threshold" in t for t in layers]
    if activation is None:
        activation = "jumprelu" if all(thresholds) else "relu"
    if activation == "jumprelu" and not all(thresholds):
        raise SAEFormatError(
            f"{files[thresholds.index(False)]} has no activation_function.threshold for JumpReLU"
        )
    names = (config["feature_input_hook"], config["feature_output_hook"])
    input_site, output_site, _ = sites(*names, None)  # mapped onto a model by tl_hooks.bind
    skip = ["W_skip" in t for t in layers]
    if any(skip) and not all(skip):
        raise SAEFormatError(f"{files[skip.index(False)]} has no W_skip, but other layers have one")

    def stack(key: str) -> torch.Tensor:
        return torch.stack([t[key].float() for t in layers])

    return TranscoderSet(
        stack("W_enc"),
        stack("W_dec"),
        stack("b_enc"),
        stack("b_dec"),
        threshold=stack("activation_function.threshold") if activation == "jumprelu" else None,
        W_skip=stack("W_skip") if all(skip) else None,
        activation=activation,
        k=config.get("k") if activation in ("topk", "batchtopk") else None,
        layers=layer_numbers,
        input_site=input_site,
        output_site=output_site,
        metadata={"format": "circuit_tracer", "config_hooks": names, "folder": str(folder)},
    )


def save(tc: TranscoderSet, folder: str | Path) -> Path:
    """Write ``tc`` as a circuit-tracer transcoder set (``config.yaml`` + ``layer_{i}.safetensors``).

    circuit-tracer's sets cover layers ``0..n-1``; a set with gaps is written with its ``layers:`` listed in
    the config, which this loader reads (circuit-tracer would not).
    """
    import yaml

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for i, layer in enumerate(tc.layers):
        tensors = {
            "W_enc": tc.W_enc[i],
            "W_dec": tc.W_dec[i],
            "b_enc": tc.b_enc[i],
            "b_dec": tc.b_dec[i],
        }
        if tc.thresholds is not None:
            tensors["activation_function.threshold"] = tc.thresholds[i]
        if tc.W_skip is not None:
            tensors["W_skip"] = tc.W_skip[i]
        write_safetensors(folder / f"layer_{layer}.safetensors", _cpu(tensors), {})
    input_hook, output_hook = config_names(tc)
    config: dict[str, Any] = {
        "model_kind": "transcoder_set",
        "feature_input_hook": input_hook,
        "feature_output_hook": output_hook,
        "activation": CONFIG_ACTIVATIONS[tc.activation],
    }
    if tc.k is not None:
        config["k"] = tc.k
    if tc.layers != list(range(len(tc.layers))):
        config["layers"] = tc.layers
    (folder / CONFIG).write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return folder


def _cpu(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
