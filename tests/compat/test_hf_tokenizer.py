"""``model.tokenizer`` on the face is the Hugging Face tokenizer TransformerLens code expects, and interp's own.

Golden values come from ``golden/make_patching_golden.py``: what TransformerLens 3.9's ``model.tokenizer``
answers on the golden checkpoint, and its ``utils.tokenize_and_concatenate``. A GGUF file is checked against
the tokenizer ``transformers`` builds from the same file.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch
import transformers

import interp
import interp.compat.transformer_lens as transformer_lens
from interp.compat.transformer_lens import utils
from interp.generation import generate
from tests.compat.models import CHECKPOINT, GOLDEN, tl_model
from tests.load.builders import byte_level_bpe, write_llama_gguf
from tests.load.families import tiny_llama

G = json.loads((GOLDEN / "tokenizer_golden.json").read_text())
TEXTS = list(G["call"])


@pytest.fixture(scope="module")
def model():
    return tl_model(process=False)


def test_the_tokenizer_is_a_hugging_face_fast_tokenizer_with_transformer_lens_values(model):
    tok = model.tokenizer
    assert isinstance(tok, transformers.PreTrainedTokenizerFast)
    assert {name: getattr(tok, name) for name in G["special"]} == G["special"]
    assert tok.padding_side == G["padding_side"] and len(tok) == G["len"]
    for text in TEXTS:
        assert tok(text)["input_ids"] == G["call"][text]
        assert tok(text, add_special_tokens=False).input_ids == G["call_no_special"][text]
        assert tok.encode(text) == G["encode"][text]
        assert tok.tokenize(text) == G["tokenize"][text]
        assert model.to_tokens(text)[0].tolist() == G["to_tokens"][text]
        assert model.to_str_tokens(text) == G["to_str_tokens"][text]
    batch = tok(TEXTS, padding=True, return_tensors="pt")
    assert batch["input_ids"].tolist() == G["batch_right"]["input_ids"]
    assert batch["attention_mask"].tolist() == G["batch_right"]["attention_mask"]
    ids = G["batch_right"]["input_ids"]
    assert [tok.decode(row) for row in ids] == G["decode"]
    assert [tok.decode(row, skip_special_tokens=True) for row in ids] == G["decode_skip"]
    assert tok.batch_decode(ids) == G["batch_decode"]
    assert [tok.convert_ids_to_tokens(row) for row in ids] == G["convert_ids_to_tokens"]
    assert tok.convert_tokens_to_ids(["The", "\u0120cat", "<|endoftext|>"]) == G["convert_tokens_to_ids"]


def test_padding_side_is_one_setting_for_hugging_face_and_interp(model):
    tok = model.tokenizer
    tok.padding_side = "left"
    try:
        batch = tok(TEXTS, padding=True, return_tensors="pt")
        assert batch["input_ids"].tolist() == G["batch_left"]["input_ids"]
        assert batch["attention_mask"].tolist() == G["batch_left"]["attention_mask"]
        ids, mask = model.to_tokens(TEXTS, return_mask=True)
        assert (
            ids.tolist() == G["batch_left"]["input_ids"]
            and mask.tolist() == G["batch_left"]["attention_mask"]
        )
        with pytest.raises(ValueError, match="padding_side='middle'; expected 'left' or 'right'"):
            tok.padding_side = "middle"
    finally:
        tok.padding_side = "right"


def test_interp_code_still_finds_interp_tokenizer_methods(model):
    """Generation and analysis read pad_id, backend and interp's to_tokens on the same attribute."""
    plain = interp.load(CHECKPOINT)
    tok = model.tokenizer
    assert (tok.bos_id, tok.eos_id, tok.pad_id, tok.prepends_bos, tok.n_ctx) == (0, 0, 0, True, 32)
    assert tok.backend.encode("The cat").ids == plain.tokenizer.backend.encode("The cat").ids
    prompt = plain.to_tokens("After John and Mary").ids
    ours = generate(model, prompt, 4, do_sample=False, progress=False)  # decodes with tokenizer.backend
    theirs = generate(plain, prompt, 4, do_sample=False, progress=False)
    assert torch.equal(ours.tokens, theirs.tokens) and ours.text == theirs.text
    assert (
        tok.to_tokens(TEXTS).ids.tolist() == plain.tokenizer.to_tokens(TEXTS).ids.tolist()
    )  # interp's Tokens


