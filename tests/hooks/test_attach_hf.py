"""hooks.attach on tiny random ``transformers`` models: the built-in specs for GPT-2, BERT and Llama.

Patterns from the attachment must equal the model's own ``output_attentions`` under eager attention, and the
same hooks must work (with the same patterns, and the model's output unchanged) when it runs SDPA.
"""

from __future__ import annotations

import pytest
import torch

from hooks import attach
from hooks.attach import HookNotFiredError
from hooks.attention_spec import AttentionSpec, AttentionSpecError
from tests.hf_models import HEADS, LAYERS, VOCAB, D, bert, gpt2, llama

transformers = pytest.importorskip("transformers")

FAMILIES = {
    "gpt2": (gpt2, "transformer.h.{}.attn", (4, 8)),
    "bert": (bert, "bert.encoder.layer.{}.attention", (4, 8)),
    "llama": (llama, "model.layers.{}.self_attn", (4, 8)),
}


def build(family: str, impl: str, seed: int = 0):
    torch.manual_seed(seed)
    return FAMILIES[family][0](impl).eval()


def inputs(padded: bool) -> dict[str, torch.Tensor]:
    ids = torch.randint(1, VOCAB, (2, 7), generator=torch.Generator().manual_seed(3))
    mask = torch.ones_like(ids)
    if padded:
        mask[1, :2] = 0  # left padding in the second row
    return {"input_ids": ids, "attention_mask": mask}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("padded", [False, True], ids=["full", "padded"])
