"""Gemma Scope 2 transcoders: one safetensors file per layer, per-layer or cross-layer.

A per-layer file holds ``w_enc [d_model, d_transcoder]``, ``w_dec [d_transcoder, d_model]``, ``b_enc``,
``b_dec``, ``threshold`` (JumpReLU) and optionally ``affine_skip_connection [d_model_in, d_model_out]`` (the
skip adds ``x @ affine_skip_connection``). In the cross-layer variant layer ``i``'s ``w_dec`` is
``[d_transcoder, n_layers, d_model]``, of which slices ``i..n-1`` write to layers ``i..n-1`` (circuit-tracer
reads those and ignores the rest, which the files hold as zeros), and ``b_dec`` is the bias of layer ``i``'s
output. JumpReLU is ``pre * (pre > threshold)``, as circuit-tracer runs these files (the transcoders'
convention, ``rectify=False`` in :mod:`interp.sae.activation`; with the published positive thresholds the
same as Gemma Scope's ``relu(pre) * (pre > threshold)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors.torch import load_file

from interp.sae.formats.build import SAEFormatError
from interp.sae.transcoder import CrossLayerTranscoder, TranscoderSet
from interp.store.files import write_safetensors

_KEYS = ("w_enc", "w_dec", "b_enc", "b_dec", "threshold")


def _read(file: Path) -> dict[str, torch.Tensor]:
    tensors = load_file(str(file))
    missing = [k for k in _KEYS if k not in tensors]
    if missing:
        raise SAEFormatError(f"{file} lacks {missing}; a Gemma Scope 2 transcoder file has {list(_KEYS)}")
    return {k: v.float() for k, v in tensors.items()}


def to_circuit_tracer(tensors: dict[str, torch.Tensor], file: Path) -> dict[str, torch.Tensor]:
    """A per-layer file's tensors in circuit-tracer's names and orientation."""
    tensors = {k: v.float() for k, v in tensors.items()}
    if tensors["w_dec"].ndim != 2:
        raise SAEFormatError(
            f"{file}: w_dec has shape {list(tensors['w_dec'].shape)}; a per-layer file has 2 dims"
        )
    out = {
        "W_enc": tensors["w_enc"].T.contiguous(),
        "W_dec": tensors["w_dec"],
        "b_enc": tensors["b_enc"],
        "b_dec": tensors["b_dec"],
        "activation_function.threshold": tensors["threshold"],
    }
    if "affine_skip_connection" in tensors:
        out["W_skip"] = tensors["affine_skip_connection"].T.contiguous()
    return out


def is_clt(file: Path) -> bool:
    """Whether a Gemma Scope 2 file is a layer of a cross-layer transcoder (``w_dec`` with 3 dims)."""
    from safetensors import safe_open

    with safe_open(str(file), framework="pt") as f:
        return "w_dec" in set(f.keys()) and len(f.get_slice("w_dec").get_shape()) == 3


def load_clt(files: Mapping[int, Path], *, input_site: str, output_site: str) -> CrossLayerTranscoder:
    """A cross-layer transcoder from one file per layer ``0..n-1``."""
    n = len(files)
    if sorted(files) != list(range(n)):
        raise SAEFormatError(
            f"a Gemma Scope 2 CLT needs files for layers 0..{n - 1}; got layers {sorted(files)}"
        )
    layers = [_read(Path(files[i])) for i in range(n)]
    for i, t in enumerate(layers):
        if tuple(t["w_dec"].shape[1:2]) != (n,):
            raise SAEFormatError(
                f"{files[i]}: w_dec has shape {list(t['w_dec'].shape)}; a CLT over {n} layers has "
                f"[d_transcoder, {n}, d_model]"
            )
    skip = [("affine_skip_connection" in t) for t in layers]
    return CrossLayerTranscoder(
        torch.stack([t["w_enc"].T for t in layers]),
        [t["w_dec"][:, i:, :] for i, t in enumerate(layers)],
        torch.stack([t["b_enc"] for t in layers]),
        torch.stack([t["b_dec"] for t in layers]),
        threshold=torch.stack([t["threshold"] for t in layers]),
        W_skip=torch.stack([t["affine_skip_connection"].T for t in layers]) if all(skip) else None,
        activation="jumprelu",
        input_site=input_site,
        output_site=output_site,
        metadata={"format": "gemma_scope_2", "config_hooks": (input_site, output_site)},
    )


def save(tc: TranscoderSet | CrossLayerTranscoder, folder: str | Path) -> dict[int, Path]:
    """Write ``tc`` (JumpReLU) as Gemma Scope 2 files ``layer_{i}.safetensors``; returns layer -> file."""
    if tc.activation != "jumprelu":
        raise ValueError(f"Gemma Scope 2 files hold JumpReLU transcoders; this one is {tc.activation}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for row, layer in enumerate(tc.layers):
        w_dec = tc.decoder(layer)  # [d_transcoder, n_out, d_model]
        if isinstance(tc, CrossLayerTranscoder):
            pad = torch.zeros(tc.d_transcoder, layer, tc.d_model, dtype=w_dec.dtype, device=w_dec.device)
            w_dec = torch.cat([pad, w_dec], dim=1)  # [d_transcoder, n_layers, d_model]
        else:
            w_dec = w_dec[:, 0]
        tensors = {
            "w_enc": tc.W_enc[row].T,
            "w_dec": w_dec,
            "b_enc": tc.b_enc[row],
            "b_dec": tc.b_dec[row],
            "threshold": tc.thresholds[row],
        }
        if tc.W_skip is not None:
            tensors["affine_skip_connection"] = tc.W_skip[row].T
        out[layer] = folder / f"layer_{layer}.safetensors"
        write_safetensors(out[layer], {k: v.detach().cpu().contiguous() for k, v in tensors.items()}, {})
    return out
