"""Qwen3-MoE checkpoints (``qwen3_moe``, Qwen3-30B-A3B and its kin): Qwen3's attention with routed experts.

Attention is Qwen3's (per-head q/k RMSNorm, no biases unless ``attention_bias``). Each sparse layer's ``mlp``
has a router, ``gate``, over ``num_experts`` experts (``num_local_experts`` in the configs ``transformers`` 5
writes) of width ``moe_intermediate_size``, of which each token goes to ``num_experts_per_tok``; their
weights are the softmax at the chosen experts, renormalised over them when ``norm_topk_prob`` is true (as in
the released models). There is no shared expert. ``mlp_only_layers`` and ``decoder_sparse_step`` make layers
dense, of width ``intermediate_size``. Sliding windows are refused.
"""

from __future__ import annotations

from functools import partial

from interp.config import TransformerConfig
from interp.load import llama
from interp.load.experts import ExpertNames, moe_reader, qwen_moe
from interp.load.hf_config import HFConfig
from interp.load.tensors import TensorSource


def config(hf: HFConfig, tensors: TensorSource) -> TransformerConfig:
    return llama.config(hf, tensors, qk_norm="head", **qwen_moe(hf))


convert = partial(llama.convert, moe=moe_reader(ExpertNames()))
