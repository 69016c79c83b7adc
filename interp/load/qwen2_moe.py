"""Qwen2-MoE checkpoints (``qwen2_moe``, Qwen1.5-MoE): Qwen2's attention, routed experts and a gated shared expert.

Each sparse layer's ``mlp`` has a router, ``gate``, over ``num_experts`` experts of width
``moe_intermediate_size``, of which each token goes to ``num_experts_per_tok``; their weights are the softmax
over all experts at the chosen ones, renormalised over them only when ``norm_topk_prob`` is true. Beside them a
``shared_expert`` of width ``shared_expert_intermediate_size`` runs on every token, its output multiplied by
``sigmoid(shared_expert_gate(x))``. Layers listed in ``mlp_only_layers``, or off the ``decoder_sparse_step``,
have a dense MLP of width ``intermediate_size``. Queries, keys and values have biases unless ``qkv_bias`` is
false. Sliding windows (``use_sliding_window``), which the released models do not use, are refused.
"""

from __future__ import annotations

from functools import partial

from interp.config import TransformerConfig
from interp.load import llama
from interp.load.experts import ExpertNames, moe_reader, qwen_moe
from interp.load.hf_config import HFConfig
from interp.load.tensors import TensorSource

NAMES = ExpertNames(shared="shared_expert", shared_gate="shared_expert_gate")


def config(hf: HFConfig, tensors: TensorSource) -> TransformerConfig:
    return llama.config(
        hf,
        tensors,
        qkv_bias_only=bool(hf.get("qkv_bias", True)),
        d_shared_expert=hf.require("shared_expert_intermediate_size"),
        shared_expert_gate=True,
        **qwen_moe(hf),
    )


convert = partial(llama.convert, moe=moe_reader(NAMES))
