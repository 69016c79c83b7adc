"""Attention specs: per-head Q, K, V, scores and patterns from attention modules written by anyone.

Torch's module hooks see only a module's inputs and outputs; an attention module's heads, scores and pattern
live inside its ``forward``. An :class:`AttentionSpec` names the parts (projection submodules, head counts,
rotary, the mask, the scale), and while the module is attached its ``forward`` is replaced by a recomputation
from those parts that passes every intermediate through a :class:`~hooks.point.HookPoint`, with the contract's
names and shapes. A recomputation is only as good as its spec, so it is checked rather than trusted: the first
call also runs the module's own forward and compares outputs (and patterns, where the module returns them);
a spec that does not describe its module raises :class:`AttentionSpecError` with the largest difference.

As in the built-in attention, scores and patterns are materialised only when something hooks them (or the
module's own return value includes the pattern); otherwise the recomputation runs the fused kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch
from einops import rearrange
from torch import nn

# A part of the attention module: a submodule path relative to it (``"q_proj"``, ``"self.query"``) that is
# called on the input, or ``fn(module, x) -> tensor``.
Part = str | Callable[[nn.Module, torch.Tensor], torch.Tensor]
Args = tuple[Any, ...]
Kwargs = dict[str, Any]

POINT_NAMES = ("hook_q", "hook_k", "hook_v", "hook_rot_q", "hook_rot_k", "hook_attn_scores", "hook_pattern")
POINT_NAMES_OUT = ("hook_z", "hook_result")


class AttentionSpecError(ValueError):
    """An attention spec that is malformed, or that does not describe the module it is attached to."""


@dataclass(frozen=True, kw_only=True)
class AttentionSpec:
    """How an attention module computes its output, in parts.

    Tensors handed to and returned by the functions below use the contract's layout: ``q`` is
    ``[batch, pos, head, d_head]``, ``k`` and ``v`` are ``[batch, pos, kv_head, d_head]``.

    Args:
        n_heads: query heads.
        q, k, v: separate projections (submodule paths or ``fn(module, x)``).
        qkv: one fused projection whose output is ``q | k | v`` along the last axis, in ``qkv_order``.
        qkv_order: the order of the three blocks in the fused output, a permutation of ``"qkv"``.
        qkv_layout: ``"blocks"``: all query heads, then all key heads, then all value heads (GPT-2, Phi-3);
            ``"heads"``: head after head, each its own query, key and value (GPT-NeoX, BLOOM), which needs as
            many key/value heads as query heads.
        out: the output projection, called on ``z`` flattened to ``[batch, pos, head * d_head]``; ``None``
            when the module has none (then there is no ``hook_result``).
        n_kv_heads: key/value heads (grouped-query attention); default: inferred from the key width.
        d_head: width of a head; default: the query width over ``n_heads``.
        q_norm, k_norm: norms applied to the queries and keys after ``hook_q``/``hook_k`` and before rotary
            (Qwen3, Gemma 3, OLMo 2): submodule paths or ``fn(module, x)``, both or neither.
        qk_norm: what the norms see: ``"head"``, each head's ``[..., d_head]`` (Qwen3, Gemma 3), or
            ``"full"``, the whole projection ``[..., heads * d_head]`` (OLMo 2).
        rotary: ``fn(q, k, module, args, kwargs) -> (q, k)``, applied after ``hook_q``/``hook_k``.
        causal: a query attends only to itself and earlier keys when ``mask`` gives no mask (with keys from a
            cache, aligned at the end). As in ``scaled_dot_product_attention``, a mask replaces it.
        mask: ``fn(module, args, kwargs)`` -> ``None``, a boolean mask (True where a query may attend) or an
            additive float mask, broadcastable to ``[batch, head, query, key]``.
        scale: multiplies ``q k^T``; default ``1 / sqrt(d_head)``.
        softcap: scores become ``softcap * tanh(scores / softcap)`` after scaling and before the mask
            (Gemma 2). The fused kernel cannot cap scores, so such a spec always runs the explicit path.
        window: a query sees only the ``window`` latest keys, itself included (sliding-window attention),
            on top of whatever ``mask`` gives (models usually build the window into their mask already; this
            keeps it when they leave it to their kernel).
        inputs: ``fn(module, args, kwargs) -> x``, the tensor the projections read; default the first tensor
            argument.
        kv_cache: ``fn(k, v, module, args, kwargs) -> (k, v)``: store the new keys and values in a cache the
            module was given and return all of them (after rotary, as models cache them).
        post: ``fn(out, module, args, kwargs) -> out``, applied after the output projection (dropout, a
            residual add and norm that the module includes).
        output: ``fn(out, pattern) -> the module's return value``; default: the structure of the module's own
            first return value (a tensor, or a tuple of the output, patterns and ``None``).
        check_args: ``fn(args, kwargs) -> (args, kwargs)`` for the first call's check runs, so that state the
            forward mutates (a KV cache) is updated only once, by the real run.
    """

    n_heads: int
    q: Part | None = None
    k: Part | None = None
    v: Part | None = None
    qkv: Part | None = None
    qkv_order: str = "qkv"
    qkv_layout: Literal["blocks", "heads"] = "blocks"
    out: Part | None = None
    n_kv_heads: int | None = None
    d_head: int | None = None
    q_norm: Part | None = None
    k_norm: Part | None = None
    qk_norm: Literal["head", "full"] = "head"
    rotary: Callable[..., tuple[torch.Tensor, torch.Tensor]] | None = None
    causal: bool = False
    mask: Callable[[nn.Module, Args, Kwargs], torch.Tensor | None] | None = None
    scale: float | None = None
    softcap: float | None = None
    window: int | None = None
    inputs: Callable[[nn.Module, Args, Kwargs], torch.Tensor] | None = None
    kv_cache: Callable[..., tuple[torch.Tensor, torch.Tensor]] | None = None
    post: Callable[..., torch.Tensor] | None = None
    output: Callable[[torch.Tensor, torch.Tensor | None], Any] | None = None
    check_args: Callable[[Args, Kwargs], tuple[Args, Kwargs]] | None = None

    def __post_init__(self) -> None:
        separate = (self.q, self.k, self.v)
        if self.qkv is None and any(p is None for p in separate):
            raise AttentionSpecError("an attention spec needs q, k and v, or a fused qkv")
        if self.qkv is not None and any(p is not None for p in separate):
            raise AttentionSpecError("give either q, k and v or a fused qkv, not both")
        if sorted(self.qkv_order) != ["k", "q", "v"]:
            raise AttentionSpecError(f"qkv_order={self.qkv_order!r} must be a permutation of 'qkv'")
        for name, allowed in (("qkv_layout", ("blocks", "heads")), ("qk_norm", ("head", "full"))):
            if getattr(self, name) not in allowed:
                raise AttentionSpecError(
                    f"AttentionSpec.{name}={getattr(self, name)!r}; expected one of {allowed}"
                )
        if (self.q_norm is None) != (self.k_norm is None):
            raise AttentionSpecError("give both q_norm and k_norm, or neither")
        if self.softcap is not None and not self.softcap > 0:
            raise AttentionSpecError(f"AttentionSpec.softcap must be positive or None, got {self.softcap!r}")
        for name in ("n_heads", "n_kv_heads", "d_head", "window"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise AttentionSpecError(f"AttentionSpec.{name} must be a positive integer, got {value!r}")
        if self.n_kv_heads is not None and self.n_heads % self.n_kv_heads:
            raise AttentionSpecError(
                f"n_heads={self.n_heads} is not a multiple of n_kv_heads={self.n_kv_heads}"
            )

    def point_names(self) -> list[str]:
        """The hook points this spec exposes, in the order the recomputation reaches them."""
        rotated = self.rotary is not None or self.q_norm is not None  # hook_rot_*: after norms and rotary
        names = [n for n in POINT_NAMES if rotated or "rot" not in n]
        return names + [n for n in POINT_NAMES_OUT if self.out is not None or n != "hook_result"]


def head_layout(spec: AttentionSpec, widths: dict[str, int]) -> tuple[int, int, int]:
    """``(n_heads, n_kv_heads, d_head)`` for the projections' output widths, as the recomputation splits them.

    Args:
        spec: the spec (its head counts and ``d_head``, where given).
        widths: ``{"qkv": width}`` for a fused projection, else ``{"q": ..., "k": ..., "v": ...}``.

    Raises:
        AttentionSpecError: the widths cannot be split into heads as the spec says (the message is the
            detail; callers add which module).
    """
    h = spec.n_heads
    if "qkv" in widths and spec.qkv_layout == "heads" and spec.n_kv_heads not in (None, h):
        raise AttentionSpecError(
            f"a per-head fused qkv needs n_kv_heads = n_heads, got {spec.n_kv_heads} and {h}"
        )
    if "qkv" in widths:
        width = widths["qkv"]
        if spec.d_head is not None:
            e = spec.d_head
            g = spec.n_kv_heads or (width // e - h) // 2
        else:
            g = spec.n_kv_heads or h
            e = _divide(width, h + 2 * g, "the fused qkv width", "n_heads + 2 * n_kv_heads")
        split = {"q": h * e, "k": g * e, "v": g * e}
        if g < 1 or sum(split.values()) != width:
            raise AttentionSpecError(f"the fused qkv width is {width}, not q|k|v = {split}")
    else:
        e = spec.d_head or _divide(widths["q"], h, "the query width", "n_heads")
        g = spec.n_kv_heads or _divide(widths["k"], e, "the key width", "d_head")
    if g < 1 or h % g:
        raise AttentionSpecError(f"n_heads={h} is not a multiple of the {g} key/value heads")
    for what, heads in (("q", h), ("k", g), ("v", g)):
        if what in widths and widths[what] != heads * e:
            raise AttentionSpecError(f"{what} has width {widths[what]}, not {heads} heads x d_head={e}")
    return h, g, e


def _divide(width: int, by: int, what: str, by_what: str) -> int:
    if width % by:
        raise AttentionSpecError(f"{what} {width} is not divisible by {by_what}={by}")
    return width // by


def call_part(part: Part, module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Run one part of an attention module on ``x``."""
    if isinstance(part, str):
        return module.get_submodule(part)(x)
    return part(module, x)


