"""The parameter names and shapes a state dict must have for a config (the contract in docs/PARAMS.md).

Every loader checks its output here before a model is built, so a mismatch is reported by name, with both
shapes, instead of surfacing later as an error inside ``load_state_dict``.
"""

from __future__ import annotations

import torch

from interp.config import TransformerConfig
from interp.load.errors import CheckpointError


def expected_shapes(cfg: TransformerConfig) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every parameter of a :class:`~interp.HookedTransformer` built from ``cfg``."""
    d, v, h, g, e, m = cfg.d_model, cfg.d_vocab, cfg.n_heads, cfg.n_kv_heads, cfg.d_head, cfg.d_mlp
    shapes: dict[str, tuple[int, ...]] = {"embed.W_E": (v, d)}
    if cfg.positional == "learned":
        shapes["pos_embed.W_pos"] = (cfg.n_ctx, d)
    if cfg.embed_norm:
        shapes.update(_norm("embed_ln", cfg))
    pre_norms = cfg.norm_placement != "output"
    post_norms = cfg.norm_placement in ("sandwich", "output")
    for layer in range(cfg.n_layers):
        p = f"blocks.{layer}."
        if pre_norms:
            shapes.update(_norm(p + "ln1", cfg))
            shapes.update(_norm(p + "ln2", cfg))
        if post_norms:
            shapes.update(_norm(p + "ln1_post", cfg))
            shapes.update(_norm(p + "ln2_post", cfg))
        shapes.update({p + "attn.W_Q": (h, d, e), p + "attn.W_K": (g, d, e), p + "attn.W_V": (g, d, e)})
        shapes[p + "attn.W_O"] = (h, e, d)
        if cfg.attn_bias:
            shapes.update({p + "attn.b_Q": (h, e), p + "attn.b_K": (g, e), p + "attn.b_V": (g, e)})
            shapes[p + "attn.b_O"] = (d,)
        if cfg.attn_sinks:
            shapes[p + "attn.sinks"] = (h,)
        if cfg.qk_norm != "none":
            head = cfg.qk_norm == "head"
            shapes.update(_norm(p + "attn.q_norm", cfg, e if head else h * e))
            shapes.update(_norm(p + "attn.k_norm", cfg, e if head else g * e))
        if cfg.mlp_types[layer] == "moe":
            shapes.update(_moe(p + "mlp.", cfg))
        else:
            shapes.update(_mlp(p + "mlp.", cfg, m))
    if cfg.final_norm:
        shapes.update(_norm("ln_final", cfg))
    if cfg.lm_head == "mlm":
        shapes.update({"head.W": (d, d), "head.b": (d,), **_norm("head.ln", cfg)})
    if cfg.lm_head != "none":
        if not cfg.tie_embeddings:
            shapes["unembed.W_U"] = (d, v)
        shapes["unembed.b_U"] = (v,)
    return shapes


def check_state_dict(state: dict[str, torch.Tensor], cfg: TransformerConfig, source: str) -> None:
    """Raise :class:`CheckpointError` unless ``state`` has exactly the parameters ``cfg`` implies."""
    expected = expected_shapes(cfg)
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    wrong = [
        f"{name}: {list(state[name].shape)} (expected {list(shape)})"
        for name, shape in expected.items()
        if name in state and tuple(state[name].shape) != shape
    ]
    problems = []
    if missing:
        problems.append(f"missing {missing[:6]}")
    if extra:
        problems.append(f"unexpected {extra[:6]}")
    if wrong:
        problems.append("wrong shapes " + "; ".join(wrong[:6]))
    if problems:
        raise CheckpointError(
            f"converting {source} gave a state dict that does not fit its config: " + ", ".join(problems)
        )


def _mlp(prefix: str, cfg: TransformerConfig, width: int, experts: tuple[int, ...] = ()) -> dict:
    """A dense MLP of ``width`` (or, with ``experts``, the stacked routed experts)."""
    d, gated = cfg.d_model, cfg.mlp == "gated"
    shapes = {prefix + "W_in": (*experts, d, width), prefix + "W_out": (*experts, width, d)}
    if gated:
        shapes[prefix + "W_gate"] = (*experts, d, width)
    if cfg.mlp_bias:
        shapes[prefix + "b_in"] = (*experts, width)
        if gated:
            shapes[prefix + "b_gate"] = (*experts, width)
        shapes[prefix + "b_out"] = (*experts, d)
    return shapes


def _moe(prefix: str, cfg: TransformerConfig) -> dict[str, tuple[int, ...]]:
    """A mixture-of-experts MLP: router, routed experts, shared expert and its gate."""
    shapes = {prefix + "W_router": (cfg.d_model, cfg.n_experts)}
    if cfg.router_bias:
        shapes[prefix + "b_router"] = (cfg.n_experts,)
    shapes.update(_mlp(prefix, cfg, cfg.d_expert, (cfg.n_experts,)))
    if cfg.d_shared_expert is not None:
        shapes.update(_mlp(prefix + "shared_expert.", cfg, cfg.d_shared_expert))
    if cfg.shared_expert_gate:
        shapes[prefix + "W_shared_gate"] = (cfg.d_model, 1)
    return shapes


def _norm(prefix: str, cfg: TransformerConfig, width: int | None = None) -> dict[str, tuple[int, ...]]:
    width = cfg.d_model if width is None else width
    shapes = {prefix + ".w": (width,)}
    if cfg.norm == "layernorm":
        shapes[prefix + ".b"] = (width,)
    return shapes