def test_patterns_equal_output_attentions_and_sdpa_agrees(family, padded):
    eager = build(family, "eager")
    sdpa = build(family, "sdpa")
    sdpa.load_state_dict(eager.state_dict())
    batch = inputs(padded)
    path = FAMILIES[family][1]
    names = [f"{path.format(i)}.hook_pattern" for i in range(LAYERS)]
    with torch.no_grad():
        ref = eager(**batch, output_attentions=True)
        plain_sdpa = sdpa(**batch)
        patterns = {}
        for impl, model in (("eager", eager), ("sdpa", sdpa)):
            with attach(model) as hooked:
                want = (ref if impl == "eager" else plain_sdpa).logits
                out, cache = hooked.run_with_cache(**batch, names_filter=names)
                torch.testing.assert_close(out.logits, want)
                patterns[impl] = [cache[n] for n in names]
                again = hooked(**batch)  # nothing hooked: the fused path unless the model returns patterns
                torch.testing.assert_close(again.logits, want, atol=1e-5, rtol=1e-5)
    real = batch["attention_mask"].bool()[:, None, :, None]  # rows of padding queries are not compared
    for layer in range(LAYERS):
        want = ref.attentions[layer].masked_fill(~real, 0)
        torch.testing.assert_close(patterns["eager"][layer].masked_fill(~real, 0), want)
        torch.testing.assert_close(patterns["sdpa"][layer].masked_fill(~real, 0), want, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_per_head_hooks_have_the_contract_shapes(family):
    model = build(family, "sdpa")
    path = FAMILIES[family][1].format(1)
    batch = inputs(False)
    g = 2 if family == "llama" else HEADS
    with attach(model) as hooked, torch.no_grad():
        out, cache = hooked.run_with_cache(**batch, names_filter=f"{path}.hook_*")
        ablated = hooked.run_with_hooks(
            **batch,
            fwd_hooks=[(f"{path}.hook_result", lambda r, hook: r * torch.tensor([1.0, 0, 1, 1])[:, None])],
        )
    shapes = {name.rsplit(".", 1)[1]: tuple(t.shape) for name, t in cache.items()}
    b, p, e = 2, 7, D // HEADS
    assert shapes["hook_q"] == (b, p, HEADS, e)
    assert shapes["hook_k"] == shapes["hook_v"] == (b, p, g, e)
    assert shapes["hook_pattern"] == shapes["hook_attn_scores"] == (b, HEADS, p, p)
    assert shapes["hook_z"] == (b, p, HEADS, e)
    assert shapes["hook_result"] == (b, p, HEADS, D)
    assert ("hook_rot_q" in shapes) == (family == "llama")
    assert (ablated.logits - out.logits).abs().max() > 1e-4


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_generation_with_a_kv_cache(family):
    model = build(family, "sdpa")
    ids = inputs(False)["input_ids"][:1]
    with torch.no_grad():
        want = model.generate(ids, max_new_tokens=4, do_sample=False)
        path = FAMILIES[family][1].format(0)
        with attach(model) as hooked:
            got = hooked.model.generate(ids, max_new_tokens=4, do_sample=False)
            with hooked.hooks([(f"{path}.hook_pattern", lambda x, hook: None)]):
                patterned = model.generate(ids, max_new_tokens=4, do_sample=False)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(patterned, want)


def test_a_wrong_spec_for_a_hf_module_raises():
    model = build("llama", "sdpa")
    wrong = AttentionSpec(
        q="k_proj", k="q_proj", v="v_proj", out="o_proj", n_heads=HEADS, n_kv_heads=2, causal=True
    )
    # q and k swapped: the key projection is narrower than n_heads x d_head, which is seen when attaching.
    with pytest.raises(AttentionSpecError, match=r"'model.layers.0.self_attn' \(LlamaAttention\), which the"):
        attach(model, {"model.layers.*.self_attn": wrong})
    assert all("forward" not in m.__dict__ for m in model.modules())


def test_detach_leaves_the_hf_model_as_it_was():
    model = build("gpt2", "sdpa")
    batch = inputs(True)
    with torch.no_grad():
        want = model(**batch).logits
        hooks_before = {p: dict(m._forward_hooks) for p, m in model.named_modules()}
        with attach(model) as hooked:
            hooked.run_with_cache(**batch, names_filter="transformer.h.*.attn.hook_*")
        assert {p: dict(m._forward_hooks) for p, m in model.named_modules()} == hooks_before
        assert not any("forward" in m.__dict__ for m in model.modules())
        torch.testing.assert_close(model(**batch).logits, want)


def test_hooks_inside_a_spec_module_that_do_not_fire_say_why():
    model = build("bert", "sdpa")
    with attach(model) as hooked, torch.no_grad():
        with pytest.raises(HookNotFiredError, match="runs from its attention spec"):
            hooked.run_with_cache(
                **inputs(False), names_filter="bert.encoder.layer.0.attention.self.hook_out"
            )
        _, cache = hooked.run_with_cache(
            **inputs(False), names_filter="bert.encoder.layer.0.attention.self.query.*"
        )
    assert cache["bert.encoder.layer.0.attention.self.query.hook_out"].shape == (2, 7, D)


# The families of tests/load/families.py: name -> path of layer L's attention module.
_DECODERS = {
    "gemma": "model.layers.{}.self_attn",
    "gemma2": "model.layers.{}.self_attn",
    "gemma3": "model.layers.{}.self_attn",
    "qwen3": "model.layers.{}.self_attn",
    "qwen3-sliding": "model.layers.{}.self_attn",
    "qwen2-sliding": "model.layers.{}.self_attn",
    "mistral-sliding": "model.layers.{}.self_attn",
    "pythia": "gpt_neox.layers.{}.attention",
    "neox-sequential": "gpt_neox.layers.{}.attention",
    "phi3": "model.layers.{}.self_attn",
    "phi3-longrope": "model.layers.{}.self_attn",
    "olmo2": "model.layers.{}.self_attn",
    "llama3-rope": "model.layers.{}.self_attn",
}
_NO_SDPA = {"gemma2"}  # transformers runs Gemma 2 in eager only: SDPA cannot soft-cap scores


def _family(name: str, impl: str):
    from tests.load.families import build as build_family

    return build_family(name, VOCAB, attn=impl)


def _long_batch() -> dict[str, torch.Tensor]:
    from tests.load.families import WINDOW

    ids = torch.randint(2, VOCAB, (2, WINDOW + 7), generator=torch.Generator().manual_seed(5))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0  # left padding
    return {"input_ids": ids, "attention_mask": mask}


@pytest.mark.parametrize("name", sorted(_DECODERS))
def test_family_patterns_equal_output_attentions(name):
    """Windows longer than the text, soft-caps, the query scale, q/k norms, fused and per-head qkv, partial
    rotary: the attached patterns equal the model's own under eager, and the output is unchanged."""
    model = _family(name, "eager")
    batch = _long_batch()
    n_layers = model.config.num_hidden_layers
    names = [f"{_DECODERS[name].format(i)}.hook_pattern" for i in range(n_layers)]
    with torch.no_grad():
        ref = model(**batch, output_attentions=True)
        with attach(model) as hooked:
            assert set(names) <= set(hooked.hook_dict)  # the built-in spec was found for every layer
            out, cache = hooked.run_with_cache(**batch, names_filter=names)
            plain = hooked(**batch)  # nothing hooked
    torch.testing.assert_close(out.logits, ref.logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(plain.logits, ref.logits, atol=1e-5, rtol=1e-5)
    real = batch["attention_mask"].bool()[:, None, :, None]  # rows of padding queries are not compared
    for layer, hook in enumerate(names):
        want = ref.attentions[layer].masked_fill(~real, 0)
        torch.testing.assert_close(cache[hook].masked_fill(~real, 0), want, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("name", sorted(set(_DECODERS) - _NO_SDPA))
def test_family_under_sdpa_gives_the_eager_patterns(name):
    eager, sdpa = _family(name, "eager"), _family(name, "sdpa")
    batch = _long_batch()
    path = _DECODERS[name].format(1)
    with torch.no_grad():
        ref = eager(**batch, output_attentions=True)
        want_logits = sdpa(**batch).logits
        with attach(sdpa) as hooked:
            out, cache = hooked.run_with_cache(**batch, names_filter=f"{path}.hook_pattern")
    torch.testing.assert_close(out.logits, want_logits, atol=1e-5, rtol=1e-5)
    real = batch["attention_mask"].bool()[:, None, :, None]
    torch.testing.assert_close(
        cache[f"{path}.hook_pattern"].masked_fill(~real, 0),
        ref.attentions[1].masked_fill(~real, 0),
        atol=1e-6,
        rtol=1e-5,
    )


def test_family_specs_see_what_the_module_computes():
    """Spec fields read from the modules: windows per layer type, Gemma 2's cap and query scale, q/k norms
    over heads or the whole projection, GPT-NeoX's per-head qkv and partial rotary."""
    from hooks.hf_specs import builtin_spec
    from tests.load.families import WINDOW

    gemma2 = _family("gemma2", "eager").model.layers
    assert [builtin_spec(layer.self_attn).window for layer in gemma2] == [WINDOW, None, WINDOW]
    spec = builtin_spec(gemma2[0].self_attn)
    assert spec.softcap == 4.0 and spec.scale == pytest.approx(40**-0.5) and spec.q_norm is None
    gemma3 = builtin_spec(_family("gemma3", "eager").model.layers[0].self_attn)
    assert (gemma3.q_norm, gemma3.qk_norm, gemma3.softcap) == ("q_norm", "head", None)
    assert builtin_spec(_family("olmo2", "eager").model.layers[0].self_attn).qk_norm == "full"
    neox = builtin_spec(_family("pythia", "eager").gpt_neox.layers[0].attention)
    assert (neox.qkv, neox.qkv_layout, neox.out) == ("query_key_value", "heads", "dense")
    assert builtin_spec(_family("mistral-sliding", "eager").model.layers[1].self_attn).window == WINDOW
    assert builtin_spec(_family("qwen3-sliding", "eager").model.layers[0].self_attn).window is None


@pytest.mark.parametrize("name", ["qwen3", "olmo2", "gemma3"])
def test_qk_norm_hooks(name):
    """hook_q and hook_k are before the q/k norm; hook_rot_q after norm and rotary; the norm's own module
    points fire inside the recomputation, and an edit to them changes the output."""
    model = _family(name, "sdpa")
    path = _DECODERS[name].format(0)
    batch = _long_batch()
    with attach(model) as hooked, torch.no_grad():
        _, cache = hooked.run_with_cache(
            **batch, names_filter=[f"{path}.hook_q", f"{path}.hook_rot_q", f"{path}.q_norm.hook_out"]
        )
        base = hooked(**batch).logits
        doubled = hooked.run_with_hooks(
            **batch, fwd_hooks=[(f"{path}.q_norm.hook_out", lambda x, hook: 2 * x)]
        )
    attn = model.get_submodule(path)
    q = cache[f"{path}.hook_q"]  # [batch, pos, head, d_head]
    norm_in = q if name != "olmo2" else q.flatten(-2)
    torch.testing.assert_close(cache[f"{path}.q_norm.hook_out"], attn.q_norm(norm_in))
    assert not torch.allclose(cache[f"{path}.hook_rot_q"], q)
    assert (doubled.logits - base).abs().max() > 1e-3


@pytest.mark.parametrize("name", ["mistral-sliding", "gemma2", "pythia", "phi3"])
def test_family_generation_with_a_kv_cache(name):
    """Windows and caches together: generating past the window gives the model's own tokens, hooked or not."""
    model = _family(name, "eager")
    ids = _long_batch()["input_ids"][:1]
    path = _DECODERS[name].format(0)
    with torch.no_grad():
        want = model.generate(ids, max_new_tokens=6, do_sample=False)
        with attach(model) as hooked:
            with hooked.hooks([(f"{path}.hook_pattern", lambda x, hook: None)]):
                got = model.generate(ids, max_new_tokens=6, do_sample=False)
    torch.testing.assert_close(got, want)
