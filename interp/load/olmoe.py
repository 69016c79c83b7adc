"""OLMoE checkpoints (``olmoe``, OLMoE-1B-7B): the Llama layout with q/k norms and experts in every layer.

``q_norm`` and ``k_norm`` are RMSNorms over the whole query and key projections (all heads at once,
``qk_norm="full"``), before rotary; the block norms are Llama's (before each sublayer). Each layer's ``mlp`` has a
router, ``gate``, over ``num_experts`` experts of width ``intermediate_size``, of which each token goes to
``num_experts_per_tok``; their weights are the softmax at the chosen experts, renormalised over them only when
``norm_topk_prob`` is true (false in the released models). ``clip_qkv``, which clamps the projections, is refused.
"""

from __future__ import annotations

from functools import partial

from interp.config import TransformerConfig
from interp.load import llama
from interp.load.experts import ExpertNames, moe_reader, routing
from interp.load.hf_config import HFConfig
from interp.load.tensors import TensorSource


def config(hf: HFConfig, tensors: TensorSource) -> TransformerConfig:
    hf.expect("clip_qkv", (None,), None, "clamping the query, key and value projections is not implemented")
    experts = routing(hf, experts_key="num_experts", width_key="intermediate_size", renormalize_default=False)
    return llama.config(hf, tensors, qk_norm="full", **experts)


convert = partial(llama.convert, moe=moe_reader(ExpertNames()))
