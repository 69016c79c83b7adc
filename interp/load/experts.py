"""Mixture-of-experts layers from a checkpoint: the router, the routed experts stacked once, a shared expert.

Expert weights reach the converters in three layouts, all read here into the stacked parameters of
:class:`~interp.model.moe.MoE` (``W_gate``, ``W_in``: ``[n_experts, d_model, d_expert]``; ``W_out``:
``[n_experts, d_expert, d_model]``):

- one tensor per expert and projection, ``experts.E.gate_proj.weight`` (Mixtral: ``experts.E.w1``, ``w3``,
  ``w2``), as the released checkpoints and ``save_pretrained`` write them;
- one stacked tensor per projection, ``experts.gate_proj.weight`` ``[n_experts, d_expert, d_model]``, as
  llama.cpp's converter stores them (what a GGUF file gives, :mod:`interp.load.gguf_archs`);
- ``experts.gate_up_proj`` ``[n_experts, 2 * d_expert, d_model]`` (the gate rows, then the up rows) and
  ``experts.down_proj``, as ``transformers`` holds them in memory (:func:`interp.from_hf`).

Each expert's ``[d_expert, d_model]`` matrix keeps its rows, so the stacked tensor is the parameter's storage
(``nn.Linear``'s order) and loading copies it no more than once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from interp.config import MLPType, TransformerConfig
from interp.load.errors import CheckpointError
from interp.load.hf_config import HFConfig
from interp.load.llama import dense_mlp
from interp.load.tensors import TensorSource


@dataclass(frozen=True)
class ExpertNames:
    """A family's names for its MoE layer, within ``model.layers.N.``.

    Attributes:
        blocks: the MoE module's name in files, then in ``transformers``' memory (``("block_sparse_moe",
            "mlp")`` for Mixtral); the first one whose router is present is read.
        router: the router's name in the MoE module.
        projections: the per-expert names of the gate, up and down projections.
        shared: the shared expert's module name (Qwen2-MoE), if the family has one.
        shared_gate: the shared expert's sigmoid gate, if it has one.
    """

    blocks: tuple[str, ...] = ("mlp",)
    router: str = "gate"
    projections: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj")
    shared: str | None = None
    shared_gate: str | None = None


def moe_reader(names: ExpertNames):
    """A ``moe`` argument of :func:`interp.load.llama.convert` for a family with these names."""

    def read(tensors: TensorSource, cfg: TransformerConfig, layer: str, dst: str) -> dict[str, torch.Tensor]:
        return read_moe(tensors, cfg, layer, dst, names)

    return read


def read_moe(
    tensors: TensorSource, cfg: TransformerConfig, layer: str, dst: str, names: ExpertNames
) -> dict[str, torch.Tensor]:
    """One MoE layer's parameters (docs/PARAMS.md), ``dst`` being ``blocks.L.mlp.``."""
    d, n = cfg.d_model, cfg.n_experts
    block = next(
        (f"{layer}{b}." for b in names.blocks if f"{layer}{b}.{names.router}.weight" in tensors), None
    )
    if block is None:
        asked = [f"{layer}{b}.{names.router}.weight" for b in names.blocks]
        stored = [tensors.file_name(name) for name in asked]
        own = [f for f, name in zip(stored, asked, strict=True) if f != name]  # a GGUF file's names, if any
        tried = " or ".join(repr(name) for name in dict.fromkeys(own or stored))
        raise CheckpointError(
            f"{tensors.source} has no router for layer {layer.rstrip('.').rsplit('.', 1)[-1]} ({tried}), which "
            f"its config (num_experts={n}) says it has"
        )
    router = tensors.take(block + f"{names.router}.weight", (n, d), "num_experts, hidden_size")
    state = {dst + "W_router": router.T}  # [d_model, n_experts]
    if cfg.router_bias:
        state[dst + "b_router"] = tensors.take(block + f"{names.router}.bias", (n,), "num_experts")
    state.update(_experts(tensors, cfg, block + "experts.", dst, names.projections))
    if names.shared is not None:  # a dense MLP of its own width
        shared = dense_mlp(
            tensors,
            cfg,
            block + f"{names.shared}.",
            dst + "shared_expert.",
            cfg.d_shared_expert,
            "shared_expert_intermediate_size",
        )
        state.update(shared)
    if names.shared_gate is not None:
        gate = tensors.take(block + f"{names.shared_gate}.weight", (1, d), "1, hidden_size")
        state[dst + "W_shared_gate"] = gate.T  # [d_model, 1]
    return state


