"""The packaged models against transformers reading the very same files (skipped when not installed).

SmolLM2 ships as a Q4_1 GGUF: both sides dequantize the same bytes, so the logits agree to float32 rounding.
MiniLM ships as a BERT folder: every layer's residual stream must equal ``BertModel``'s hidden states. Both
tokenizers must give the Hugging Face ids and offsets on text with digits, whitespace runs, accents, CJK and
emoji.
"""

from __future__ import annotations

import pytest
import torch

from interp.load import load, load_checkpoint
from interp.load.gguf_hf import permute_rotary_rows
from interp.load.packaged import packaged_path
from tests.load.builders import SEED, hf_from_gguf_cached, needs_minilm, needs_smollm

pytestmark = pytest.mark.slow

STRINGS = [
    SEED,
    "In 2024, 1234567 people paid $3.50 each (≈ 4.3M).",
    "  two  spaces,\tone tab,\t\ttwo tabs\nnew line\n\n\nthree  ",
    "Café, naïve, résumé, Ångström, Straße, ǅ",
    "中文字符和日本語のテキスト、한국어",
    "emoji 😀 👍🏽 🇫🇷 family 👨‍👩‍👧",
    "<|im_start|>user\nHello!<|im_end|>",
    "x",
]
BATCH = [SEED, "The trophy didn't fit in the suitcase because it was too big."]


@pytest.fixture(scope="module")
def smollm():
    return load("smollm2-135m")


@pytest.fixture(scope="module")
def hf_smollm():
    return hf_from_gguf_cached(packaged_path("smollm2-135m"))


@pytest.fixture(scope="module")
def minilm():
    return load("minilm-l6")


@needs_smollm
def test_smollm_logits_match_transformers(smollm, hf_smollm):
    ids, mask = smollm.to_tokens(BATCH, padding_side="right")
    with torch.no_grad():
        ours = smollm(ids, mask)
        theirs = hf_smollm(input_ids=ids, attention_mask=mask).logits
    real = mask.bool()
    diff = (ours - theirs)[real].abs().max().item()
    assert diff < 2e-4, f"max |logit difference| = {diff:.2e}"
    assert torch.equal(ours[real].argmax(-1), theirs[real].argmax(-1))


@needs_smollm
def test_smollm_q_and_k_are_unpermuted(smollm, hf_smollm):
    attn = hf_smollm.model.layers[3].self_attn
    w_q = smollm.blocks[3].attn.W_Q.detach()  # [head, d_model, d_head]
    w_k = smollm.blocks[3].attn.W_K.detach()
    torch.testing.assert_close(
        w_q.permute(0, 2, 1).reshape(-1, w_q.shape[1]), attn.q_proj.weight, atol=0, rtol=0
    )
    torch.testing.assert_close(
        w_k.permute(0, 2, 1).reshape(-1, w_k.shape[1]), attn.k_proj.weight, atol=0, rtol=0
    )
    # What the file stores is llama.cpp's permutation of these rows; loading it without undoing that fails.
    stored = permute_rotary_rows(w_q.permute(0, 2, 1).reshape(-1, w_q.shape[1]), smollm.cfg.n_heads)
    assert (stored - attn.q_proj.weight).abs().max() > 0.1


@needs_smollm
def test_smollm_tokenizer_matches_transformers(smollm):
    from transformers import AutoTokenizer

    path = packaged_path("smollm2-135m")
    theirs = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    for text in STRINGS:
        expected = theirs(text, return_offsets_mapping=True)
        got = smollm.tokenizer.to_tokens(text)
        assert got.ids[0].tolist() == expected["input_ids"], text
        assert [tuple(o) for o in got.offsets[0].tolist()] == [
            tuple(o) for o in expected["offset_mapping"]
        ], text
        assert smollm.tokenizer.decode(got.ids[0]) == theirs.decode(expected["input_ids"]), text


@needs_minilm
def test_minilm_hidden_states_match_transformers(minilm):
    from transformers import BertModel

    reference = BertModel.from_pretrained(str(packaged_path("minilm-l6"))).eval()
    ids, mask = minilm.to_tokens(BATCH, padding_side="right")
    names = [f"blocks.{layer}.hook_resid_post" for layer in range(minilm.cfg.n_layers)]
    with torch.no_grad():
        out, cache = minilm.run_with_cache(ids, mask, names_filter=names)
        hidden = reference(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    real = mask.bool()
    diffs = [(cache[name] - hidden[layer + 1])[real].abs().max().item() for layer, name in enumerate(names)]
    assert max(diffs) < 1e-4, diffs
    torch.testing.assert_close(out[real], hidden[-1][real], atol=1e-4, rtol=0)


@needs_minilm
def test_minilm_tokenizer_matches_transformers(minilm):
    from transformers import AutoTokenizer

    theirs = AutoTokenizer.from_pretrained(str(packaged_path("minilm-l6")))
    for text in STRINGS:
        expected = theirs(text, return_offsets_mapping=True)
        got = minilm.tokenizer.to_tokens(text)
        assert got.ids[0].tolist() == expected["input_ids"], text
        assert [tuple(o) for o in got.offsets[0].tolist()] == [
            tuple(o) for o in expected["offset_mapping"]
        ], text


@needs_smollm
def test_smollm_second_load_is_cached():
    from interp.load import cache

    load_checkpoint("smollm2-135m")
    digest = cache.file_sha256(packaged_path("smollm2-135m"))
    assert cache.entry_path(digest).is_file()
