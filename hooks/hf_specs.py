"""Built-in attention specs for the attention classes of ``transformers``.

GPT-2, BERT, and the decoder families: Llama, Mistral and Qwen2 (their sliding windows), Qwen3 (per-head q/k
norms), Gemma 1, 2 and 3 (the query scale, Gemma 2's score soft-cap, windows, Gemma 3's q/k norms), OLMo 2
(q/k norms over the whole projection), Phi-3 (fused ``qkv_proj``, windows) and GPT-NeoX (``query_key_value``
fused per head, partial rotary).

Why here and not in ``interp``: ``hooks.attach(hf_model)`` should give per-head Q, K, V and patterns with no
spec written and nothing else imported, and ``hooks`` sits below ``interp``, so the table has to live in
``hooks``. It stays true to "hooks knows nothing about transformers" in the way that matters: this module
never imports the library. It is a table from class names (of classes defined in ``transformers``) to
functions that read the attention module's own attributes (``num_heads``, ``head_dim``, ``scaling``,
``is_causal``) and the forward's arguments by their names in its signature. Each spec is then checked on its
first call against the module's own forward, like every spec, so a ``transformers`` release that changes a
forward fails loudly instead of hooking the wrong thing. The specs follow the attention interface that every
``attn_implementation`` shares: the projections and the mask the model passes in are the same whether the
module would have run eager or SDPA attention, so the recomputation (and its patterns) does not depend on it.
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from hooks.attention_spec import Args, AttentionSpec, Kwargs


def builtin_spec(module: nn.Module) -> AttentionSpec | None:
    """The built-in spec for ``module``, or ``None`` if its class is not in the table."""
    cls = type(module)
    if not cls.__module__.startswith("transformers."):
        return None
    factory = _TABLE.get(cls.__name__)
    return factory(module) if factory is not None else None


@functools.cache
def _signature(cls: type) -> inspect.Signature:
    return inspect.signature(cls.forward)  # follows functools.wraps of decorated forwards


def _arguments(module: nn.Module, args: Args, kwargs: Kwargs) -> dict[str, Any]:
    """The call's arguments by parameter name (extra keyword arguments included)."""
    bound = _signature(type(module)).bind_partial(module, *args, **kwargs).arguments
    extra = bound.pop("kwargs", {})
    return {**bound, **extra}


def _argument(name: str) -> Callable[[nn.Module, Args, Kwargs], Any]:
    def read(module: nn.Module, args: Args, kwargs: Kwargs) -> Any:
        return _arguments(module, args, kwargs).get(name)

    return read


_CACHE_ARGUMENTS = ("cache", "past_key_values", "layer_past")  # GPT-NeoX calls it layer_past


def _kv_cache(k: torch.Tensor, v: torch.Tensor, module: nn.Module, args: Args, kwargs: Kwargs):
    """Append to the model's cache (``[batch, kv_head, pos, d_head]`` there); return all keys and values."""
    arguments = _arguments(module, args, kwargs)
    cache = next((arguments[n] for n in _CACHE_ARGUMENTS if arguments.get(n) is not None), None)
    if cache is None:
        return k, v
    cache = getattr(cache, "self_attention_cache", cache)  # encoder-decoder caches
    layer_idx = module.layer_idx if hasattr(module, "layer_idx") else module.self.layer_idx  # BertAttention
    k_all, v_all = cache.update(k.transpose(1, 2), v.transpose(1, 2), layer_idx)
    return k_all.transpose(1, 2), v_all.transpose(1, 2)  # [batch, key_pos, kv_head, d_head]


def _copy_cache(args: Args, kwargs: Kwargs) -> tuple[Args, Kwargs]:
    """The check's runs get their own copy of the cache, so that only the real run appends to it."""
    kwargs = {k: _clone_cache(v) if k in _CACHE_ARGUMENTS and v is not None else v for k, v in kwargs.items()}
    return args, kwargs


def _clone_cache(cache: Any) -> Any:
    """A copy whose layers can be updated without touching the original's.

    Shallow copies of the layer objects suffice: dynamic layers grow by assigning new tensors, and static
    layers write the same keys and values into the same places. Tensors are not copied (a deep copy of a
    cache holding tensors of an autograd graph is refused by torch).
    """
    clone = copy.copy(cache)
    for name, value in vars(cache).items():
        if isinstance(value, list):
            setattr(clone, name, [copy.copy(item) for item in value])
        elif isinstance(value, dict):
            setattr(clone, name, dict(value))
        elif hasattr(value, "update") and hasattr(value, "layers"):  # the parts of an encoder-decoder cache
            setattr(clone, name, _clone_cache(value))
    return clone


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _rotary(q: torch.Tensor, k: torch.Tensor, module: nn.Module, args: Args, kwargs: Kwargs):
    """Rotate-half rotary from the model's ``position_embeddings``, over the first ``rotary_dim`` dimensions of
    each head (all of them, or part: GPT-NeoX, Phi-4-mini)."""
    cos, sin = _arguments(module, args, kwargs)["position_embeddings"]  # [batch, pos, rotary_dim] each
    cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)  # [batch, pos, 1, rotary_dim]
    n = cos.shape[-1]

    def rotate(x: torch.Tensor) -> torch.Tensor:
        turned = x[..., :n] * cos + _rotate_half(x[..., :n]) * sin
        return torch.cat([turned, x[..., n:]], dim=-1) if x.shape[-1] > n else turned

    return rotate(q), rotate(k)


