"""Every hook in the contract fires with its documented shape, for every architectural variant.

The expected names and shapes are written out from the table in DESIGN.md, independently of the model code.
"""

import pytest
import torch

from interp import HookedTransformer
from tests.model.variants import FAMILY_VARIANTS, VARIANTS, tiny_config, variant_id

B, P = 2, 5


def golden(cfg, routed: dict[int, list[int]] | None = None) -> dict[str, tuple[int, ...]]:
    """Names and shapes; ``routed`` gives, for each mixture-of-experts layer, how many tokens each expert
    received (the rows of its hooks), which depends on the routing."""
    d, h, g, e, m = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.d_head, cfg.d_mlp
    names = {"hook_embed": (B, P, d)}
    if cfg.positional in ("learned", "sinusoidal"):
        names["hook_pos_embed"] = (B, P, d)
    before = cfg.norm_placement != "output"  # a norm before each sublayer
    after = cfg.norm_placement in ("sandwich", "output")  # a norm on each sublayer's output

    def norm(prefix, width=d, rows=(B, P)):
        names[prefix + ".hook_scale"] = (*rows, 1)
        names[prefix + ".hook_normalized"] = (*rows, width)

    for layer in range(cfg.n_layers):
        pre = f"blocks.{layer}."
        names[pre + "hook_resid_pre"] = (B, P, d)
        if before:
            norm(pre + "ln1")
        names[pre + "attn.hook_q"] = (B, P, h, e)
        names[pre + "attn.hook_k"] = (B, P, g, e)
        names[pre + "attn.hook_v"] = (B, P, g, e)
        if cfg.qk_norm == "head":  # one norm per head's vector
            norm(pre + "attn.q_norm", e, (B, P, h))
            norm(pre + "attn.k_norm", e, (B, P, g))
        elif cfg.qk_norm == "full":  # over every head at once
            norm(pre + "attn.q_norm", h * e)
            norm(pre + "attn.k_norm", g * e)
        if cfg.positional == "rotary":
            names[pre + "attn.hook_rot_q"] = (B, P, h, e)
            names[pre + "attn.hook_rot_k"] = (B, P, g, e)
        names[pre + "attn.hook_attn_scores"] = (B, h, P, P)
        names[pre + "attn.hook_pattern"] = (B, h, P, P)
        names[pre + "attn.hook_z"] = (B, P, h, e)
        names[pre + "attn.hook_result"] = (B, P, h, d)
        if after:
            norm(pre + "ln1_post")
        names[pre + "hook_attn_out"] = (B, P, d)
        if cfg.norm_placement == "post":
            norm(pre + "ln1")
        if not cfg.parallel_attn_mlp:
            names[pre + "hook_resid_mid"] = (B, P, d)
        if before:
            norm(pre + "ln2")
        if cfg.mlp_types[layer] == "moe":
            names.update(_moe_names(cfg, pre + "mlp.", routed[layer]))
        else:
            names[pre + "mlp.hook_pre"] = (B, P, m)
            if cfg.mlp == "gated":
                names[pre + "mlp.hook_pre_linear"] = (B, P, m)
            names[pre + "mlp.hook_post"] = (B, P, m)
        if after:
            norm(pre + "ln2_post")
        names[pre + "hook_mlp_out"] = (B, P, d)
        if cfg.norm_placement == "post":
            norm(pre + "ln2")
        names[pre + "hook_resid_post"] = (B, P, d)
    if cfg.norm_placement != "post":
        norm("ln_final")
    names["unembed.hook_in"] = (B, P, d)
    names["unembed.hook_out"] = (B, P, cfg.d_vocab)
    return names


