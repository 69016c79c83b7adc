"""EleutherAI sparsify's format: a folder with ``cfg.json`` and ``sae.safetensors``.

sparsify stores the encoder as a linear layer, ``encoder.weight [d_sae, d_in]`` and ``encoder.bias``, the
decoder as ``W_dec [d_sae, d_in]`` and ``b_dec``, and optionally ``W_skip [d_in, d_in]``. Its ``encode``
subtracts ``b_dec`` from the input unless the coder is a transcoder (``transcode: true``), applies ReLU to
``x @ encoder.weight.T + encoder.bias``, and keeps the ``k`` largest; ``decode`` sums the kept rows of ``W_dec``
and adds ``b_dec`` (and ``x @ W_skip.T`` with a skip connection). That is a TopK SAE with
``apply_b_dec_to_input = not transcode``: ReLU before or after choosing the top ``k`` gives the same output
(sparsify 1.3.3's ``fused_encoder`` applies it before; SAELens after), which is :class:`~interp.sae.SAE`'s
TopK, ``rectify=True`` in :mod:`interp.sae.activation`.

A folder is named after the module it hooks (``layers.6``, ``layers.6.mlp``); the residual-stream and
sublayer-output names map to this project's hooks, anything else needs ``hook_name=``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from safetensors.torch import load_file

from interp.sae.config import SAEConfig
from interp.sae.formats.build import SAEFormatError, build_sae
from interp.sae.module import SAE

CFG = "cfg.json"
WEIGHTS = "sae.safetensors"

_FOLDER_HOOKS = (
    (re.compile(r"^(?:.*\.)?(?:layers|h)\.(\d+)$"), "blocks.{}.hook_resid_post"),
    (re.compile(r"^(?:.*\.)?(?:layers|h)\.(\d+)\.(?:mlp)$"), "blocks.{}.hook_mlp_out"),
    (re.compile(r"^(?:.*\.)?(?:layers|h)\.(\d+)\.(?:self_attn|attn)$"), "blocks.{}.hook_attn_out"),
)


def hook_for_folder(name: str) -> str | None:
    """This project's hook for a sparsify folder named after a module, e.g. ``layers.6`` -> resid_post."""
    if name in ("embed_tokens", "wte"):
        return "hook_embed"
    for pattern, template in _FOLDER_HOOKS:
        match = pattern.match(name)
        if match:
            return template.format(match.group(1))
    return None


def load(folder: Path, *, device: Any = None, dtype: Any = None, hook_name: str | None = None) -> SAE:
    """Load a sparsify folder (see the module docstring)."""
    raw = json.loads((folder / CFG).read_text(encoding="utf-8"))
    if not isinstance(raw, dict) or "d_in" not in raw:
        raise SAEFormatError(f"{folder / CFG} is not a sparsify config: it has no 'd_in'")
    activation = raw.get("activation", "topk")
    if activation != "topk":
        raise SAEFormatError(f"{folder}: sparsify activation {activation!r} is not supported (only 'topk')")
    if raw.get("signed"):
        raise SAEFormatError(f"{folder}: signed sparsify coders are not supported")
    tensors = load_file(folder / WEIGHTS)
    if "encoder.weight" not in tensors or "W_dec" not in tensors:
        raise SAEFormatError(
            f"{folder / WEIGHTS} holds {sorted(tensors)}; a sparsify coder has encoder.weight, encoder.bias, "
            "W_dec and b_dec"
        )
    d_in = int(raw["d_in"])
    d_sae = int(raw.get("num_latents") or 0) or d_in * int(raw.get("expansion_factor", 32))
    transcoder = bool(raw.get("transcode", False))
    skip = "W_skip" in tensors or bool(raw.get("skip_connection", False))
    weights = {
        "W_enc": tensors["encoder.weight"].T,
        "b_enc": tensors["encoder.bias"],
        "W_dec": tensors["W_dec"],
        "b_dec": tensors["b_dec"],
    }
    if skip:
        if "W_skip" not in tensors:
            raise SAEFormatError(f"{folder}: cfg.json says skip_connection but {WEIGHTS} has no W_skip")
        weights["W_skip"] = tensors["W_skip"]
    d_out = int(tensors["b_dec"].shape[0])
    guessed = None if transcoder else hook_for_folder(folder.name)
    cfg = SAEConfig(
        d_in=d_in,
        d_sae=d_sae,
        architecture="topk",
        k=int(raw["k"]),
        transcoder=transcoder,
        d_out=d_out if transcoder else None,
        hook_name=hook_name or guessed,
        apply_b_dec_to_input=not transcoder,
        skip=skip,
        dtype=str(tensors["b_dec"].dtype).removeprefix("torch."),
        metadata={"format": "sparsify", "folder": folder.name, **raw},
    )
    return build_sae(cfg, weights, str(folder / WEIGHTS), device=device, dtype=dtype)
