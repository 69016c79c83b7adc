"""Chat templates rendered as ``transformers``' ``apply_chat_template`` renders them: the text and the ids,
from a GGUF file's ``tokenizer.chat_template`` and from a model folder's ``tokenizer_config.json`` or
``chat_template.jinja``; refusals in one line."""

from __future__ import annotations

import json

import pytest
import transformers

from interp.load import load
from interp.tokens import Tokenizer
from tests.load.builders import byte_level_bpe, save_folder
from tests.load.families import build
from tests.test_tokens import needs_smollm

CHATS = [
    [{"role": "user", "content": "What is 2+2?"}],
    [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": 'And "another"? <b>'},
    ],
]
# A template using what transformers adds to Jinja: loop controls, tojson without HTML escaping,
# raise_exception and the special tokens by name.
TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'tool' %}{{ raise_exception('no tools here') }}"
    "{% endif %}{% if loop.index > 9 %}{% break %}{% endif %}"
    "[{{ m['role'] }}] {{ m['content'] | tojson }}{{ eos_token }}\n{% endfor %}"
    "{% if add_generation_prompt %}[assistant] {% endif %}"
)


@needs_smollm
@pytest.mark.slow
def test_the_packaged_gguf_template_renders_as_transformers_renders_it():
    from interp.load.packaged import packaged_path

    path = packaged_path("smollm2-135m")
    reference = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    tokenizer = load("smollm2-135m").tokenizer
    assert tokenizer.chat_template == reference.chat_template
    specials = {tokenizer.bos_id, tokenizer.eos_id}
    for chat in CHATS:
        for generation in (True, False):
            text = tokenizer.chat_text(chat, add_generation_prompt=generation)
            assert text == reference.apply_chat_template(
                chat, tokenize=False, add_generation_prompt=generation
            )
            ids = reference.apply_chat_template(chat, tokenize=True, add_generation_prompt=generation)
            ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
            tokens = tokenizer.chat_tokens(chat, add_generation_prompt=generation)
            assert tokens.ids[0].tolist() == ids
            assert tokens.special[0].tolist() == [
                i in specials for i in ids
            ]  # turn markers written in the text


@pytest.mark.parametrize("where", ["tokenizer_config.json", "chat_template.jinja"])
def test_a_folders_template_renders_as_transformers_renders_it(tmp_path, where):
    backend = byte_level_bpe()
    backend.add_special_tokens(["<s>", "</s>"])
    folder = save_folder(build("llama", backend.get_vocab_size()), backend, tmp_path / "model")
    settings = {"bos_token": "<s>", "eos_token": "</s>", "tokenizer_class": "PreTrainedTokenizerFast"}
    if where == "chat_template.jinja":
        (folder / where).write_text(TEMPLATE, encoding="utf-8")
    else:
        settings["chat_template"] = TEMPLATE
    (folder / "tokenizer_config.json").write_text(json.dumps(settings))
    reference = transformers.AutoTokenizer.from_pretrained(str(folder))
    tokenizer = load(str(folder)).tokenizer
    for chat in CHATS:
        expected = reference.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        assert tokenizer.chat_text(chat) == expected
        assert '"And \\"another\\"? <b>"' in tokenizer.chat_text(CHATS[1])  # tojson, not HTML-escaped
    with pytest.raises(ValueError, match="refused these messages: no tools here"):
        tokenizer.chat_text([{"role": "tool", "content": "x"}])
    with pytest.raises(ValueError, match="each message has a 'role' and a 'content'"):
        tokenizer.chat_text([{"content": "x"}])
    assert Tokenizer.from_json(tokenizer.to_json()).chat_text(CHATS[0]) == tokenizer.chat_text(CHATS[0])


def test_a_tokenizer_without_a_template_says_so():
    tokenizer = Tokenizer(byte_level_bpe(), name="plain")
    with pytest.raises(ValueError, match="plain has no chat template"):
        tokenizer.chat_text(CHATS[0])