def _moe_names(cfg, pre: str, counts: list[int]) -> dict[str, tuple[int, ...]]:
    """A mixture-of-experts MLP's hooks (docs/hooks.md): routing, then each expert on its own rows, then the
    shared expert and its gate."""
    d, k, x = cfg.d_model, cfg.experts_per_token, cfg.d_expert
    names = {
        pre + "hook_router_logits": (B, P, cfg.n_experts),
        pre + "hook_expert_indices": (B, P, k),
        pre + "hook_expert_weights": (B, P, k),
    }
    for expert, rows in enumerate(counts):
        leaves = (["hook_gate"] if cfg.mlp == "gated" else []) + ["hook_pre", "hook_post"]
        names.update({f"{pre}experts.{expert}.{leaf}": (rows, x) for leaf in leaves})
        names[f"{pre}experts.{expert}.hook_out"] = (rows, d)
    if cfg.d_shared_expert is not None:
        s = cfg.d_shared_expert
        leaves = (["hook_gate"] if cfg.mlp == "gated" else []) + ["hook_pre", "hook_post"]
        names.update({f"{pre}shared_expert.{leaf}": (B, P, s) for leaf in leaves})
        names[pre + "shared_expert.hook_out"] = (B, P, d)
    if cfg.shared_expert_gate:
        names[pre + "hook_shared_expert_weight"] = (B, P, 1)
    return names


def _fire_every_hook(model, cfg):
    """name -> shape of every hook that fired, in firing order, and each MoE layer's tokens per expert."""
    fired, chosen = {}, {}

    def record(x, hook):
        fired[hook.name] = tuple(x.shape)
        if hook.name.endswith("hook_expert_indices"):
            chosen[hook.layer] = torch.bincount(x.flatten(), minlength=cfg.n_experts).tolist()

    model.run_with_hooks(torch.randint(0, cfg.d_vocab, (B, P)), fwd_hooks=[(lambda name: True, record)])
    return fired, chosen


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_every_hook_fires_with_its_shape(variant):
    cfg = tiny_config(**variant)
    model = HookedTransformer(cfg)
    fired = {}
    model.run_with_hooks(
        torch.randint(0, cfg.d_vocab, (B, P)),
        fwd_hooks=[(lambda name: True, lambda x, hook: fired.__setitem__(hook.name, tuple(x.shape)))],
    )
    assert fired == golden(cfg)
    assert set(model.hook_names()) == set(golden(cfg))


@pytest.mark.parametrize("family", sorted(FAMILY_VARIANTS))
def test_family_hooks_fire_in_forward_order(family):
    """The golden list for what each newer family adds, names and shapes in the order the forward reaches them."""
    cfg = tiny_config(**FAMILY_VARIANTS[family])
    model = HookedTransformer(cfg)
    fired, routed = _fire_every_hook(model, cfg)
    expected = golden(cfg, routed)
    assert list(fired.items()) == list(expected.items())
    assert model.hook_names() == list(expected)


def test_bert_style_extras_are_named():
    cfg = tiny_config(norm_placement="post", embed_norm=True, causal=False, lm_head="mlm")
    names = HookedTransformer(cfg).hook_names()
    assert {"embed_ln.hook_scale", "embed_ln.hook_normalized", "head.ln.hook_scale"} <= set(names)
    assert not any(n.startswith("ln_final") for n in names)


def test_encoder_without_head_returns_the_stream():
    cfg = tiny_config(norm_placement="post", causal=False, lm_head="none")
    model = HookedTransformer(cfg)
    tokens = torch.randint(0, cfg.d_vocab, (B, P))
    out, cache = model.run_with_cache(tokens, names_filter="blocks.1.hook_resid_post")
    torch.testing.assert_close(out, cache["resid_post", 1])
    assert "unembed.hook_out" not in model.hook_names()


def test_hook_layer_and_name_attributes():
    model = HookedTransformer(tiny_config())
    seen = []
    model.run_with_hooks(
        torch.tensor([[1, 2, 3]]),
        fwd_hooks=[("blocks.1.attn.hook_q", lambda x, hook: seen.append((hook.name, hook.layer)))],
    )
    assert seen == [("blocks.1.attn.hook_q", 1)]
