"""Greedy generation against ``transformers`` ``generate`` on the same weights, token for token.

Tiny random models of several families (``tests/load/families.py``: sliding windows shorter than the
generation, rotary scaling, soft-caps, q/k norms, parallel blocks, mixtures of experts, attention sinks) converted with
``interp.from_hf``, and the packaged SmolLM2 GGUF read by both libraries. Both sides run a left-padded batch
of prompts of different lengths; ``transformers`` counts positions from the attention mask, as interp does.
The LongRoPE model's generation outgrows its original context of 8, where its rotary factors switch and the
cache is rebuilt.
"""

from __future__ import annotations

import pytest
import torch

from interp import from_hf
from interp.load import load
from interp.load.packaged import packaged_path
from tests.load.builders import hf_from_gguf_cached, needs_smollm
from tests.load.families import WINDOW, build

VOCAB = 97
PROMPTS = [[5, 17, 23, 42, 8, 61, 3], [9, 12], [30, 31, 32, 33, 34]]
NEW = 12
LENGTH_DEPENDENT = {"phi3-longrope", "dynamic-rope"}  # rotary frequencies that depend on the length run


def _left_padded(rows: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for b, row in enumerate(rows):
        ids[b, width - len(row) :] = torch.tensor(row)
        mask[b, width - len(row) :] = 1
    return ids, mask


def _hf_generate(reference, ids, mask, new: int, eos: int | None, pad: int) -> torch.Tensor:
    reference.generation_config.eos_token_id = eos
    reference.generation_config.pad_token_id = pad
    with torch.no_grad():
        return reference.generate(
            input_ids=ids, attention_mask=mask, max_new_tokens=new, do_sample=False, eos_token_id=eos
        )


@pytest.mark.parametrize(
    "name",
    [
        "mistral-sliding",
        "gemma2",
        "gemma3",
        "qwen3",
        "pythia",
        "olmo2",
        "phi3",
        "phi3-longrope",
        "llama3-rope",
        "yarn-rope",
        "dynamic-rope",
        "mixtral",
        "qwen2-moe",
        "qwen2-moe-norm",
        "qwen3-moe",
        "olmoe",
        "gpt-oss",
    ],  # fmt: skip
)
def test_tiny_families_generate_what_transformers_generates(name):
    reference = build(name, VOCAB)
    model = from_hf(reference)
    assert len(PROMPTS[0]) + NEW > WINDOW
    ids, mask = _left_padded(PROMPTS, pad=1)
    theirs = _hf_generate(reference, ids, mask, NEW, eos=None, pad=1)
    ours = model.generate(ids, NEW, attention_mask=mask, stop_at_eos=False)
    assert torch.equal(ours.tokens, theirs)
    if name in LENGTH_DEPENDENT:
        return  # the longest row sets the rotary frequencies for the whole batch, as in transformers
    for row, prompt in enumerate(PROMPTS):  # and each row alone
        alone = model.generate(prompt, NEW, stop_at_eos=False)
        assert alone.new_tokens[0] == ours.new_tokens[row]


@pytest.mark.parametrize(
    "name",
    [
        "mistral-sliding",
        "qwen3-sliding",
        "gemma2",
        "gemma3",
        "llama3-rope",
        "yarn-rope",
        "linear-rope",
        "phi3-longrope",
        "mixtral",
        "qwen2-moe",
        "gpt-oss",
    ],
)
def test_cache_and_recomputation_agree_on_the_families(name):
    """Windows of 5 against prompts of up to 7 and 20 new tokens; rotary scaling; LongRoPE's switch."""
    model = from_hf(build(name, VOCAB))
    ids, mask = _left_padded(PROMPTS, pad=1)
    cached = model.generate(ids, 20, attention_mask=mask, stop_at_eos=False, return_logits=True)
    full = model.generate(
        ids, 20, attention_mask=mask, stop_at_eos=False, return_logits=True, use_kv_cache=False
    )
    assert torch.equal(cached.tokens, full.tokens)
    torch.testing.assert_close(cached.logits, full.logits, atol=1e-4, rtol=0)


TEXTS = [
    "The animal didn't cross the street because it was too tired.",
    "My favourite food is",
    "In 1905, Albert Einstein published four papers that changed physics, and",
]


@pytest.fixture(scope="module")
def smollm():
    return load("smollm2-135m")


@pytest.fixture(scope="module")
def hf_smollm():
    return hf_from_gguf_cached(packaged_path("smollm2-135m"))


@pytest.fixture(scope="module")
def alone(smollm):
    """Each text generated alone, once for the tests that compare with it (generation is deterministic)."""
    return {text: smollm.generate(text, 24) for text in TEXTS}


@pytest.mark.slow
@needs_smollm
@pytest.mark.parametrize("text", TEXTS)
def test_smollm_single_prompts_match_transformers(smollm, hf_smollm, alone, text):
    eos, pad = smollm.tokenizer.eos_id, smollm.tokenizer.pad_id
    ids, mask = smollm.to_tokens(text)
    theirs = _hf_generate(hf_smollm, ids, mask, 24, eos=eos, pad=pad)
    ours = alone[text]
    assert torch.equal(ours.tokens, theirs[:, : ours.tokens.shape[1]])
    if theirs.shape[1] > ours.tokens.shape[1]:  # transformers pads after the EOS; interp stops there
        assert (theirs[:, ours.tokens.shape[1] :] == pad).all()


@pytest.mark.slow
@needs_smollm
def test_smollm_left_padded_batch_matches_transformers(smollm, hf_smollm, alone):
    eos, pad = smollm.tokenizer.eos_id, smollm.tokenizer.pad_id
    ids, mask = smollm.to_tokens(TEXTS, padding_side="left")
    assert len(set(mask.sum(-1).tolist())) == len(TEXTS)  # different lengths
    theirs = _hf_generate(hf_smollm, ids, mask, 24, eos=eos, pad=pad)
    ours = smollm.generate(TEXTS, 24)
    width = ours.tokens.shape[1]
    assert torch.equal(ours.tokens[ours.mask.bool()], theirs[:, :width][ours.mask.bool()])
    for row, text in enumerate(TEXTS):
        assert alone[text].new_tokens[0] == ours.new_tokens[row]
        assert alone[text].text[0] == ours.text[row]
