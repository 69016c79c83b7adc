"""The one table of checkpoint families: ``model_type`` (config.json) or GGUF architecture -> converter.

A family turns a checkpoint's config into a :class:`TransformerConfig` and its tensors into our parameter
names. Adding a family means writing its module and one row here; nothing else branches on model names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from interp.config import TransformerConfig
from interp.load import (
    bert,
    gemma,
    gguf_archs,
    gpt2,
    gpt_neox,
    gpt_oss,
    llama,
    mixtral,
    olmo2,
    olmoe,
    phi3,
    qwen2_moe,
    qwen3_moe,
)
from interp.load.errors import CheckpointError
from interp.load.gguf_hf import GGUFArchitecture
from interp.load.hf_config import HFConfig
from interp.load.tensors import TensorSource


@dataclass(frozen=True)
class Family:
    """How to convert one kind of checkpoint.

    Attributes:
        config: ``(config.json, tensors) -> TransformerConfig``.
        convert: ``(tensors, cfg, config.json) -> state dict`` in our names.
        from_gguf: for families a GGUF file can hold, the GGUF architecture (:mod:`interp.load.gguf_archs`):
            called on a ``GGUFFile`` it gives ``(config.json, tensors)`` in the family's Hugging Face names, so
            GGUF files reuse the same converter.
        prepare: for checkpoints that wrap the model (Gemma 3's image-and-text model holds a text model):
            ``(config.json, tensors) -> (config.json, tensors)`` of the model to load, before ``config``.
        quantized: the ``quantization_config.quant_method`` values whose tensors ``prepare`` dequantizes
            (GPT-OSS's experts: ``"mxfp4"``); a checkpoint stored in any other quantized form is refused before
            a tensor is read.
    """

    config: Callable[[HFConfig, TensorSource], TransformerConfig]
    convert: Callable[[TensorSource, TransformerConfig, HFConfig], dict[str, torch.Tensor]]
    from_gguf: GGUFArchitecture | None = None
    prepare: Callable[[HFConfig, TensorSource], tuple[HFConfig, TensorSource]] | None = None
    quantized: tuple[str, ...] = ()

    def read(self, hf: HFConfig, tensors: TensorSource) -> tuple[TransformerConfig, dict[str, torch.Tensor]]:
        """``(config.json, tensors)`` -> ``(TransformerConfig, state dict)``."""
        quantization = hf.get("quantization_config")
        if quantization is not None:
            method = quantization.get("quant_method") if isinstance(quantization, dict) else quantization
            if method not in self.quantized:
                raise CheckpointError(
                    f"{hf.source}: quantization_config quant_method={method!r} is not supported (the weights are "
                    f"stored quantized; supported here: {list(self.quantized) or 'none'}); load the unquantized "
                    "checkpoint, or a GGUF file of it"
                )
        if self.prepare is not None:
            hf, tensors = self.prepare(hf, tensors)
        cfg = self.config(hf, tensors)
        return cfg, self.convert(tensors, cfg, hf)


FAMILIES: dict[str, Family] = {
    "gpt2": Family(gpt2.config, gpt2.convert),
    "bert": Family(bert.config, bert.convert),
    "llama": Family(llama.config, llama.convert, from_gguf=gguf_archs.LLAMA),
    "mistral": Family(llama.config, llama.convert),
    "qwen2": Family(llama.qwen2_config, llama.convert, from_gguf=gguf_archs.QWEN2),
    "qwen3": Family(llama.qwen3_config, llama.convert, from_gguf=gguf_archs.QWEN3),
    "gemma": Family(gemma.gemma_config, gemma.convert, from_gguf=gguf_archs.GEMMA),
    "gemma2": Family(gemma.gemma2_config, gemma.convert, from_gguf=gguf_archs.GEMMA2),
    "gemma3_text": Family(gemma.gemma3_config, gemma.convert, from_gguf=gguf_archs.GEMMA3),
    "gemma3": Family(gemma.gemma3_config, gemma.convert, prepare=gemma.multimodal_text),
    "gpt_neox": Family(gpt_neox.config, gpt_neox.convert, from_gguf=gguf_archs.GPTNEOX),
    "phi3": Family(phi3.config, phi3.convert, from_gguf=gguf_archs.PHI3),
    "olmo2": Family(olmo2.config, olmo2.convert, from_gguf=gguf_archs.OLMO2),
    "mixtral": Family(mixtral.config, mixtral.convert, from_gguf=gguf_archs.LLAMA),
    "qwen2_moe": Family(qwen2_moe.config, qwen2_moe.convert, from_gguf=gguf_archs.QWEN2MOE),
    "qwen3_moe": Family(qwen3_moe.config, qwen3_moe.convert, from_gguf=gguf_archs.QWEN3MOE),
    "olmoe": Family(olmoe.config, olmoe.convert, from_gguf=gguf_archs.OLMOE),
    "gpt_oss": Family(
        gpt_oss.config,
        gpt_oss.convert,
        from_gguf=gguf_archs.GPT_OSS,
        prepare=gpt_oss.prepare,
        quantized=("mxfp4",),
    ),
}
# A GGUF architecture is read by the family of its model type; the file's own config.json may then name another
# (a llama file with experts is a Mixtral), which converts it.
GGUF_FAMILIES: dict[str, Family] = {
    f.from_gguf.name: FAMILIES[f.from_gguf.model_type] for f in FAMILIES.values() if f.from_gguf is not None
}

# Families that are refused by name, with the reason: loading them as another family would be a different model.
_MLA = "multi-head latent attention, which interp does not implement"
REFUSED = {
    "deepseek_v2": f"DeepSeek V2 uses {_MLA}",
    "deepseek_v3": f"DeepSeek V3 uses {_MLA}",
    "deepseek_v32": f"DeepSeek V3.2 uses {_MLA}",
    "kimi_k2": f"Kimi K2 (a DeepSeek V3) uses {_MLA}",
}
GGUF_REFUSED = {
    "deepseek2": f"DeepSeek V2 and V3 files use {_MLA}",
    "deepseek32": f"DeepSeek V3.2 files use {_MLA}",
}


def family_for(model_type: str | None, source: str) -> Family:
    """The family registered for ``model_type``; raises listing the supported ones."""
    if model_type in REFUSED:
        raise CheckpointError(
            f"{source}: model_type {model_type!r} is not supported: {REFUSED[model_type]}; supported: "
            f"{sorted(FAMILIES)}"
        )
    if model_type not in FAMILIES:
        raise CheckpointError(
            f"{source}: model_type {model_type!r} is not supported; supported: {sorted(FAMILIES)}"
        )
    return FAMILIES[model_type]


def gguf_family_for(architecture: str | None, source: str) -> Family:
    """The family that reads GGUF files of ``general.architecture``; raises listing the supported ones."""
    if architecture in GGUF_REFUSED:
        raise CheckpointError(
            f"{source}: GGUF architecture {architecture!r} is not supported: {GGUF_REFUSED[architecture]}; "
            f"supported: {sorted(GGUF_FAMILIES)}"
        )
    family = GGUF_FAMILIES.get(architecture)
    if family is None:
        raise CheckpointError(
            f"{source}: GGUF architecture {architecture!r} is not supported; supported: {sorted(GGUF_FAMILIES)}"
        )
    return family
