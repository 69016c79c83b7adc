"""Generation: the KV cache against full recomputation, batching, sampling, hooks at every step, stopping,
errors that keep what was generated, and bad input refused before anything runs."""

from __future__ import annotations

import pytest
import torch

from hooks import HookEditError
from interp import HookedTransformer
from interp.analysis import steer
from interp.generation.sampling import TokenChooser
from tests.generation_models import PROMPTS, tiny_lm
from tests.model.variants import FAMILY_VARIANTS, tiny_config


@pytest.fixture(scope="module")
def model():
    return tiny_lm()


def _ids_model(**overrides) -> HookedTransformer:
    return HookedTransformer(tiny_config(n_ctx=48, **overrides)).eval()


RAGGED = [[3, 4, 5, 6, 7, 8, 9], [10, 11], [12, 13, 14, 15]]


# -- the KV cache -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FAMILY_VARIANTS))
def test_cache_gives_the_tokens_and_logits_of_recomputation(name):
    model = _ids_model(**FAMILY_VARIANTS[name])
    cached = model.generate(RAGGED, 14, return_logits=True)
    full = model.generate(RAGGED, 14, return_logits=True, use_kv_cache=False)
    assert torch.equal(cached.tokens, full.tokens)
    assert cached.logits.shape == (3, 14, model.cfg.d_vocab)
    torch.testing.assert_close(cached.logits, full.logits, atol=1e-4, rtol=0)


def test_windows_shorter_than_the_generation_are_applied_at_every_step():
    """The window (3) is much shorter than prompt plus generation (up to 21), and it changes the result."""
    windowed = _ids_model(**FAMILY_VARIANTS["mistral"])
    assert windowed.cfg.sliding_window == 3
    cached = windowed.generate(RAGGED, 14, return_logits=True)
    full = windowed.generate(RAGGED, 14, return_logits=True, use_kv_cache=False)
    torch.testing.assert_close(cached.logits, full.logits, atol=1e-4, rtol=0)
    unwindowed = _ids_model(**{**FAMILY_VARIANTS["mistral"], "sliding_window": None})
    unwindowed.load_state_dict(windowed.state_dict())
    other = unwindowed.generate(RAGGED, 14, return_logits=True)
    assert (other.logits - cached.logits).abs().max() > 1e-2


def test_each_row_of_a_batch_generates_what_it_generates_alone(model):
    batch = model.generate(PROMPTS, 10, return_logits=True)
    for row, prompt in enumerate(PROMPTS):
        alone = model.generate(prompt, 10, return_logits=True)
        assert alone.new_tokens[0] == batch.new_tokens[row]
        assert alone.text[0] == batch.text[row]
        torch.testing.assert_close(alone.logits[0], batch.logits[row], atol=1e-5, rtol=0)


def test_prompts_are_left_padded_and_right_padding_only_changes_the_layout(model):
    left = model.generate(PROMPTS, 6)
    right = model.generate(PROMPTS, 6, padding_side="right")
    lengths = [n + 6 for n in left.prompt_lengths]
    for row, n in enumerate(lengths):
        assert left.mask[row, -n:].all() and not left.mask[row, :-n].any()
        assert right.mask[row, :n].all() and not right.mask[row, n:].any()
        assert torch.equal(left.tokens[row, -n:], right.tokens[row, :n])
    ids, mask = model.to_tokens(PROMPTS, padding_side="right")  # a right-padded tensor input is re-padded
    from_tensor = model.generate(ids, 6, attention_mask=mask)
    assert torch.equal(from_tensor.tokens, left.tokens)


# -- sampling -----------------------------------------------------------------------------------------------


def test_sampling_with_a_seed_is_reproducible_and_each_row_has_its_own_generator(model):
    first = model.generate(PROMPTS, 12, do_sample=True, seed=7)
    again = model.generate(PROMPTS, 12, do_sample=True, seed=7)
    other = model.generate(PROMPTS, 12, do_sample=True, seed=8)
    assert first.new_tokens == again.new_tokens
    assert first.new_tokens != other.new_tokens
    # Row r draws with seed + r, whatever else is in the batch.
    alone = model.generate(PROMPTS[2], 12, do_sample=True, seed=9)
    assert alone.new_tokens[0] == first.new_tokens[2]
    listed = model.generate(PROMPTS, 12, do_sample=True, seed=[7, 8, 9])
    assert listed.new_tokens == first.new_tokens
    # The same prompt twice in a batch gets two different samples.
    twice = model.generate([PROMPTS[0], PROMPTS[0]], 12, do_sample=True, seed=0)
    assert twice.new_tokens[0] != twice.new_tokens[1]


