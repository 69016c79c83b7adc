"""Gemma Scope's format: one ``params.npz`` of JumpReLU weights per dictionary.

The file holds ``W_enc [d_in, d_sae]``, ``W_dec [d_sae, d_in]``, ``b_enc``, ``b_dec`` and ``threshold``. Gemma
Scope's reference code encodes ``relu(x @ W_enc + b_enc) * (pre > threshold)`` without subtracting ``b_dec``
first (the ReLU is :class:`~interp.sae.SAE`'s JumpReLU convention, ``rectify=True`` in
:mod:`interp.sae.activation`), and decodes ``acts @ W_dec + b_dec``. It is read with
``numpy.load(allow_pickle=False)``, which never unpickles.

The file does not say which hook it reads. Downloaded folders carry it in their path
(``gemma-scope-2b-pt-res/layer_12/width_16k/average_l0_82/params.npz``): ``-res`` is the stream after the
layer, ``-mlp`` the MLP output, ``-att`` the attention's ``hook_z``, ``-transcoders`` the MLP input to output
(the same hooks SAELens gives them); otherwise pass ``hook_name=``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from interp.sae.config import SAEConfig
from interp.sae.formats.build import SAEFormatError, build_sae
from interp.sae.module import SAE

PARAMS = "params.npz"


def hooks_for_path(path: Path) -> tuple[str | None, str | None, bool]:
    """``(hook_name, hook_name_out, transcoder)`` read from a Gemma Scope path, ``None`` where it says nothing."""
    text = path.as_posix()
    layer = re.search(r"layer_(\d+)", text)
    if layer is None:
        return None, None, "transcoder" in text
    n = layer.group(1)
    if "transcoder" in text:
        return f"blocks.{n}.ln2.hook_normalized", f"blocks.{n}.hook_mlp_out", True
    if re.search(r"-res\b|-res-|-res/", text):
        return f"blocks.{n}.hook_resid_post", None, False
    if re.search(r"-mlp\b|-mlp-|-mlp/", text):
        return f"blocks.{n}.hook_mlp_out", None, False
    if re.search(r"-att\b|-att-|-att/", text):
        return f"blocks.{n}.attn.hook_z", None, False
    return None, None, False


def _arrays(file: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(file, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    except ValueError as err:
        raise SAEFormatError(f"{file} holds pickled objects, which are never loaded ({err})") from None


def read_transcoder(file: Path) -> dict[str, torch.Tensor]:
    """One Gemma Scope transcoder layer in circuit-tracer's names and orientation (``W_enc [d_tc, d_model]``)."""
    arrays = {key.lower(): value for key, value in _arrays(file).items()}
    wanted = ("w_enc", "w_dec", "b_enc", "b_dec", "threshold")
    missing = [w for w in wanted if w not in arrays]
    if missing:
        raise SAEFormatError(f"{file} holds {sorted(arrays)}; a Gemma Scope JumpReLU file has {list(wanted)}")
    t = {key: torch.from_numpy(np.asarray(arrays[key], dtype=np.float32)) for key in wanted}
    return {
        "W_enc": t["w_enc"].T.contiguous(),
        "W_dec": t["w_dec"],
        "b_enc": t["b_enc"],
        "b_dec": t["b_dec"],
        "activation_function.threshold": t["threshold"],
    }


def save(sae: SAE, file: str | Path) -> Path:
    """Write a JumpReLU ``sae`` (no input normalisation) as a Gemma Scope ``params.npz``."""
    c = sae.cfg
    if c.architecture != "jumprelu" or c.apply_b_dec_to_input or c.normalize_activations != "none" or c.skip:
        raise ValueError(
            "Gemma Scope files hold JumpReLU dictionaries without b_dec subtracted from the input, input "
            f"normalisation or skip; this one is {c.architecture}, apply_b_dec_to_input={c.apply_b_dec_to_input}"
        )
    file = Path(file)
    file.parent.mkdir(parents=True, exist_ok=True)
    arrays = {name: getattr(sae, name) for name in ("W_enc", "W_dec", "b_enc", "b_dec", "threshold")}
    np.savez(file, **{k: v.detach().cpu().float().numpy() for k, v in arrays.items()})
    return file


def load(file: Path, *, device: Any = None, dtype: Any = None, hook_name: str | None = None) -> SAE:
    """Load a Gemma Scope ``params.npz`` (see the module docstring)."""
    arrays = _arrays(file)
    names = {key.lower(): key for key in arrays}
    wanted = ("w_enc", "w_dec", "b_enc", "b_dec", "threshold")
    missing = [w for w in wanted if w not in names]
    if missing:
        raise SAEFormatError(f"{file} holds {sorted(arrays)}; a Gemma Scope JumpReLU file has {list(wanted)}")
    tensors = {
        canonical: torch.from_numpy(np.asarray(arrays[names[key]], dtype=np.float32))
        for key, canonical in zip(wanted, ("W_enc", "W_dec", "b_enc", "b_dec", "threshold"), strict=True)
    }
    guessed_in, guessed_out, transcoder = hooks_for_path(file.resolve())
    d_in, d_sae = tensors["W_enc"].shape
    d_out = tensors["W_dec"].shape[1]
    transcoder = transcoder or d_out != d_in
    cfg = SAEConfig(
        d_in=int(d_in),
        d_sae=int(d_sae),
        architecture="jumprelu",
        transcoder=transcoder,
        d_out=int(d_out) if transcoder else None,
        hook_name=hook_name or guessed_in,
        hook_name_out=guessed_out if transcoder else None,
        apply_b_dec_to_input=False,
        reshape_activations="hook_z" if (hook_name or guessed_in or "").endswith("hook_z") else "none",
        metadata={"format": "gemma_scope", "file": file.name},
    )
    return build_sae(cfg, tensors, str(file), device=device, dtype=dtype)
