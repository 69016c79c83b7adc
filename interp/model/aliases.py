"""TransformerLens 3's canonical hook names, as aliases of interp's hook points.

TransformerLens 3 names an activation by the component it enters or leaves: ``blocks.3.hook_in`` is the stream
entering block 3 (interp's ``blocks.3.hook_resid_pre``), ``blocks.3.attn.hook_out`` the attention output,
``blocks.3.attn.q.hook_out`` the queries. Each such name that denotes an activation interp hooks is an alias of
that very hook point (:mod:`hooks.aliases`); where the same words would mean a different place in this model
(a post-norm block, a norm after the sublayer), no alias is made. Names of activations interp has no hook for
(the normed input of a sublayer, ``attn.hook_in``) are listed with the hook to use instead.
"""

from __future__ import annotations

import functools

from hooks.aliases import HookAliases
from interp.config import TransformerConfig


def transformer_lens_aliases(cfg: TransformerConfig, names: tuple[str, ...]) -> HookAliases:
    """The TransformerLens 3 names of a model with config ``cfg`` and hook names ``names``."""
    return _aliases(cfg, names)


@functools.lru_cache(maxsize=32)
def _aliases(cfg: TransformerConfig, names: tuple[str, ...]) -> HookAliases:
    have = set(names)
    pre_style = cfg.norm_placement == "pre"
    aliases: dict[str, str] = {"embed.hook_out": "hook_embed", "pos_embed.hook_out": "hook_pos_embed"}
    missing: dict[str, str] = {
        "embed.hook_in": "'embed.hook_in' (the token ids) is not a hook point in interp; the ids are the input "
        "you pass, and 'hook_embed' holds their embeddings",
        "pos_embed.hook_in": "'pos_embed.hook_in' (the positions) is not a hook point in interp; "
        "'hook_pos_embed' holds their embeddings",
    }
    gated = cfg.mlp == "gated"
    for layer in range(cfg.n_layers):
        b = f"blocks.{layer}"
        aliases.update(
            {
                f"{b}.hook_in": f"{b}.hook_resid_pre",
                f"{b}.hook_out": f"{b}.hook_resid_post",
                f"{b}.attn.q.hook_out": f"{b}.attn.hook_q",
                f"{b}.attn.k.hook_out": f"{b}.attn.hook_k",
                f"{b}.attn.v.hook_out": f"{b}.attn.hook_v",
                f"{b}.attn.o.hook_in": f"{b}.attn.hook_z",
                f"{b}.mlp.{'gate' if gated else 'in'}.hook_out": f"{b}.mlp.hook_pre",
                f"{b}.mlp.out.hook_in": f"{b}.mlp.hook_post",
            }
        )
        if gated:
            aliases[f"{b}.mlp.in.hook_out"] = f"{b}.mlp.hook_pre_linear"
        for head_input in ("q", "k", "v"):  # one input stream per head, inside `with model.split_inputs():`
            aliases[f"{b}.attn.hook_{head_input}_input"] = f"{b}.hook_{head_input}_input"
        aliases[f"{b}.mlp.hook_router_scores"] = f"{b}.mlp.hook_router_logits"  # TransformerLens 3's MoE name
        if pre_style:
            aliases[f"{b}.ln1.hook_in"] = f"{b}.hook_resid_pre"
            for name in ("attn.hook_out", "attn.o.hook_out", "attn.hook_hidden_states"):
                aliases[f"{b}.{name}"] = f"{b}.hook_attn_out"
            aliases[f"{b}.mlp.hook_out"] = f"{b}.hook_mlp_out"
            aliases[f"{b}.mlp.out.hook_out"] = f"{b}.hook_mlp_out"
            if not cfg.parallel_attn_mlp:
                aliases[f"{b}.ln2.hook_in"] = f"{b}.hook_resid_mid"
        if (
            cfg.norm_placement == "output"
        ):  # OLMo 2: TransformerLens names the sublayers' output norms ln1, ln2
            for norm in ("ln1", "ln2"):
                for leaf in ("hook_scale", "hook_normalized"):
                    aliases[f"{b}.{norm}.{leaf}"] = f"{b}.{norm}_post.{leaf}"
        for sub, norm in (("attn", "ln1"), ("mlp", "ln2")):
            instead = (
                f"'{b}.{norm}.hook_normalized' (the normed stream before the gain and bias; the same tensor once "
                f"LayerNorm is folded with process_weights(fold_ln=True))"
            )
            inputs = ("q.hook_in", "k.hook_in", "v.hook_in") if sub == "attn" else ("in.hook_in",)
            for name in (f"{b}.{sub}.hook_in", f"{b}.{norm}.hook_out", *(f"{b}.{sub}.{i}" for i in inputs)):
                missing[name] = f"interp has no hook point at {name!r}, {sub}'s normed input; use {instead}"
        for legacy in ("hook_attn_in", "hook_mlp_in"):
            missing[f"{b}.{legacy}"] = (
                f"{b}.{legacy!s} exists only inside `with model.split_inputs():` in interp (one input stream "
                f"per head and for the MLP); there, hook '{b}.hook_q_input' / 'hook_mlp_in'"
            )
    last = f"blocks.{cfg.n_layers - 1}.hook_resid_post"
    if pre_style and cfg.n_layers:
        aliases["ln_final.hook_in"] = last
    if cfg.lm_head == "linear":
        aliases["ln_final.hook_out"] = "unembed.hook_in"
        aliases["hook_unembed"] = "unembed.hook_out"
    aliases = {a: t for a, t in aliases.items() if t in have and a not in have}
    missing = {a: m for a, m in missing.items() if a not in have}
    return HookAliases(aliases, missing)