def _experts(
    tensors: TensorSource, cfg: TransformerConfig, src: str, dst: str, projections: tuple[str, str, str]
) -> dict[str, torch.Tensor]:
    n, d, m = cfg.n_experts, cfg.d_model, cfg.d_expert
    gate, up, down = projections
    rows = {gate: (m, d), up: (m, d), down: (d, m)}
    meanings = {gate: "d_expert, hidden_size", up: "d_expert, hidden_size", down: "hidden_size, d_expert"}
    if src + "gate_up_proj" in tensors:  # transformers' fused layout, in memory
        fused = tensors.take(
            src + "gate_up_proj", (n, 2 * m, d), "num_experts, 2 * expert width, hidden_size"
        )
        stacks = {gate: fused[:, :m], up: fused[:, m:]}
        stacks[down] = tensors.take(src + "down_proj", (n, d, m), "num_experts, hidden_size, expert width")
    elif src + f"{gate}.weight" in tensors or _stacked_file(tensors, src + f"{gate}.weight"):
        # one stacked tensor per projection (GGUF, whose missing ones are named as the file names them)
        stacks = {
            name: tensors.take(src + f"{name}.weight", (n, *rows[name]), "num_experts, " + meanings[name])
            for name in projections
        }
    else:  # one tensor per expert (the released checkpoints)
        stacks = {
            name: torch.stack(
                [tensors.take(src + f"{e}.{name}.weight", rows[name], meanings[name]) for e in range(n)]
            )  # [n_experts, out, in]
            for name in projections
        }
    ours = {gate: "W_gate", up: "W_in", down: "W_out"}
    state = {dst + ours[name]: stack.transpose(1, 2) for name, stack in stacks.items()}  # [expert, in, out]
    if cfg.mlp_bias:  # one stacked bias per projection (GPT-OSS)
        for name in projections:
            bias = tensors.take(
                src + f"{name}.bias", (n, rows[name][0]), "num_experts, " + meanings[name].split(", ")[0]
            )
            state[dst + "b_" + ours[name][2:]] = bias
    return state


def routing(
    hf: HFConfig, *, experts_key: str | tuple[str, ...], width_key: str, renormalize_default: bool
) -> dict[str, Any]:
    """The :class:`~interp.config.TransformerConfig` fields of a ``config.json``'s routing, refusing the
    settings the MoE layer does not implement (scoring other than softmax, group-limited routing, scaled
    routing weights) rather than loading a different model.

    Args:
        hf: the config.
        experts_key: the key of the number of experts (``num_local_experts`` for Mixtral), or the keys it
            may have, the first one present read.
        width_key: the key of an expert's hidden width.
        renormalize_default: whether the chosen weights are renormalised when ``norm_topk_prob`` is absent.
    """
    keys = (experts_key,) if isinstance(experts_key, str) else experts_key
    experts_key = next((key for key in keys if hf.get(key) is not None), keys[0])
    n, k = hf.require(experts_key), hf.require("num_experts_per_tok")
    if not isinstance(n, int) or n < 1:
        raise CheckpointError(f"{hf.source}: {experts_key}={n!r}; a mixture-of-experts layer needs 1 or more")
    if not isinstance(k, int) or not 1 <= k <= n:
        raise CheckpointError(
            f"{hf.source}: num_experts_per_tok={k!r} must be from 1 to {experts_key}={n}: how many experts the "
            "router chooses for each token"
        )
    for key, neutral, why in _UNSUPPORTED_ROUTING:
        hf.expect(key, neutral, neutral[0], why)
    renormalize = hf.expect("norm_topk_prob", (True, False), renormalize_default, "it is a flag")
    return dict(
        n_experts=n,
        experts_per_token=k,
        d_expert=hf.require(width_key),
        expert_weights="softmax_topk" if renormalize else "softmax",
    )


# Routing settings of other MoE families, each with the values that mean "as here" (None: absent).
_UNSUPPORTED_ROUTING = (
    ("scoring_func", (None, "softmax"), "the router's scores are a softmax here"),
    ("topk_method", (None, "greedy"), "the top k is chosen over all experts here"),
    ("n_group", (None, 1), "group-limited routing is not implemented"),
    ("topk_group", (None, 1), "group-limited routing is not implemented"),
    ("routed_scaling_factor", (None, 1, 1.0), "routing weights are not scaled here"),
)


def qwen_moe(hf: HFConfig) -> dict[str, Any]:
    """The fields Qwen2-MoE and Qwen3-MoE share: routing over ``num_experts`` experts of width
    ``moe_intermediate_size`` (not renormalised unless ``norm_topk_prob``), some layers dense; their sliding
    windows, which the released models do not use, are refused."""
    hf.expect(
        "use_sliding_window", (False,), False, "the released Qwen MoE models attend to the whole context"
    )
    fields = routing(
        hf,
        experts_key=("num_experts", "num_local_experts"),
        width_key="moe_intermediate_size",
        renormalize_default=False,
    )
    return {**fields, "mlp_types": sparse_layers(hf)}


def sparse_layers(hf: HFConfig) -> tuple[MLPType, ...]:
    """``"moe"`` or ``"dense"`` per layer, from Qwen's ``decoder_sparse_step`` and ``mlp_only_layers``, as
    ``transformers`` decides it: layer ``i`` is sparse unless listed, when ``(i + 1) % step == 0``."""
    n = hf.require("num_hidden_layers")
    step = hf.get("decoder_sparse_step", 1)
    dense = hf.get("mlp_only_layers", [])
    if not isinstance(step, int) or step < 1:
        raise CheckpointError(f"{hf.source}: decoder_sparse_step={step!r} must be a positive integer")
    if not all(isinstance(i, int) and 0 <= i < n for i in dense):
        raise CheckpointError(f"{hf.source}: mlp_only_layers={dense!r} must list layers from 0 to {n - 1}")
    return tuple("moe" if i not in dense and (i + 1) % step == 0 else "dense" for i in range(n))


def _stacked_file(tensors: TensorSource, name: str) -> bool:
    """Whether the file stores ``name`` (a stacked projection) under a name of its own: a GGUF file, which holds
    its experts stacked, never one tensor per expert."""
    return tensors.file_name(name) != name