def first_tensor(args: Args, kwargs: Kwargs) -> torch.Tensor | None:
    """The first tensor among the positional arguments, else among the keyword arguments."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value
    return None


def causal_mask(n_query: int, n_key: int, device: torch.device) -> torch.Tensor:
    """``[query, key]`` booleans; the queries are the last ``n_query`` of ``n_key`` positions."""
    offset = n_key - n_query
    return torch.ones(n_query, n_key, dtype=torch.bool, device=device).tril(diagonal=offset)


def window_mask(n_query: int, n_key: int, window: int, device: torch.device) -> torch.Tensor:
    """``[query, key]`` booleans: keys fewer than ``window`` positions before the query (or after it; the causal
    mask removes those); the queries are the last ``n_query`` of ``n_key`` positions."""
    offset = n_key - n_query
    return torch.ones(n_query, n_key, dtype=torch.bool, device=device).triu(diagonal=offset - window + 1)


def effective_mask(
    spec: AttentionSpec, mask: torch.Tensor | None, n_query: int, n_key: int, device: torch.device
) -> torch.Tensor | None:
    """The module's mask with the spec's window applied; ``None`` where the causal flag says it all.

    A boolean mask stays boolean (True: may attend); an additive float mask gets ``-inf`` outside the window.
    """
    if spec.window is None:
        return mask
    inside = window_mask(n_query, n_key, spec.window, device)
    if mask is None:
        return inside & causal_mask(n_query, n_key, device) if spec.causal else inside
    if mask.dtype == torch.bool:
        return mask & inside
    return mask.masked_fill(~inside, float("-inf"))


def out_weights(
    part: Part, module: nn.Module, n_heads: int, d_head: int, like: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The output projection as ``W_O [head, d_head, d_model]`` and its bias ``[d_model]``.

    ``nn.Linear`` stores ``[out, in]`` and GPT-2's ``Conv1D`` ``[in, out]`` (it has ``nf``); any other affine
    part is probed on the identity, which costs one call on ``head * d_head`` rows.
    """
    width = n_heads * d_head
    sub = module.get_submodule(part) if isinstance(part, str) else None
    weight = getattr(sub, "weight", None)
    if isinstance(sub, nn.Linear):
        w, b = sub.weight.T, sub.bias  # [head * d_head, d_model]
    elif weight is not None and weight.ndim == 2 and hasattr(sub, "nf") and weight.shape[0] == width:
        w, b = weight, getattr(sub, "bias", None)
    else:
        b = call_part(part, module, torch.zeros(1, width, dtype=like.dtype, device=like.device))[0]
        eye = torch.eye(width, dtype=like.dtype, device=like.device)
        w = call_part(part, module, eye) - b  # [head * d_head, d_model]
    return rearrange(w, "(h e) d -> h e d", h=n_heads), b
