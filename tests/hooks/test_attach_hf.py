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
