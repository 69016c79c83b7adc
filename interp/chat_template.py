"""A checkpoint's chat template: the Jinja program that turns a list of messages into the model's prompt text.

Instruction-tuned checkpoints ship one (``tokenizer_config.json``'s ``chat_template`` or a
``chat_template.jinja`` file beside it; a GGUF file's ``tokenizer.chat_template``). It is rendered the way
``transformers``' ``apply_chat_template`` renders it, so the same messages give the same text: a sandboxed
Jinja environment (a template is code from a file, and the sandbox keeps it from reaching anything else) with
``trim_blocks`` and ``lstrip_blocks``, loop controls, ``tojson`` without HTML escaping, ``raise_exception``
and ``strftime_now``; the template sees ``messages``, ``add_generation_prompt`` and the tokenizer's special
tokens by name (``bos_token``, ``eos_token``, ...).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any


class ChatTemplateError(ValueError):
    """Messages the template refuses (it raised), or a template that does not compile."""


def render_chat(
    template: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = True,
    special_tokens: Mapping[str, str | None] | None = None,
) -> str:
    """The prompt text ``template`` makes of ``messages`` (each a mapping with ``role`` and ``content``).

    Args:
        add_generation_prompt: end with what opens the assistant's reply, so the model continues as the
            assistant.
        special_tokens: ``{"bos_token": "<s>", ...}``, as the template names them.
    """
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or not {"role", "content"} <= set(message):
            raise ChatTemplateError(f"message {i} is {message!r}; each message has a 'role' and a 'content'")
    import jinja2

    try:
        return _compiled(template).render(
            messages=[dict(m) for m in messages],
            add_generation_prompt=add_generation_prompt,
            **{k: v for k, v in (special_tokens or {}).items() if v is not None},
        )
    except jinja2.TemplateError as err:
        raise ChatTemplateError(f"the chat template refused these messages: {err}") from None


@lru_cache(maxsize=8)
def _compiled(template: str) -> Any:
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(
        x: Any,
        ensure_ascii: bool = False,
        indent: Any = None,
        separators: Any = None,
        sort_keys: bool = False,
    ):
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    try:
        return env.from_string(template)
    except jinja2.TemplateSyntaxError as err:
        raise ChatTemplateError(f"the chat template does not compile: {err}") from None
