"""A model interp loads, answering chat requests through interp's own generation.

Requests are rendered with the checkpoint's own chat template (the Jinja template a GGUF file or a Hugging
Face folder carries, run in Jinja's sandbox as transformers runs it), grouped by sampling settings, sorted by
length and sent to :meth:`model.generate <interp.generation.generate>` ``batch_size`` at a time, left-padded:
one forward pass per generated token serves a whole batch of prompts. A checkpoint without a template (a base
model) gets a plain transcript, ``System: ... User: ... Assistant:``.

With ``top_logprobs`` the logits of every step are kept and the likeliest tokens at each read from them, as an
OpenAI-compatible server would return them. Sampling (a temperature above 0) is seeded by the request's own
hash, so an answer does not depend on which other requests shared its batch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from interp.sae.explanations.chat import ChatReply, ChatRequest, OnReply, TokenChoice
from interp.sae.explanations.failure import Failure


def chat_template_of(name_or_path: str | Path) -> str | None:
    """The chat template of a packaged model, a ``.gguf`` file or a Hugging Face folder, or ``None``."""
    from interp.load.gguf_file import GGUFFile
    from interp.load.packaged import PACKAGED_MODELS, packaged_path

    path = packaged_path(str(name_or_path)) if str(name_or_path) in PACKAGED_MODELS else Path(name_or_path)
    path = path.expanduser()
    if path.is_file() and path.suffix == ".gguf":
        template = GGUFFile(path).get("tokenizer.chat_template", None)
        return template if isinstance(template, str) else None
    if path.is_dir():
        if (path / "chat_template.jinja").is_file():
            return (path / "chat_template.jinja").read_text()
        config = path / "tokenizer_config.json"
        if config.is_file():
            template = json.loads(config.read_text()).get("chat_template")
            if isinstance(template, list):  # named templates: the default one
                template = next((t.get("template") for t in template if t.get("name") == "default"), None)
            return template if isinstance(template, str) else None
    return None


class LocalBackend:
    """Chat requests answered by ``model.generate``, batched.

    Args:
        model: a causal language model loaded by :func:`interp.load`.
        name: the model's name, as results and the cache record it (``"smollm2-135m"``, a path).
        chat_template: a Jinja chat template (see :func:`chat_template_of`); ``None`` for a plain transcript.
        batch_size: prompts generated together.
        progress: show a progress bar over each batch's steps.
    """

    def __init__(
        self,
        model: Any,
        *,
        name: str,
        chat_template: str | None = None,
        batch_size: int = 8,
        progress: bool = False,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size}; give 1 or more prompts per batch")
        self.model = model
        self._name = name
        self.batch_size = batch_size
        self.progress = progress
        self._template = None if chat_template is None else _compile(chat_template)
        self.batches = 0

    @property
    def name(self) -> str:
        return self._name

    def render(self, request: ChatRequest) -> str:
        """The prompt text the model continues."""
        if self._template is None:
            turns = [f"{role.capitalize()}: {content}" for role, content in request.messages]
            return "\n\n".join([*turns, "Assistant:"])
        tokenizer = self.model.tokenizer
        special = {
            "bos_token": _token_text(tokenizer, tokenizer.bos_id),
            "eos_token": _token_text(tokenizer, tokenizer.eos_id),
        }
        messages = [{"role": role, "content": content} for role, content in request.messages]
        return self._template.render(messages=messages, add_generation_prompt=True, **special)

    def complete(
        self, requests: Sequence[ChatRequest], on_reply: OnReply | None = None
    ) -> list[ChatReply | Failure]:
        """The answers, generated ``batch_size`` prompts at a time; each batch's answers go to ``on_reply`` as
        soon as the batch is generated."""
        prompts = [self.render(r) for r in requests]
        lengths = [len(self.model.tokenizer.backend.encode(p, add_special_tokens=False).ids) for p in prompts]
        replies: list[ChatReply | Failure | None] = [None] * len(requests)
        groups: dict[tuple, list[int]] = {}
        n_ctx = self.model.cfg.n_ctx
        for i, r in enumerate(requests):
            if lengths[i] + r.max_tokens > n_ctx:
                replies[i] = Failure(
                    f"the prompt is {lengths[i]} tokens; with {r.max_tokens} to generate it exceeds the model's "
                    f"context of {n_ctx}; show fewer or shorter examples (--n-explain, --per-prompt, --context)"
                )
                if on_reply is not None:
                    on_reply(i, replies[i])
                continue
            groups.setdefault((r.max_tokens, r.temperature, r.top_logprobs), []).append(i)
        for (max_tokens, temperature, top), rows in groups.items():
            rows.sort(key=lambda i: lengths[i])
            for start in range(0, len(rows), self.batch_size):
                batch = rows[start : start + self.batch_size]
                seeds = [int(requests[i].key(self.name)[:8], 16) for i in batch]
                answers = self._generate([prompts[i] for i in batch], max_tokens, temperature, top, seeds)
                for i, reply in zip(batch, answers, strict=True):
                    replies[i] = reply
                    if on_reply is not None:
                        on_reply(i, reply)
        return replies  # type: ignore[return-value]

    def _generate(
        self, prompts: list[str], max_tokens: int, temperature: float, top: int, seeds: list[int]
    ) -> list[ChatReply]:
        sampling: dict[str, Any] = {}
        if temperature > 0:
            sampling = {"do_sample": True, "temperature": temperature, "seed": seeds}
        out = self.model.generate(
            prompts, max_tokens, prepend_bos=False, return_logits=top > 0, progress=self.progress, **sampling
        )
        self.batches += 1
        replies = []
        for row, text in enumerate(out.text):
            tokens = None
            if top > 0:
                tokens = self._choices(out.logits[row], out.new_tokens[row], top)
            replies.append(ChatReply(text.strip(), self.name, tokens))
        return replies

    def _choices(self, logits: torch.Tensor, ids: list[int], top: int) -> tuple[TokenChoice, ...]:
        """The generated tokens with the ``top`` likeliest at each step (``logits``: ``[step, d_vocab]``)."""
        decode = self.model.tokenizer.to_str_tokens
        logprobs = torch.log_softmax(logits[: len(ids)].float(), dim=-1)  # [step, d_vocab]
        values, indices = logprobs.topk(top, dim=-1)  # [step, top]
        choices = []
        for step, token in enumerate(ids):
            texts = decode(indices[step].tolist())
            choices.append(
                TokenChoice(decode([token])[0], tuple(zip(texts, values[step].tolist(), strict=True)))
            )
        return tuple(choices)


def _compile(template: str) -> Any:
    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
    )
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template)


def _token_text(tokenizer: Any, token_id: int | None) -> str:
    return "" if token_id is None else tokenizer.to_str_tokens([token_id])[0]