def test_greedy_limits_of_sampling(model):
    greedy = model.generate(PROMPTS, 8)
    assert model.generate(PROMPTS, 8, do_sample=True, top_k=1, seed=0).new_tokens == greedy.new_tokens
    assert model.generate(PROMPTS, 8, do_sample=True, top_p=1e-6, seed=0).new_tokens == greedy.new_tokens


def _naive_filter(logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None):
    """The sampling distribution, one row at a time, written from the definitions."""
    out = []
    for row in logits.double() / temperature:
        probs = row.softmax(-1)
        keep = torch.ones_like(probs, dtype=torch.bool)
        if top_k is not None:
            keep &= row >= row.sort(descending=True).values[top_k - 1]
        probs = torch.where(keep, probs, 0.0)
        probs = probs / probs.sum()
        if top_p is not None:
            order = probs.argsort(descending=True)
            mass, kept = 0.0, torch.zeros_like(keep)
            for index in order.tolist():
                if mass >= top_p:
                    break
                kept[index] = True
                mass += float(probs[index])
            probs = torch.where(kept, probs, 0.0)
            probs = probs / probs.sum()
        out.append(probs)
    return torch.stack(out)


@pytest.mark.parametrize(
    "temperature,top_k,top_p", [(1.0, None, None), (0.7, 5, None), (1.3, None, 0.8), (0.9, 8, 0.6)]
)
def test_the_sampling_distribution_and_the_draws_follow_it(temperature, top_k, top_p):
    logits = torch.randn(2, 12, generator=torch.Generator().manual_seed(0)) * 2
    chooser = TokenChooser(do_sample=True, temperature=temperature, top_k=top_k, top_p=top_p, seed=0, batch=2)
    expected = _naive_filter(logits, temperature, top_k, top_p)
    torch.testing.assert_close(chooser.probabilities(logits).double(), expected, atol=1e-6, rtol=0)
    draws = torch.stack([chooser(logits) for _ in range(4000)])  # [draw, row]
    for row in range(2):
        freq = torch.bincount(draws[:, row], minlength=12).double() / len(draws)
        assert freq[expected[row] == 0].sum() == 0  # a filtered-out token is never drawn
        # each frequency is a binomial proportion: within 4 standard errors of its probability
        p = expected[row]
        within = (freq - p).abs() <= 4 * (p * (1 - p) / len(draws)).sqrt() + 1 / len(draws)
        assert bool(within.all()), (freq, p)


# -- hooks during generation --------------------------------------------------------------------------------


def _recorder(seen: list):
    def record(x, hook):
        seen.append((hook.name.rsplit(".", 1)[-1], hook.step, tuple(x.shape), hook.generation))

    return record


NAMES = ["blocks.0.attn.hook_pattern", "blocks.1.hook_resid_post", "blocks.0.attn.hook_k"]


def test_hooks_see_the_new_positions_at_each_step(model):
    seen: list = []
    out = model.generate(PROMPTS, 4, fwd_hooks=[(NAMES, _recorder(seen))])
    width = max(out.prompt_lengths)
    h, g, d = model.cfg.n_heads, model.cfg.n_kv_heads, model.cfg.d_model
    expected = []
    for step in range(4):
        new = width if step == 0 else 1
        expected += [
            ("hook_k", step, (3, new, g, model.cfg.d_head)),
            ("hook_pattern", step, (3, h, new, width + step)),  # [batch, head, new, past + new]
            ("hook_resid_post", step, (3, new, d)),
        ]
    assert [s[:3] for s in seen] == expected
    state = seen[-1][3]
    assert state.cached and state.step == 3 and state.start == width + 2
    assert state.generated.all() and state.positions[:, 0].tolist() == [n + 2 for n in out.prompt_lengths]


def test_without_the_cache_hooks_see_the_whole_sequence(model):
    seen: list = []
    model.generate(PROMPTS, 3, use_kv_cache=False, fwd_hooks=[(NAMES[1], _recorder(seen))])
    width = model.to_tokens(PROMPTS).ids.shape[1]
    assert [(s[1], s[2]) for s in seen] == [(k, (3, width + k, model.cfg.d_model)) for k in range(3)]
    state = seen[-1][3]
    assert not state.cached and state.generated[:, width:].all() and not state.generated[:, :width].any()


def test_hooks_from_the_context_manager_act_at_every_step_and_everything_is_removed(model):
    seen: list = []
    with model.hooks([(NAMES[1], _recorder(seen))]):
        model.generate(PROMPTS[0], 5)
    assert [s[1] for s in seen] == [0, 1, 2, 3, 4]
    assert not any(p.active for p in model.hook_dict.values())
    assert all(p.step is None and p.generation is None for p in model.hook_dict.values())


