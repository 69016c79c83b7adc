"""circuit-tracer's cross-layer transcoder folder: per layer ``i`` an encoder file and a decoder file.

``W_enc_{i}.safetensors`` holds ``W_enc_{i} [d_transcoder, d_model]``, ``b_enc_{i}``, ``b_dec_{i}`` (the bias
of layer ``i``'s output) and, for JumpReLU, ``threshold_{i}``; ``W_dec_{i}.safetensors`` holds ``W_dec_{i}
[d_transcoder, n_layers - i, d_model]``, slice ``j`` writing to layer ``i + j``. Decoders are read lazily by
default, row by row as asked for, so a CLT of 160 GiB costs only the rows an attribution graph uses. A skip
connection, which circuit-tracer's files do not store, is written as ``W_skip_{i} [d_model_in, d_model_out]``
in the encoder file (circuit-tracer's orientation: the skip adds ``x @ W_skip_{i}``). JumpReLU is ``pre * (pre >
threshold)``, circuit-tracer's (``rectify=False`` in :mod:`interp.sae.activation`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from interp.sae.formats.build import SAEFormatError
from interp.sae.transcoder import CrossLayerTranscoder
from interp.store.files import write_safetensors


def _enc(folder: Path, i: int) -> Path:
    return folder / f"W_enc_{i}.safetensors"


def _dec(folder: Path, i: int) -> Path:
    return folder / f"W_dec_{i}.safetensors"


def is_clt_folder(folder: Path) -> bool:
    """Whether ``folder`` holds circuit-tracer CLT files."""
    return _enc(folder, 0).is_file()


def n_layers_of(folder: Path) -> int:
    """The layer count: encoder files must be ``W_enc_0`` .. ``W_enc_{n-1}``, each with its decoder file."""
    found = sorted(int(p.stem.removeprefix("W_enc_")) for p in folder.glob("W_enc_*.safetensors"))
    if not found:
        raise SAEFormatError(f"{folder} has no W_enc_0.safetensors; it is not a circuit-tracer CLT folder")
    n = max(found) + 1
    for i in range(n):
        for file in (_enc(folder, i), _dec(folder, i)):
            if not file.is_file():
                raise SAEFormatError(
                    f"{file} is missing; a CLT over {n} layers needs W_enc_i and W_dec_i for each"
                )
    return n


def load(
    folder: Path,
    *,
    activation: str | None = None,
    k: int | None = None,
    input_site: str = "hook_resid_mid",
    output_site: str = "hook_mlp_out",
    lazy: bool = True,
    config_hooks: tuple[str, str] | None = None,
) -> CrossLayerTranscoder:
    """Read a CLT folder (see the module docstring); ``lazy=False`` reads every decoder now."""
    n = n_layers_of(folder)
    enc: dict[str, list[torch.Tensor]] = {
        "W_enc": [],
        "b_enc": [],
        "b_dec": [],
        "threshold": [],
        "W_skip": [],
    }
    for i in range(n):
        with safe_open(str(_enc(folder, i)), framework="pt") as f:
            keys = set(f.keys())
            for name in ("W_enc", "b_enc", "b_dec", "threshold", "W_skip"):
                if f"{name}_{i}" in keys:
                    enc[name].append(f.get_tensor(f"{name}_{i}").float())
                elif name in ("W_enc", "b_enc", "b_dec"):
                    raise SAEFormatError(f"{_enc(folder, i)} has no {name}_{i}; it holds {sorted(keys)}")
    for name in ("threshold", "W_skip"):
        if enc[name] and len(enc[name]) != n:
            raise SAEFormatError(f"{folder}: {name}_i is in {len(enc[name])} of the {n} encoder files")
    shapes = {tuple(w.shape) for w in enc["W_enc"]}
    if len(shapes) != 1:
        raise SAEFormatError(f"{folder}: the W_enc_i shapes differ: {sorted(shapes)}")
    d_tc, d = shapes.pop()
    for i in range(n):
        with safe_open(str(_dec(folder, i)), framework="pt") as f:
            if f"W_dec_{i}" not in set(f.keys()):
                raise SAEFormatError(f"{_dec(folder, i)} has no W_dec_{i}")
            got = tuple(f.get_slice(f"W_dec_{i}").get_shape())
        if got != (d_tc, n - i, d):
            raise SAEFormatError(
                f"{_dec(folder, i)}: W_dec_{i} has shape {list(got)}; expected [{d_tc}, {n - i}, {d}] "
                "(d_transcoder, n_layers - i, d_model)"
            )
    activation = activation or ("jumprelu" if enc["threshold"] else "relu")
    if activation == "jumprelu" and not enc["threshold"]:
        raise SAEFormatError(f"{folder}: a JumpReLU CLT needs threshold_i in every encoder file")
    reader = _reader(folder)
    return CrossLayerTranscoder(
        torch.stack(enc["W_enc"]),
        None if lazy else [reader(i, None).float() for i in range(n)],
        torch.stack(enc["b_enc"]),
        torch.stack(enc["b_dec"]),
        threshold=torch.stack(enc["threshold"]) if activation == "jumprelu" else None,
        W_skip=torch.stack([w.T for w in enc["W_skip"]]) if enc["W_skip"] else None,
        activation=activation,
        k=k,
        decoder_reader=reader if lazy else None,
        input_site=input_site,
        output_site=output_site,
        metadata={
            "format": "circuit_tracer_clt",
            "config_hooks": config_hooks or (input_site, output_site),
            "folder": str(folder),
        },
    )


def _reader(folder: Path):
    def read(layer: int, features: torch.Tensor | None) -> torch.Tensor:
        with safe_open(str(_dec(folder, layer)), framework="pt") as f:
            rows = f.get_slice(f"W_dec_{layer}")
            return rows[:] if features is None else rows[features.long()]

    return read


def save(clt: CrossLayerTranscoder, folder: str | Path) -> Path:
    """Write ``clt`` as a circuit-tracer CLT folder (decoders of a lazy CLT copied one layer at a time)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(clt.n_layers):
        tensors: dict[str, Any] = {
            f"W_enc_{i}": clt.W_enc[i],
            f"b_enc_{i}": clt.b_enc[i],
            f"b_dec_{i}": clt.b_dec[i],
        }
        if clt.thresholds is not None:
            tensors[f"threshold_{i}"] = clt.thresholds[i]
        if clt.W_skip is not None:
            tensors[f"W_skip_{i}"] = clt.W_skip[i].T
        write_safetensors(_enc(folder, i), _cpu(tensors), {})
        write_safetensors(_dec(folder, i), _cpu({f"W_dec_{i}": clt.decoder(i)}), {})
    return folder


def _cpu(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
