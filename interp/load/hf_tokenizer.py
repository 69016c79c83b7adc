"""The tokenizer of a Hugging Face model folder: ``tokenizer.json`` plus the special tokens it names.

``tokenizer.json`` holds the whole pipeline (normalizer, pre-tokenizer, model, post-processor); which tokens
are BOS, EOS and padding is in ``tokenizer_config.json`` / ``special_tokens_map.json``, or as ids in
``config.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import tokenizers

from interp.load.errors import CheckpointError
from interp.load.hf_config import HFConfig
from interp.tokens import Tokenizer


def folder_tokenizer(folder: Path, hf: HFConfig, n_ctx: int | None = None) -> Tokenizer:
    """The :class:`~interp.tokens.Tokenizer` of a model folder.

    Raises:
        FileNotFoundError: the folder has no ``tokenizer.json``.
        CheckpointError: it is not a readable ``tokenizers`` file.
    """
    path = folder / "tokenizer.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"{folder} has no tokenizer.json; save one next to the weights with a fast tokenizer's "
            "save_pretrained(folder)"
        )
    try:
        backend = tokenizers.Tokenizer.from_file(str(path))
    except Exception as err:  # tokenizers raises a plain Exception on bad JSON
        raise CheckpointError(f"{path} is not a readable tokenizer.json ({err})") from err
    settings = {
        **_read_json(folder / "special_tokens_map.json"),
        **_read_json(folder / "tokenizer_config.json"),
    }

    def special_id(name: str) -> int | None:
        token = settings.get(f"{name}_token")
        if isinstance(token, dict):
            token = token.get("content")
        index = backend.token_to_id(token) if isinstance(token, str) else None
        if index is None:
            index = hf.get(f"{name}_token_id")
            index = index[0] if isinstance(index, list) and index else index
        return index if isinstance(index, int) and 0 <= index < backend.get_vocab_size() else None

    add_bos = settings.get("add_bos_token")
    return Tokenizer(
        backend,
        bos_id=special_id("bos"),
        eos_id=special_id("eos"),
        pad_id=special_id("pad"),
        prepend_bos=True if add_bos is True else None,
        n_ctx=n_ctx,
        name=str(folder),
        chat_template=_chat_template(folder, settings),
    )


def _chat_template(folder: Path, settings: dict[str, Any]) -> str | None:
    """The folder's chat template: ``chat_template.jinja``, else ``tokenizer_config.json``'s ``chat_template``
    (a template, or a list of named ones of which ``default`` is the chat's)."""
    path = folder / "chat_template.jinja"
    if path.is_file():
        return path.read_text(encoding="utf-8")
    template = settings.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    return template if isinstance(template, str) else None


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{path} is not valid JSON ({err})") from err