def test_hooks_are_removed_when_generation_raises_and_what_was_made_is_kept(model):
    reference = model.generate(PROMPTS, 8)

    def fail_at_step_5(x, hook):
        if hook.step == 5:
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here") as info:
        model.generate(PROMPTS, 8, fwd_hooks=[(NAMES[1], fail_at_step_5)])
    partial = info.value.generation
    assert partial.stop_reasons == ["error"] * 3
    assert partial.new_tokens == [t[:5] for t in reference.new_tokens]
    assert torch.equal(partial.tokens, reference.tokens[:, : partial.tokens.shape[1]])
    assert any("5 new token(s)" in note for note in getattr(info.value, "__notes__", ["5 new token(s)"]))
    assert not any(p.active for p in model.hook_dict.values())
    assert all(p.step is None for p in model.hook_dict.values())


def test_an_interrupt_keeps_what_was_generated(model):
    reference = model.generate(PROMPTS[0], 6)

    def interrupt(x, hook):
        if hook.step == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as info:
        model.generate(PROMPTS[0], 6, fwd_hooks=[(NAMES[1], interrupt)])
    assert info.value.generation.new_tokens == [reference.new_tokens[0][:4]]
    assert info.value.generation.text == [model.tokenizer.decode(reference.new_tokens[0][:4])]


def test_a_bad_edit_raises_naming_the_hook_and_keeps_nothing_attached(model):
    with pytest.raises(HookEditError, match="blocks.1.hook_resid_post"):
        model.generate(PROMPTS, 3, fwd_hooks=[(NAMES[1], lambda x, hook: x[:, :1])])
    assert not any(p.active for p in model.hook_dict.values())


# -- steering during generation -----------------------------------------------------------------------------


def _direction(model, seed: int = 0) -> torch.Tensor:
    return torch.randn(model.cfg.d_model, generator=torch.Generator().manual_seed(seed)) * 6


@pytest.mark.parametrize("positions", ["all", "new", [-1, "new"], [0, 2]])
def test_steering_gives_the_same_tokens_with_and_without_the_cache_and_changes_them(model, positions):
    hooks = [("blocks.0.hook_resid_post", steer(_direction(model), 1.0, positions=positions))]
    plain = model.generate(PROMPTS, 10)
    cached = model.generate(PROMPTS, 10, fwd_hooks=hooks, return_logits=True)
    full = model.generate(PROMPTS, 10, fwd_hooks=hooks, return_logits=True, use_kv_cache=False)
    assert torch.equal(cached.tokens, full.tokens)
    torch.testing.assert_close(cached.logits, full.logits, atol=1e-4, rtol=0)
    assert cached.new_tokens != plain.new_tokens
    if positions == "new":  # the first token is predicted from the prompt, which "new" leaves alone
        assert [t[0] for t in cached.new_tokens] == [t[0] for t in plain.new_tokens]


def test_steering_only_generated_positions_leaves_the_prompt_pass_alone(model):
    seen: list = []
    hooks = [
        ("blocks.0.hook_resid_post", steer(_direction(model), 1.0, positions="new")),
        ("blocks.0.hook_resid_post", lambda x, hook: seen.append(x.clone())),
    ]
    model.generate(PROMPTS, 3, fwd_hooks=hooks)
    _, cache = model.run_with_cache(*model.to_tokens(PROMPTS, padding_side="left"))
    torch.testing.assert_close(seen[0], cache["blocks.0.hook_resid_post"])


# -- return_cache -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("padding_side", ["left", "right"])
def test_return_cache_equals_run_with_cache_over_the_generated_sequence(model, padding_side):
    hooks = [("blocks.0.hook_resid_post", steer(_direction(model), 1.0))]
    names = ["blocks.1.hook_resid_post", "blocks.1.attn.hook_pattern"]
    out = model.generate(
        PROMPTS, 7, fwd_hooks=hooks, return_cache=True, names_filter=names, padding_side=padding_side
    )
    _, expected = model.run_with_cache(out.tokens, out.mask, names_filter=names, fwd_hooks=hooks)
    assert sorted(out.cache.keys()) == sorted(names)
    for name in names:
        torch.testing.assert_close(out.cache[name], expected[name], atol=1e-6, rtol=0)


# -- stopping -----------------------------------------------------------------------------------------------


def test_rows_stop_at_their_eos_and_pad_after_it(model):
    free = model.generate(PROMPTS, 10, stop_at_eos=False)
    eos = free.new_tokens[1][4]  # row 1's fifth token becomes the end of sequence
    out = model.generate(PROMPTS, 10, eos_token_id=eos)
    for row, tokens in enumerate(free.new_tokens):
        stop = tokens.index(eos) if eos in tokens else None
        expected = tokens if stop is None else tokens[:stop]
        assert out.new_tokens[row] == expected
        assert out.stop_reasons[row] == ("eos" if stop is not None else "max_new_tokens")
        if stop is not None:
            width = max(out.prompt_lengths)
            assert out.tokens[row, width + stop] == eos and out.mask[row, width + stop] == 1
            assert not out.mask[row, width + stop + 1 :].any()
            assert out.text[row] == model.tokenizer.decode(expected)


