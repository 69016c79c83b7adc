"""What a steering vector must match before it is added: the model it was made on, and the hook's shape.

A vector remembers its model by name, shape and ``PROBE_ROWS`` rows of the embedding matrix spread over the
vocabulary. The rows are compared at bfloat16 precision, so the same checkpoint loaded in another dtype is
recognised and another checkpoint of the same shape is not. A hook's shape comes from the hook contract
(``[batch, pos, d_model]`` on the stream, ``[batch, pos, head, d_head]`` on ``hook_z``...), so a vector of the
wrong width is refused before a forward pass runs.
"""

from __future__ import annotations

from typing import Any

import torch

PROBE_ROWS = 8  # embedding rows stored to recognise the model


def model_identity(model: Any) -> dict[str, Any]:
    """What a steering vector records of its model: name, shape and ``PROBE_ROWS`` rows of ``W_E``."""
    cfg = model.cfg
    rows = torch.linspace(0, cfg.d_vocab - 1, PROBE_ROWS).long()
    probe = model.embed.W_E.detach()[rows.to(model.embed.W_E.device)].float().cpu()  # [rows, d_model]
    return {
        "name": cfg.name,
        "n_layers": cfg.n_layers,
        "d_model": cfg.d_model,
        "d_vocab": cfg.d_vocab,
        "probe": probe,
    }


def identity_problem(identity: dict[str, Any], model: Any) -> str | None:
    """Why ``identity`` is not ``model``'s, or ``None`` if it is (weights compared at bfloat16 precision)."""
    ours = model_identity(model)
    made = _describe(identity)
    if any(identity.get(k) != ours[k] for k in ("n_layers", "d_model", "d_vocab")):
        return f"it was made on {made}, not on this model, {_describe(ours)}"
    if identity.get("name") and ours["name"] and identity["name"] != ours["name"]:
        return f"it was made on {made}, not on this model, {_describe(ours)}"
    probe = identity.get("probe")
    if probe is not None:
        scale = float(probe.abs().max()) or 1.0
        if not torch.allclose(probe.float(), ours["probe"], rtol=1e-2, atol=1e-2 * scale):
            return (
                f"it was made on {made}, whose embedding weights differ from this model's "
                f"({_describe(ours)}): a vector found on one checkpoint means nothing on another"
            )
    return None


def _describe(identity: dict[str, Any]) -> str:
    name = f"{identity['name']!r}, " if identity.get("name") else ""
    return (
        f"{name}{identity.get('n_layers')} layers, d_model {identity.get('d_model')}, "
        f"d_vocab {identity.get('d_vocab')}"
    )


def activation_shape(cfg: Any, hook_name: str) -> tuple[int, ...] | None:
    """The shape after ``[batch, pos]`` of a hook's activation, from the hook contract; ``None`` if unknown.

    Raises ``ValueError`` for scores and patterns, which have no position axis to steer along.
    """
    leaf = hook_name.rsplit(".", 1)[-1]
    if leaf in ("hook_pattern", "hook_attn_scores"):
        raise ValueError(
            f"{hook_name!r} is [batch, head, query, key], not [batch, pos, ...]; steer the stream, q, k, v, "
            "z, result or the MLP instead"
        )
    stream = ("hook_resid_pre", "hook_resid_mid", "hook_resid_post", "hook_attn_out", "hook_mlp_out")
    if leaf in (*stream, "hook_embed", "hook_pos_embed") or hook_name in ("unembed.hook_in",):
        return (cfg.d_model,)
    if leaf == "hook_normalized" and ".q_norm." not in hook_name and ".k_norm." not in hook_name:
        return (cfg.d_model,)
    table = {
        "hook_q": (cfg.n_heads, cfg.d_head),
        "hook_rot_q": (cfg.n_heads, cfg.d_head),
        "hook_z": (cfg.n_heads, cfg.d_head),
        "hook_k": (cfg.n_kv_heads, cfg.d_head),
        "hook_rot_k": (cfg.n_kv_heads, cfg.d_head),
        "hook_v": (cfg.n_kv_heads, cfg.d_head),
        "hook_result": (cfg.n_heads, cfg.d_model),
        "hook_pre": (cfg.d_mlp,),
        "hook_pre_linear": (cfg.d_mlp,),
        "hook_post": (cfg.d_mlp,),
    }
    if hook_name == "unembed.hook_out":
        return (cfg.d_vocab,)
    return table.get(leaf) if ".attn." in hook_name or ".mlp." in hook_name else None


def check_width(model: Any, hook_name: str, vector: torch.Tensor) -> None:
    """Raise ``ValueError`` if ``vector`` cannot be added to ``hook_name``'s activation."""
    model.resolve(hook_name)  # an unknown name raises with the closest ones
    want = activation_shape(model.cfg, hook_name)
    if want is not None and tuple(vector.shape) != want:
        raise ValueError(
            f"steering vector of shape {list(vector.shape)} does not fit {hook_name!r}, whose activation is "
            f"[batch, pos, {', '.join(map(str, want))}] in this model; find the vector at this hook of this model"
        )


__all__ = ["PROBE_ROWS", "activation_shape", "check_width", "identity_problem", "model_identity"]
