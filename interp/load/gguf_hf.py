"""GGUF files -> the ``config.json`` and tensor names of the family that converts them.

llama.cpp's converter (``convert_hf_to_gguf.py``) writes a model's config as metadata under its architecture's
name (``gemma2.attention.sliding_window``) and renames every tensor (``blk.3.attn_q.weight``). Each
architecture in :mod:`interp.load.gguf_archs` says how to undo that for its family: the tensor names, the
``config.json`` keys its metadata gives, and what its converter changed on the way. This module does what they
share; the family's folder converter then runs as it does on a folder, so a GGUF file and the folder it was
converted from load as the same model.

What llama.cpp's converter changes, undone here:

- the rows of Q and K, permuted within each head for llama.cpp's interleaved rotary kernels, in the ``llama``
  architecture only (the others run llama.cpp's "NEOX" rotary, which is the Hugging Face layout);
- Gemma's norm gains, stored as ``1 + w``;
- a mixture-of-experts layer's experts, stacked into one ``[n_experts, rows, cols]`` tensor per projection
  (read as such by :mod:`interp.load.experts`), and Qwen2-MoE's shared-expert gate, stored as a vector;
- fused projections: ``attn_qkv`` holds ``[Q; K; V]`` (written for any architecture with ``--fuse-qkv``; always
  for Phi-3, whose ``ffn_up`` also holds the gate rows before the up rows, and for GPT-NeoX, whose Hugging Face
  tensor interleaves the three per head);
- rotary scaling, moved into metadata and tensors (read back by :mod:`interp.load.gguf_metadata`).

Every metadata key under the architecture's prefix must be understood: one that nothing reads raises, naming
it, since dropping a setting would load a different model.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from einops import rearrange

from interp.load.errors import CheckpointError
from interp.load.gguf_file import GGUFFile
from interp.load.gguf_metadata import Metadata, rope_scaling
from interp.load.hf_config import HFConfig
from interp.load.tensors import TensorSource

_LAYER = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)")
_GLOBAL = re.compile(r"(\w+)\.(weight|bias)")


ConfigFn = Callable[[Metadata, dict[str, Any], set[str]], dict[str, Any]]


@dataclass(frozen=True, kw_only=True)
class GGUFArchitecture:
    """How GGUF files of one ``general.architecture`` map back to their family's checkpoint.

    Calling it on a :class:`GGUFFile` gives ``(config.json, tensors)`` in the family's Hugging Face names.

    Attributes:
        name: ``general.architecture`` (``"gemma2"``).
        model_type: the ``config.json`` model type of the family that converts it (``"gemma2"``).
        tensors: GGUF name -> Hugging Face name, without ``.weight``/``.bias``: global names
            (``token_embd``) and layer names (``attn_q``, within ``blk.N.``).
        layer_prefix: the Hugging Face prefix of layer ``N``, with ``{}`` for ``N``.
        config: ``(metadata, config.json so far, GGUF tensor names) -> more config.json keys``: what this
            family adds to the keys every architecture shares.
        permute_qk: the Q and K rows are permuted for llama.cpp's interleaved rotary (llama only).
        norm_shift: added to every stored norm gain (Gemma's files hold ``1 + w``: ``-1.0``).
        qkv: what a fused ``attn_qkv`` becomes: ``"split"`` into the three projections, ``"fused"`` kept as
            the family's own fused ``[Q; K; V]`` tensor, or ``"per_head"``, reordered to GPT-NeoX's
            ``[q_h; k_h; v_h]`` per head.
        experts: the architecture can hold mixture-of-experts layers, whose settings its ``config`` reads;
            elsewhere an ``expert_count`` is refused.
    """

    name: str
    model_type: str
    tensors: Mapping[str, str]
    layer_prefix: str = "model.layers.{}."
    config: ConfigFn = field(default=lambda meta, hf, names: {})
    permute_qk: bool = False
    norm_shift: float = 0.0
    qkv: Literal["split", "fused", "per_head"] = "split"
    experts: bool = False

    def __call__(self, file: GGUFFile) -> tuple[HFConfig, TensorSource]:
        return to_hf(file, self)


def to_hf(file: GGUFFile, arch: GGUFArchitecture) -> tuple[HFConfig, TensorSource]:
    """The ``config.json`` and tensors (in the family's Hugging Face names) that ``file`` describes."""
    parts = file.get("split.count", 1)
    if parts > 1:
        raise CheckpointError(
            f"{file.path} is part of a GGUF file split in {parts}; merge the parts first "
            "(llama.cpp's gguf-split --merge) and load the merged file"
        )
    meta = Metadata(file, arch.name)
    raw = file.tensors()
    names = set(raw)
    values = _shared_config(meta, arch, raw)
    values.update(arch.config(meta, values, names))
    values = {k: v for k, v in values.items() if v is not None}
    unread = meta.unread()
    if unread:
        raise CheckpointError(
            f"{file.path} has metadata this loader does not understand: {unread}; it is probably a variant "
            f"of the {arch.name} architecture that is not supported, and ignoring the keys would load a "
            "different model"
        )
    heads = (values["num_attention_heads"], values["num_key_value_heads"], values["head_dim"])
    tensors: dict[str, torch.Tensor] = {}
    for name, tensor in raw.items():
        for gguf_name, piece in _pieces(name, tensor, arch, heads):
            tensors[_hf_name(gguf_name, arch, str(file.path))] = _fix(gguf_name, piece, arch, heads)
    stored_as = functools.partial(gguf_tensor_name, arch=arch)
    return HFConfig(values, str(file.path)), TensorSource(tensors, str(file.path), stored_as)


def gguf_tensor_name(name: str, arch: GGUFArchitecture) -> str | None:
    """The GGUF tensor a Hugging Face ``name`` is read from (``model.layers.1.block_sparse_moe.experts.w2.weight``
    -> ``blk.1.ffn_down_exps.weight``), or ``None`` for a name no GGUF tensor of ``arch`` becomes: the inverse of
    the name mapping, for messages about a tensor the file lacks."""
    stem, dot, kind = name.rpartition(".")
    if not dot or kind not in ("weight", "bias"):
        return None
    prefix = re.escape(arch.layer_prefix).replace(re.escape("{}"), r"(\d+)")
    layer = re.fullmatch(prefix + r"(.+)", stem)
    for base, hf in arch.tensors.items():
        if layer is not None and hf == layer.group(2):
            return f"blk.{layer.group(1)}.{base}.{kind}"
        if layer is None and hf == stem:
            return f"{base}.{kind}"
    return None


def _shared_config(meta: Metadata, arch: GGUFArchitecture, raw: dict[str, torch.Tensor]) -> dict[str, Any]:
    """The ``config.json`` keys every architecture's metadata gives."""
    file = meta.file
    d_model, n_heads = meta.integer("embedding_length"), meta.integer("attention.head_count")
    d_head = meta.integer("attention.key_length", d_model // n_heads)
    d_value = meta.integer("attention.value_length", d_head)
    if d_value != d_head:
        raise meta.refuse("attention.value_length", d_value, f"values and keys of different widths, {d_head}")
    if "token_embd.weight" not in raw:
        raise CheckpointError(f"{file.path} has no tensor 'token_embd.weight'; the file is incomplete")
    vocab = raw["token_embd.weight"].shape[0]
    stated = meta.integer("vocab_size", vocab)
    if stated != vocab:
        raise meta.refuse("vocab_size", stated, f"the token embedding has {vocab} rows")
    if not meta.get("attention.causal", True):
        raise meta.refuse("attention.causal", False, "only causal language models load from GGUF files")
    if not arch.experts:
        for key in ("expert_count", "expert_used_count"):
            if meta.integer(key, 0):
                raise meta.refuse(
                    key, meta.integer(key), f"no mixture-of-experts layers in {arch.name} files"
                )
    rotated = meta.integer("rope.dimension_count", d_head)
    values = {
        "model_type": arch.model_type,
        "_name_or_path": file.get("general.name", file.path.stem),
        "hidden_size": d_model,
        "num_hidden_layers": meta.integer("block_count"),
        "num_attention_heads": n_heads,
        "num_key_value_heads": meta.integer("attention.head_count_kv", n_heads),
        "head_dim": d_head,
        "intermediate_size": meta.integer("feed_forward_length"),
        "vocab_size": vocab,
        "max_position_embeddings": meta.integer("context_length"),
        "rms_norm_eps": meta.number("attention.layer_norm_rms_epsilon", None),
        "layer_norm_eps": meta.number("attention.layer_norm_epsilon", None),
        "rope_theta": meta.number("rope.freq_base", 10000.0),  # llama.cpp's default
        "partial_rotary_factor": rotated / d_head if rotated != d_head else None,
        "rope_scaling": rope_scaling(meta, raw),
        "tie_word_embeddings": "output.weight" not in raw,
    }
    return values


def unpermute_rotary_rows(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's Q/K row permutation: per head, rows ``(half, two)`` -> ``(two, half)``.

    Args:
        weight: ``[n_heads * d_head, ...]`` as stored in the GGUF file (a weight, or a 1-D bias).
        n_heads: heads of this projection (``n_kv_heads`` for K).
    """
    return rearrange(weight, "(h half two) ... -> (h two half) ...", h=n_heads, two=2)


def permute_rotary_rows(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """llama.cpp's permutation (the inverse of :func:`unpermute_rotary_rows`), for writing test files."""
    return rearrange(weight, "(h two half) ... -> (h half two) ...", h=n_heads, two=2)


def _pieces(
    name: str, tensor: torch.Tensor, arch: GGUFArchitecture, heads: tuple[int, int, int]
) -> list[tuple[str, torch.Tensor]]:
    """A fused ``attn_qkv`` split into ``attn_q``, ``attn_k``, ``attn_v`` where the family keeps them apart."""
    match = _LAYER.fullmatch(name)
    if match is None or match.group(2) != "attn_qkv" or arch.qkv != "split":
        return [(name, tensor)]
    h, g, e = heads
    layer, kind = match.group(1), match.group(3)
    if tensor.shape[0] != (h + 2 * g) * e:
        raise CheckpointError(
            f"{name} has {tensor.shape[0]} rows, not (head_count + 2 * head_count_kv) * key_length = "
            f"{(h + 2 * g) * e}"
        )
    q, k, v = tensor.split([h * e, g * e, g * e])
    return [(f"blk.{layer}.attn_{p}.{kind}", t) for p, t in zip("qkv", (q, k, v), strict=True)]


def _fix(
    name: str, tensor: torch.Tensor, arch: GGUFArchitecture, heads: tuple[int, int, int]
) -> torch.Tensor:
    """Undo what llama.cpp's converter did to this tensor's values or row order."""
    h, g, _ = heads
    base = name.rsplit(".", 2)[-2] if name.startswith("blk.") else name.split(".")[0]
    if arch.permute_qk and base in ("attn_q", "attn_k"):
        tensor = unpermute_rotary_rows(tensor, h if base == "attn_q" else g)
    if arch.norm_shift and base.endswith("norm") and name.endswith(".weight"):
        tensor = tensor + arch.norm_shift  # exact for stored gains within a factor two of 1 (Sterbenz)
    if base == "ffn_gate_inp_shexp" and tensor.ndim == 1:
        tensor = tensor[None]  # [1, d_model], as the Linear it was
    if arch.qkv == "per_head" and base == "attn_qkv":
        # [Q; K; V] -> each head's [q; k; v], as GPT-NeoX's query_key_value holds them
        tensor = rearrange(tensor, "(three h e) ... -> (h three e) ...", three=3, h=h)
    return tensor


def _hf_name(name: str, arch: GGUFArchitecture, source: str) -> str:
    layer = _LAYER.fullmatch(name)
    if layer is not None and layer.group(2) in arch.tensors:
        index, base, kind = layer.groups()
        return f"{arch.layer_prefix.format(index)}{arch.tensors[base]}.{kind}"
    top = _GLOBAL.fullmatch(name)
    if layer is None and top is not None and top.group(1) in arch.tensors:
        return f"{arch.tensors[top.group(1)]}.{top.group(2)}"
    raise CheckpointError(
        f"{source} has a tensor {name!r} that a {arch.name} GGUF file should not have; this loader does not "
        "understand it, and dropping it would load a different model"
    )