def test_stop_strings_are_found_across_token_boundaries(model):
    free = model.generate(PROMPTS[2], 12)
    pieces = [model.tokenizer.decode([t]) for t in free.new_tokens[0]]
    text = "".join(pieces)
    assert text == free.text[0]
    cut = len(pieces[0]) + len(pieces[1])  # spans the end of token 1 and the start of token 2
    stop = text[cut - 1 : cut + 1]
    streamed: list[str] = []
    out = model.generate(PROMPTS[2], 12, stop_strings=[stop], stream=lambda row, s: streamed.append(s))
    at = text.find(stop)
    assert out.stop_reasons == ["stop_string"]
    assert out.text[0] == text[:at]
    assert "".join(streamed) == out.text[0]
    ends = [sum(len(p) for p in pieces[: i + 1]) for i in range(len(pieces))]
    first = next(i for i, e in enumerate(ends) if e > at)  # the token in which the stop begins
    assert out.new_tokens[0] == free.new_tokens[0][:first]
    last = next(i for i, e in enumerate(ends) if e >= at + len(stop))  # generation ran until it was complete
    assert int(out.mask[0].sum()) == out.prompt_lengths[0] + last + 1


def test_streaming_gives_the_final_text_of_every_row(model):
    streamed: dict[int, str] = {}
    out = model.generate(
        PROMPTS, 9, stream=lambda row, s: streamed.__setitem__(row, streamed.get(row, "") + s)
    )
    assert [streamed.get(row, "") for row in range(3)] == out.text


def test_max_new_tokens_and_text_of_generated_ids(model):
    out = model.generate(PROMPTS, 5)
    assert out.stop_reasons == ["max_new_tokens"] * 3
    assert all(len(t) == 5 for t in out.new_tokens)
    assert out.text == [model.tokenizer.decode(t) for t in out.new_tokens]
    assert out.tokens.shape == (3, max(out.prompt_lengths) + 5)


# -- bad input ----------------------------------------------------------------------------------------------


BAD = [
    (dict(max_new_tokens=0), "max_new_tokens=0; give a whole number of tokens >= 1"),
    (
        dict(max_new_tokens=90),
        r"a prompt of \d+ tokens plus max_new_tokens=90 is longer than the model's context",
    ),
    (dict(do_sample=True, top_p=0.0), r"top_p=0.0 is outside \(0, 1\]"),
    (dict(do_sample=True, top_p=1.5), r"top_p=1.5 is outside \(0, 1\]"),
    (dict(do_sample=True, temperature=0.0), "temperature=0.0; sampling needs a temperature > 0"),
    (dict(top_k=5), "top_k=5 only apply when sampling; pass do_sample=True"),
    (dict(stop_strings=["\n", ""]), r"stop_strings\[1\] is empty"),
    (dict(names_filter="blocks.0.hook_resid_pre"), "names_filter says what return_cache=True captures"),
    (dict(padding_side="middle"), "padding_side='middle'"),
]


@pytest.mark.parametrize("kwargs,message", BAD, ids=[m[:24] for _, m in BAD])
def test_bad_arguments_are_refused_before_anything_runs(model, kwargs, message):
    calls: list = []
    kwargs = {"max_new_tokens": 4, **kwargs}
    with pytest.raises(ValueError, match=message):
        model.generate(PROMPTS, fwd_hooks=[("hook_embed", lambda x, hook: calls.append(1))], **kwargs)
    assert calls == []
    assert not any(p.active for p in model.hook_dict.values())


def test_a_prompt_longer_than_the_context_is_refused(model):
    with pytest.raises(ValueError, match="longer than the model's context n_ctx=96"):
        model.generate(list(range(2, 99)), 1)
    with pytest.raises(ValueError, match="no room to generate"):
        model.generate(list(range(2, 98)), 1)


def test_steering_vectors_that_do_not_fit_are_refused_before_anything_runs(model):
    calls: list = []
    count = ("hook_embed", lambda x, hook: calls.append(1))
    with pytest.raises(ValueError, match=r"shape \[32\] does not fit 'blocks.0.hook_resid_post'"):
        model.generate(PROMPTS, 4, fwd_hooks=[count, ("blocks.0.hook_resid_post", steer(torch.randn(32)))])
    with pytest.raises(ValueError, match=r"is \[batch, head, query, key\]"):
        model.generate(PROMPTS, 4, fwd_hooks=[count, ("blocks.0.attn.hook_pattern", steer(torch.randn(5)))])
    assert calls == []


def test_an_encoder_cannot_generate():
    encoder = HookedTransformer(tiny_config(causal=False))
    with pytest.raises(ValueError, match="generation needs a causal language model"):
        encoder.generate([[1, 2]], 2)
