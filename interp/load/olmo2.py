"""OLMo 2 checkpoints (``olmo2``): the Llama layout with its norms moved.

There is no norm before a sublayer; ``post_attention_layernorm`` and ``post_feedforward_layernorm`` norm each
sublayer's output before the residual add (``norm_placement="output"``), and ``q_norm``/``k_norm`` are RMSNorms
over the whole query and key projections (all heads at once, ``qk_norm="full"``), applied before rotary. Its
RMSNorms multiply by the gain in float32.
"""

from __future__ import annotations

from interp.config import TransformerConfig
from interp.load import llama
from interp.load.hf_config import HFConfig
from interp.load.tensors import TensorSource

convert = llama.convert


def config(hf: HFConfig, tensors: TensorSource) -> TransformerConfig:
    return llama.config(hf, tensors, norm_placement="output", qk_norm="full", norm_gain_in_float32=True)
