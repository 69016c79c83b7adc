"""llamascopium's Lorsa folders (``sae_type: "lorsa"``), read into and written from :class:`~interp.sae.lorsa.Lorsa`.

The weights map one to one (``W_Q``, ``W_K [n_qk_heads, d_model, d_qk_head]``, ``W_V``, ``W_O [n_heads,
d_model]``, ``b_Q``, ``b_K``, ``b_V``, ``b_D``; ``ln_q.w``, ``ln_k.w`` for the post-QK RMS norm; JumpReLU's
``activation_function.log_jumprelu_threshold``). The rotary settings are turned into interp's rotate-half
layout on the way in, without changing a score:

- ``rotary_adjacent_pairs`` (GPT-J's layout, llamascopium's default) rotates dimensions ``(2i, 2i + 1)``;
  permuting the first ``rotary_dim`` dimensions of every query and key (and their biases and norm gains) to
  ``0, 2, 4, ..., 1, 3, 5, ...`` makes those pairs ``(i, i + rotary_dim / 2)``, and a dot product of two vectors
  permuted alike is unchanged;
- ``rotary_scale`` repeats each query and key dimension that many times before rotating: the projections'
  columns (and gains) are repeated instead, which the RMS norm, the mean of squares, does not see;
- ``use_NTK_by_parts_rope`` is Llama 3.1's frequency rule, interp's ``RotaryScaling(kind="llama3")``.

Written back (:func:`save`), a layer is one folder in the rotate-half layout (``rotary_adjacent_pairs: false``,
``rotary_scale: 1``) with ``norm_activation: "inference"``, holding the buffers llamascopium's strict loading
asks for (``mask``, ``IGNORE``, the rotary tables), so llamascopium reads what interp trains.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from interp.atomic import write_together
from interp.config import RotaryScaling
from interp.sae.formats.build import SAEFormatError
from interp.sae.formats.llamascopium_files import (
    CONFIG,
    WEIGHTS,
    d_sae,
    gated,
    layer_site,
    scales,
    tensor,
    threshold,
)
from interp.sae.lorsa import Lorsa, LorsaConfig, LorsaLayer


def from_folder(config: dict[str, Any], tensors: dict[str, torch.Tensor], source: str) -> Lorsa:
    """The Lorsa of one llamascopium folder's config and tensors, at the layer its hooks name."""
    hook_in, hook_out = config["hook_point_in"], config["hook_point_out"]
    (layer, input_site), (out_layer, output_site) = layer_site(hook_in, source), layer_site(hook_out, source)
    if layer != out_layer:
        raise SAEFormatError(
            f"{source}: a Lorsa reading layer {layer} and writing layer {out_layer} is not read"
        )
    d, n = config["d_model"], d_sae(config)
    m, e = config["n_qk_heads"], config["d_qk_head"]
    weights = {name: tensor(tensors, name, (n, d), source) for name in ("W_V", "W_O")}
    weights["b_V"] = tensor(tensors, "b_V", (n,), source)
    weights["b_O"] = (
        tensor(tensors, "b_D", (d,), source) if config.get("use_decoder_bias", True) else torch.zeros(d)
    )
    stored = tensors.get("W_Q", torch.empty(0)).shape[:1]
    m_file = (
        stored[0] if stored and stored[0] and m % stored[0] == 0 else m
    )  # fewer QK heads stored: repeated
    qk = {name: tensor(tensors, name, (m_file, d, e), source) for name in ("W_Q", "W_K")}
    qk |= {name: tensor(tensors, name, (m_file, e), source) for name in ("b_Q", "b_K")}
    qk_norm = config.get("use_post_qk_ln", False)
    if qk_norm:
        if config.get("normalization_type") != "RMS":
            raise SAEFormatError(
                f"{source}: use_post_qk_ln with normalization_type={config.get('normalization_type')!r}; "
                "llamascopium runs only 'RMS'"
            )
        qk |= {
            ours: tensor(tensors, theirs, (m_file, e), source)
            for ours, theirs in (("q_norm", "ln_q.w"), ("k_norm", "ln_k.w"))
        }
    qk = {name: w.repeat_interleave(m // m_file, dim=0) for name, w in qk.items()}
    act = config.get("act_fn", "relu").lower()
    if act not in ("relu", "jumprelu", "topk", "batchtopk"):
        raise SAEFormatError(f"{source}: act_fn={act!r}; a Lorsa runs relu, jumprelu, topk or batchtopk")
    if act == "jumprelu":
        weights["threshold"] = threshold(tensors)
    rotary = config.get("positional_embedding_type", "rotary") == "rotary"
    scale = int(config.get("rotary_scale", 1))
    if scale > 1:  # each query and key dimension repeated before rotating: repeat the columns instead
        qk = {name: w.repeat_interleave(scale, dim=-1) for name, w in qk.items()}
        e *= scale
    rotary_dim = int(config["rotary_dim"]) if rotary else None
    if rotary and config.get("rotary_adjacent_pairs", True):
        order = torch.cat(
            [torch.arange(0, rotary_dim, 2), torch.arange(1, rotary_dim, 2), torch.arange(rotary_dim, e)]
        )
        qk = {name: w[..., order] for name, w in qk.items()}
    cfg = LorsaConfig(
        d_model=d,
        n_heads=n,
        n_qk_heads=m,
        d_qk_head=e,
        positional="rotary" if rotary else "none",
        rotary_dim=rotary_dim,
        rotary_base=float(config.get("rotary_base", 10000)),
        rotary_scaling=_scaling(config, source) if rotary else None,
        n_ctx=int(config["n_ctx"]),
        attn_scale=float(config.get("attn_scale") or math.sqrt(config["d_qk_head"])),
        qk_norm="rmsnorm" if qk_norm else "none",
        eps=float(config.get("eps", 1e-6)),
        activation=act,
        k=int(config.get("top_k", 50)) if act in ("topk", "batchtopk") else None,
        gate_by_decoder_norm=gated(config),
        input_site=input_site,
        output_site=output_site,
    )
    lorsa_layer = LorsaLayer(cfg).double()  # the scales are folded in float64; the loader casts after
    with torch.no_grad():
        for name, w in (weights | qk).items():
            getattr(lorsa_layer, name).copy_(w)
        lorsa_layer.fold_scales(*scales(config, tensors, [hook_in, hook_out], source))
    return Lorsa({layer: lorsa_layer}, metadata={"format": "llamascopium", "llamascopium_config": config})


def _scaling(config: dict[str, Any], source: str) -> RotaryScaling | None:
    if not config.get("use_NTK_by_parts_rope", False):
        return None
    try:
        return RotaryScaling(
            kind="llama3",
            factor=float(config["NTK_by_parts_factor"]),
            low_freq_factor=float(config["NTK_by_parts_low_freq_factor"]),
            high_freq_factor=float(config["NTK_by_parts_high_freq_factor"]),
            original_n_ctx=int(config["old_context_len"]),
        )
    except (KeyError, ValueError) as err:
        raise SAEFormatError(f"{source}: use_NTK_by_parts_rope with unusable settings: {err}") from None


def save(lorsa: Lorsa, folder: str | Path) -> list[Path]:
    """Write each layer of ``lorsa`` as a llamascopium folder: ``folder`` itself for one layer, else
    ``folder/L{layer}`` per layer. Returns the folders written.

    Raises:
        ValueError: a setting llamascopium's config cannot say (a rotary scaling other than Llama 3.1's, a
        JumpReLU threshold that is not positive).
    """
    folder = Path(folder)
    written = []
    for layer in lorsa.layers:
        target = folder if len(lorsa.layers) == 1 else folder / f"L{layer}"
        target.mkdir(parents=True, exist_ok=True)
        config, tensors = _to_llamascopium(lorsa.layer(layer), layer)
        text = json.dumps(config, indent=4) + "\n"
        write_together(
            target,
            {
                WEIGHTS: lambda path, t=tensors: save_file(t, path),
                CONFIG: lambda path, t=text: path.write_text(t),
            },
        )
        written.append(target)
    return written


def _to_llamascopium(layer: LorsaLayer, index: int) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    cfg = layer.cfg
    scaling = cfg.rotary_scaling
    if scaling is not None and scaling.kind != "llama3":
        raise ValueError(
            f"llamascopium's Lorsa config has no field for rotary scaling {scaling.kind!r} (only Llama 3.1's, "
            "use_NTK_by_parts_rope)"
        )
    expansion = cfg.n_heads / cfg.d_model
    if int(cfg.d_model * expansion) != cfg.n_heads:  # llamascopium floors d_model * expansion_factor
        expansion = (cfg.n_heads + 0.5) / cfg.d_model
    config = {
        "sae_type": "lorsa",
        "d_model": cfg.d_model,
        "expansion_factor": expansion,
        "hook_point_in": f"blocks.{index}.{cfg.input_site}",
        "hook_point_out": f"blocks.{index}.{cfg.output_site}",
        "n_qk_heads": cfg.n_qk_heads,
        "d_qk_head": cfg.d_qk_head,
        "positional_embedding_type": cfg.positional,
        "rotary_dim": cfg.rotary_dim,
        "rotary_base": cfg.rotary_base,
        "rotary_adjacent_pairs": False,
        "rotary_scale": 1,
        "use_NTK_by_parts_rope": scaling is not None,
        "NTK_by_parts_factor": scaling.factor if scaling else 1.0,
        "NTK_by_parts_low_freq_factor": scaling.low_freq_factor if scaling else 1.0,
        "NTK_by_parts_high_freq_factor": scaling.high_freq_factor if scaling else 1.0,
        "old_context_len": scaling.original_n_ctx if scaling else 2048,
        "n_ctx": cfg.n_ctx,
        "attn_scale": cfg.attn_scale,
        "use_post_qk_ln": cfg.qk_norm == "rmsnorm",
        "normalization_type": "RMS" if cfg.qk_norm == "rmsnorm" else None,
        "eps": cfg.eps,
        "act_fn": cfg.activation,
        "top_k": cfg.k if cfg.k is not None else 50,
        "use_decoder_bias": True,
        "norm_activation": "inference",
        "sparsity_include_decoder_norm": cfg.gate_by_decoder_norm,
        "dtype": str(layer.W_O.dtype).removeprefix("torch."),
    }
    names = {"W_Q": "W_Q", "W_K": "W_K", "W_V": "W_V", "W_O": "W_O", "b_Q": "b_Q", "b_K": "b_K", "b_V": "b_V"}
    names |= {"b_O": "b_D", "q_norm": "ln_q.w", "k_norm": "ln_k.w"}
    tensors = {
        theirs: getattr(layer, ours) for ours, theirs in names.items() if getattr(layer, ours) is not None
    }
    if layer.threshold is not None:
        if not bool((layer.threshold > 0).all()):
            raise ValueError(
                "llamascopium stores JumpReLU thresholds as logarithms; every threshold must be positive"
            )
        tensors["activation_function.log_jumprelu_threshold"] = layer.threshold.log()
    dtype = layer.W_O.dtype
    tensors["mask"] = torch.ones(cfg.n_ctx, cfg.n_ctx, dtype=torch.bool).tril()
    tensors["IGNORE"] = torch.tensor(-torch.inf, dtype=dtype)
    if cfg.positional == "rotary":
        cos, sin = layer.rotary(torch.arange(cfg.n_ctx)[None], torch.float32)  # [1, n_ctx, 1, rotary_dim]
        tensors["rotary_sin"], tensors["rotary_cos"] = sin[0, :, 0].to(dtype), cos[0, :, 0].to(dtype)
    return config, {name: t.detach().cpu().contiguous() for name, t in tensors.items()}
