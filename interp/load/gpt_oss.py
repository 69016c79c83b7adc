"""GPT-OSS checkpoints (``gpt_oss``, gpt-oss-20b and -120b): attention sinks, alternating windows, experts.

The Llama layout (RMSNorm before each sublayer, rotary in the "rotate half" layout, grouped-query attention),
with biases on Q, K, V and O, and:

- attention sinks: ``self_attn.sinks``, one learned logit per head that joins each row's softmax
  (``TransformerConfig.attn_sinks``);
- sliding-window and full attention alternating (``layer_types``; the first layer slides), YaRN rotary;
- a mixture of experts in every layer: a router with a bias, ``mlp.router``; each token's top
  ``num_experts_per_tok`` experts weighted by a softmax over their logits; experts of width
  ``intermediate_size`` with biases and a clamped gated unit, ``(clamp(up, -l, l) + 1) * g * sigmoid(1.702 g)``
  with ``g = min(gate, l)`` and ``l = swiglu_limit`` (``glu_clamp``, ``act="gelu_quick"``).

The experts arrive in three forms, which :func:`prepare` turns into one stacked tensor per projection and bias
(``experts.gate_proj.weight`` ``[n_experts, d_expert, d_model]``... as :mod:`interp.load.experts` reads them):
``transformers``' ``experts.gate_up_proj`` ``[n_experts, d_model, 2 * d_expert]`` (gate and up columns
interleaved: gate ``0::2``, up ``1::2``) and ``down_proj`` ``[n_experts, d_expert, d_model]``, in a folder of
unquantized weights or in memory (:func:`interp.from_hf`); the released checkpoints' MXFP4 ``*_blocks`` and
``*_scales`` (``quantization_config.quant_method = "mxfp4"``, rows in ``nn.Linear``'s order, gate and up rows
interleaved), dequantized here (:mod:`interp.load.mxfp4`); and GGUF files, already stacked per projection.
"""

from __future__ import annotations

from functools import partial

import torch

from interp.config import TransformerConfig
from interp.load import llama, mxfp4
from interp.load.errors import CheckpointError
from interp.load.experts import ExpertNames, moe_reader, routing
from interp.load.hf_config import HFConfig
from interp.load.tensors import TensorSource

NAMES = ExpertNames(router="router")
_ALPHA = 1.702  # the experts' sigmoid gain, gelu_quick's


def config(hf: HFConfig, tensors: TensorSource) -> TransformerConfig:
    hf.expect("swiglu_alpha", (_ALPHA,), _ALPHA, f"the experts' gate is g * sigmoid({_ALPHA} g) here")
    limit = hf.get("swiglu_limit", 7.0)
    if not isinstance(limit, int | float) or not limit > 0:
        raise CheckpointError(
            f"{hf.source}: swiglu_limit={limit!r}; the experts' clamp must be a positive number"
        )
    n = hf.require("num_hidden_layers")
    if hf.get("layer_types") is None:  # transformers' default: the even layers slide
        alternating = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
        hf = HFConfig({**hf.values, "layer_types": alternating}, hf.source)
    experts = routing(
        hf,
        experts_key=("num_local_experts", "num_experts"),
        width_key="intermediate_size",
        renormalize_default=True,
    )
    return llama.config(
        hf,
        tensors,
        act="gelu_quick",
        attn_bias=bool(hf.get("attention_bias", True)),
        attn_sinks=True,
        mlp_bias=True,
        router_bias=True,
        glu_clamp=float(limit),
        eps=hf.get("rms_norm_eps", 1e-5),
        **experts,
    )


def prepare(hf: HFConfig, tensors: TensorSource) -> tuple[HFConfig, TensorSource]:
    """Each layer's experts, in whichever form they arrive, as one stacked tensor per projection and bias."""
    outside = [
        name for name in tensors.names() if name.endswith(("_blocks", "_scales")) and ".experts." not in name
    ]
    if outside:
        raise CheckpointError(
            f"{hf.source}: {outside[:4]} are stored in MXFP4, but only the experts' weights are read from it "
            "(as the released GPT-OSS checkpoints store them); load a checkpoint with the rest unquantized"
        )
    tensors.rename(r"(model\.layers\.\d+\.self_attn\.sinks)\.weight", r"\1")  # GGUF's attn_sinks.weight
    n = hf.get("num_local_experts") or hf.require("num_experts")
    d, m = hf.require("hidden_size"), hf.require("intermediate_size")
    for layer in range(hf.require("num_hidden_layers")):
        src = f"model.layers.{layer}.mlp.experts."
        if src + "gate_up_proj_blocks" in tensors:
            gate_up = _mxfp4(
                tensors, src + "gate_up_proj", (n, 2 * m, d), "num_local_experts, 2 * intermediate_size"
            )
            down = _mxfp4(tensors, src + "down_proj", (n, d, m), "num_local_experts, hidden_size")
            tensors.put(src + "gate_proj.weight", gate_up(0))  # [n_experts, d_expert, d_model]
            tensors.put(src + "up_proj.weight", gate_up(1))
            tensors.put(src + "down_proj.weight", down(None))  # [n_experts, d_model, d_expert]
        elif src + "gate_up_proj" in tensors:
            fused = tensors.take(
                src + "gate_up_proj", (n, d, 2 * m), "num_local_experts, hidden_size, 2 * intermediate_size"
            )
            down = tensors.take(
                src + "down_proj", (n, m, d), "num_local_experts, intermediate_size, hidden_size"
            )
            # [n_experts, out, in], each expert's rows contiguous as the model holds them (what grouped products
            # need); the interleaved columns cannot be viewed that way, so this is the one copy
            tensors.put(src + "gate_proj.weight", fused[..., 0::2].transpose(1, 2).contiguous())
            tensors.put(src + "up_proj.weight", fused[..., 1::2].transpose(1, 2).contiguous())
            tensors.put(src + "down_proj.weight", down.transpose(1, 2).contiguous())
        if src + "gate_up_proj_bias" in tensors:
            bias = tensors.take(
                src + "gate_up_proj_bias", (n, 2 * m), "num_local_experts, 2 * intermediate_size"
            )
            tensors.put(src + "gate_proj.bias", bias[:, 0::2])
            tensors.put(src + "up_proj.bias", bias[:, 1::2])
            down_bias = tensors.take(src + "down_proj_bias", (n, d), "num_local_experts, hidden_size")
            tensors.put(src + "down_proj.bias", down_bias)
    return hf, tensors


def _mxfp4(tensors: TensorSource, name: str, shape: tuple[int, int, int], meaning: str):
    """The packed blocks and scales of ``name`` (a ``[n_experts, rows, cols]`` matrix), and a function that
    dequantizes every row (``None``) or every other row from ``start`` (gate and up rows interleave)."""
    n, rows, cols = shape
    if cols % mxfp4.GROUP:
        raise CheckpointError(
            f"{tensors.source}: {name} is stored in MXFP4, whose groups of {mxfp4.GROUP} cannot split rows of "
            f"{cols} values; the config does not match the weights"
        )
    groups = cols // mxfp4.GROUP
    blocks = tensors.take(name + "_blocks", (n, rows, groups, mxfp4.GROUP // 2), meaning + ", groups, 16")
    scales = tensors.take(name + "_scales", (n, rows, groups), meaning + ", groups")

    def rows_from(start: int | None) -> torch.Tensor:
        step = slice(None) if start is None else slice(start, None, 2)
        return mxfp4.dequantize(blocks[:, step], scales[:, step], name)

    return rows_from


convert = partial(llama.convert, moe=moe_reader(NAMES))
