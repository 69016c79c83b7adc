"""Trained checkpoints, offline: Hugging Face folders, GGUF files and packaged models.

``load_checkpoint`` is the loader layer's whole output, ``(TransformerConfig, state_dict, Tokenizer)``,
with the state dict in the parameter names of docs/PARAMS.md; ``load`` builds the model from it. Checkpoint
families (GPT-2, BERT, Llama, Mistral, Qwen2/3, Gemma 1/2/3, GPT-NeoX, Phi-3, OLMo 2), and the GGUF architectures
they read, are registered in one table, :data:`interp.load.families.FAMILIES`.
Hugging Face and GGUF tensor names appear only inside this package.
"""

from interp.load.checkpoint import load_checkpoint
from interp.load.errors import CheckpointError
from interp.load.instantiate import load
from interp.load.packaged import PACKAGED_MODELS, format_packaged_models

__all__ = ["CheckpointError", "PACKAGED_MODELS", "format_packaged_models", "load", "load_checkpoint"]