def test_tokenize_and_concatenate_equals_transformer_lens():
    datasets = pytest.importorskip("datasets")
    tok = tl_model(process=False).tokenizer
    texts = [
        "The cat sat on the mat. The dog sat on the mat.",
        "After John and Mary went to the store, Mary gave a bottle of milk to John.",
        "",
        "Hello World, the quick brown fox jumped over the lazy dog.",
        "Claire went to the store then gave a bottle of milk to Mary.",
    ]
    dataset = datasets.Dataset.from_dict({"text": texts, "meta": list(range(len(texts)))})
    for key, expected in G["tokenize_and_concatenate"].items():
        length, bos = key.split("_")
        rows = utils.tokenize_and_concatenate(
            dataset, tok, max_length=int(length), add_bos_token=bos == "True", num_proc=None
        )
        assert rows.column_names == ["tokens"]
        assert [row.tolist() for row in rows["tokens"]] == expected, key
    with pytest.raises(ValueError, match="there is no text column 'body'"):
        utils.tokenize_and_concatenate(dataset, tok, column_name="body")
    with pytest.raises(ValueError, match="max_length=1 leaves no room for text"):
        utils.tokenize_and_concatenate(dataset, tok, max_length=1)


def test_set_tokenizer_takes_a_hugging_face_tokenizer(model, tmp_path):
    hf = transformers.PreTrainedTokenizerFast(
        tokenizer_file=f"{CHECKPOINT}/tokenizer.json", bos_token="<|endoftext|>"
    )
    face = tl_model(process=False)
    face.set_tokenizer(hf, default_padding_side="left")
    assert isinstance(face.tokenizer, transformers.PreTrainedTokenizerFast)
    assert face.tokenizer.padding_side == "left" and face.tokenizer.bos_token_id == 0
    assert face.to_tokens("The cat", prepend_bos=True).tolist() == [[0, 1, 7]]
    with pytest.raises(TypeError, match="model.tokenizer is a list"):
        face.tokenizer = ["not", "a", "tokenizer"]


def test_a_gguf_model_tokenizer_equals_transformers_reading_of_the_file(tmp_path):
    backend = byte_level_bpe()
    path = write_llama_gguf(
        tiny_llama(backend.get_vocab_size()), backend, tmp_path / "tiny.gguf", add_bos=True
    )
    model = transformer_lens.HookedTransformer.from_pretrained_no_processing(str(path))
    ours = model.tokenizer
    theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path), gguf_file="tiny.gguf")
    assert isinstance(ours, transformers.PreTrainedTokenizerFast)
    assert (ours.bos_token_id, ours.eos_token_id) == (theirs.bos_token_id, theirs.eos_token_id)
    texts = ["The animal didn't cross the street", "Numbers like 12345 appear"]
    assert ours(texts)["input_ids"] == theirs(texts)["input_ids"]
    ids = ours(texts[0])["input_ids"]
    assert ours.decode(ids) == theirs.decode(ids) and ours.convert_ids_to_tokens(
        ids
    ) == theirs.convert_ids_to_tokens(ids)
    assert model.to_tokens(texts[0])[0].tolist() == ids


def test_texts_start_with_bos_as_in_transformer_lens_where_the_checkpoint_adds_none(tmp_path):
    """A checkpoint whose tokenizer adds no BOS (as GPT-2's): TransformerLens's default prepends one anyway."""
    folder = tmp_path / "no_bos"
    shutil.copytree(CHECKPOINT, folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "add_bos_token": False}))
    expected = G["no_bos_checkpoint"]
    face = transformer_lens.HookedTransformer.from_pretrained_no_processing(str(folder))
    plain = interp.load(folder)
    assert face.cfg.default_prepend_bos is expected["default_prepend_bos"] is True
    for text in TEXTS:
        assert face.tokenizer(text)["input_ids"] == expected["call"][text]
        assert face.to_tokens(text)[0].tolist() == expected["to_tokens"][text]
        assert face.to_tokens(text, prepend_bos=False)[0].tolist() == expected["to_tokens_no_bos"][text]
        assert (
            plain.to_tokens(text).ids[0].tolist() == expected["to_tokens_no_bos"][text]
        )  # interp's own choice
    assert face.to_str_tokens(TEXTS[2])[0] == "<|endoftext|>"
    assert face.generate(TEXTS[2], max_new_tokens=2, do_sample=False).startswith("<|endoftext|>Hello World")
    chosen = transformer_lens.HookedTransformer.from_pretrained_no_processing(
        str(folder), default_prepend_bos=False
    )
    assert chosen.to_tokens(TEXTS[2])[0].tolist() == expected["to_tokens_no_bos"][TEXTS[2]]
