"""Mixtral checkpoints (``mixtral``): Mistral's attention with a mixture of experts in every layer.

Each layer's ``block_sparse_moe`` (``mlp`` in ``transformers``' memory) has a router, ``gate``, over
``num_local_experts`` experts, of which each token goes to ``num_experts_per_tok``; an expert is a gated MLP of
width ``intermediate_size`` (``w1`` the gate, ``w3`` the up and ``w2`` the down projection), and the chosen
experts' weights are their softmax renormalised over the chosen ones. A ``sliding_window``, when set, applies
to every layer, as in Mistral.
"""

from __future__ import annotations

from functools import partial

from interp.config import TransformerConfig
from interp.load import llama
from interp.load.experts import ExpertNames, moe_reader, routing
from interp.load.hf_config import HFConfig
from interp.load.tensors import TensorSource

NAMES = ExpertNames(blocks=("block_sparse_moe", "mlp"), projections=("w1", "w3", "w2"))


def config(hf: HFConfig, tensors: TensorSource) -> TransformerConfig:
    experts = routing(
        hf, experts_key="num_local_experts", width_key="intermediate_size", renormalize_default=True
    )
    return llama.config(hf, tensors, **experts)


convert = partial(llama.convert, moe=moe_reader(NAMES))