def _gpt2(module: nn.Module) -> AttentionSpec | None:
    if module.is_cross_attention:
        return None
    return AttentionSpec(
        qkv="c_attn",
        out="c_proj",
        n_heads=module.num_heads,
        d_head=module.head_dim,
        scale=module.scaling,
        causal=module.is_causal,
        inputs=_argument("hidden_states"),
        mask=_argument("attention_mask"),
        kv_cache=_kv_cache,
        check_args=_copy_cache,
        post=lambda out, m, args, kwargs: m.resid_dropout(out),
    )


def _bert_post(out: torch.Tensor, module: nn.Module, args: Args, kwargs: Kwargs) -> torch.Tensor:
    """BERT's attention block ends in its sibling ``output``: dropout, the residual add and LayerNorm."""
    hidden = _arguments(module, args, kwargs)["hidden_states"]
    return module.output.LayerNorm(module.output.dropout(out) + hidden)


def _bert(module: nn.Module) -> AttentionSpec | None:
    """On ``BertAttention``, which holds both the Q/K/V (``self``) and the output projection (``output``)."""
    if getattr(module, "is_cross_attention", False):
        return None
    inner = module.self
    return AttentionSpec(
        q="self.query",
        k="self.key",
        v="self.value",
        out="output.dense",
        n_heads=inner.num_attention_heads,
        d_head=inner.attention_head_size,
        scale=inner.scaling,
        causal=inner.is_causal,
        inputs=_argument("hidden_states"),
        mask=_argument("attention_mask"),
        kv_cache=_kv_cache,
        check_args=_copy_cache,
        post=_bert_post,
    )


def _decoder(module: nn.Module, **parts: Any) -> AttentionSpec:
    """The attention of the decoder families: grouped-query heads, rotary from the model, its mask and cache;
    ``parts`` names the projections (default: ``q_proj``, ``k_proj``, ``v_proj``, ``o_proj``) and adds what a
    family has on top (q/k norms, soft-cap, window)."""
    config = module.config
    fields: dict[str, Any] = dict(q="q_proj", k="k_proj", v="v_proj", out="o_proj")
    if "qkv" in parts:
        fields = dict(out="o_proj")
    fields.update(parts)
    return AttentionSpec(
        n_heads=config.num_attention_heads,
        n_kv_heads=getattr(config, "num_key_value_heads", None) or config.num_attention_heads,
        d_head=getattr(module, "head_dim", None) or module.head_size,
        scale=module.scaling,
        causal=module.is_causal,
        rotary=_rotary,
        inputs=_argument("hidden_states"),
        mask=_argument("attention_mask"),
        kv_cache=_kv_cache,
        check_args=_copy_cache,
        **fields,
    )


def _llama(module: nn.Module) -> AttentionSpec:
    """Llama, Gemma 1 and Qwen2; a Qwen2 layer's window is ``module.sliding_window`` (``None`` on its full
    layers, and on modules that have none)."""
    return _decoder(module, window=getattr(module, "sliding_window", None))


def _mistral(module: nn.Module) -> AttentionSpec:
    """Mistral: every layer slides when the config sets a window."""
    return _decoder(module, window=getattr(module.config, "sliding_window", None))


def _qwen3(module: nn.Module) -> AttentionSpec:
    return _decoder(module, window=module.sliding_window, q_norm="q_norm", k_norm="k_norm")


def _gemma2(module: nn.Module) -> AttentionSpec:
    """Gemma 2: the query scale from ``query_pre_attn_scalar`` (``module.scaling``), the score soft-cap and
    the window of its sliding layers; Gemma 3 adds per-head q/k norms."""
    norms = dict(q_norm="q_norm", k_norm="k_norm") if hasattr(module, "q_norm") else {}
    return _decoder(module, softcap=module.attn_logit_softcapping, window=module.sliding_window, **norms)


def _olmo2(module: nn.Module) -> AttentionSpec:
    return _decoder(module, q_norm="q_norm", k_norm="k_norm", qk_norm="full")


def _phi3(module: nn.Module) -> AttentionSpec:
    """Phi-3: one ``qkv_proj`` holding ``[Q; K; V]``, a window on every layer when the config sets one."""
    return _decoder(module, qkv="qkv_proj", window=getattr(module.config, "sliding_window", None))


def _gpt_neox(module: nn.Module) -> AttentionSpec:
    """GPT-NeoX (Pythia): ``query_key_value`` fused per head, partial rotary, ``dense`` out."""
    return _decoder(module, qkv="query_key_value", qkv_layout="heads", out="dense")


_TABLE: dict[str, Callable[[nn.Module], AttentionSpec | None]] = {
    "GPT2Attention": _gpt2,
    "BertAttention": _bert,
    "LlamaAttention": _llama,
    "MistralAttention": _mistral,
    "Qwen2Attention": _llama,
    "Qwen3Attention": _qwen3,
    "GemmaAttention": _llama,
    "Gemma2Attention": _gemma2,
    "Gemma3Attention": _gemma2,
    "Olmo2Attention": _olmo2,
    "Phi3Attention": _phi3,
    "GPTNeoXAttention": _gpt_neox,
}
