"""Text generation with hooks in place: the KV cache, stopping, batching, and edits that act at every step.

Generation is a loop of forward passes. With the KV cache (the default) the first pass runs the prompt and each
later one runs only the newest token, attending to the keys and values stored for the earlier ones; without
it every pass reruns the whole sequence. Both give the same tokens and, step by step, the same logits to float
tolerance, because the cache stores exactly the keys and values (after norm and rotary) that a full pass
recomputes, and positions continue from each row's own count of real tokens.

Hooks attached for the call (``fwd_hooks``) or around it (``model.hooks(...)``) act at every pass. With the
cache they see only the new positions (``[batch, 1, ...]`` after the prompt; patterns and scores
``[batch, head, 1, past + 1]``); ``hook.step`` says which pass is running and ``hook.generation`` where its
positions are (:class:`~interp.generation.state.GenerationStep`). They are removed when the call ends, also
when it raises.

Batched prompts are left-padded. A padded position is never attended to and positions count real tokens, so
every row generates exactly what it generates alone. A row that has finished (EOS, a stop string) keeps
running on masked padding, so the batch that hooks see keeps its shape, and its output ends at the stop.

Example:
    >>> model = interp.load("smollm2-135m")  # doctest: +SKIP
    >>> out = model.generate("The capital of France is", max_new_tokens=8)  # doctest: +SKIP
    >>> out.text[0]  # doctest: +SKIP
    ' Paris.\\n\\nThe answer is:'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from hooks.module import HookSpec
from hooks.names import NamesFilter
from interp.generation.loop import Loop
from interp.generation.prompts import Prompt, make_prompt
from interp.generation.result import Generation
from interp.generation.sampling import TokenChooser
from interp.generation.state import active_points, set_step
from interp.generation.stopping import check_stop_strings


def generate(
    model: Any,
    input: Any,
    max_new_tokens: int,
    *,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | Sequence[int] | None = None,
    frequency_penalty: float = 0.0,
    stop_at_eos: bool = True,
    eos_token_id: int | Sequence[int] | None = None,
    stop_strings: str | Sequence[str] | None = None,
    fwd_hooks: HookSpec = (),
    use_kv_cache: bool = True,
    return_cache: bool = False,
    names_filter: NamesFilter = None,
    return_logits: bool = False,
    prepend_bos: bool | None = None,
    padding_side: str = "left",
    attention_mask: torch.Tensor | None = None,
    stream: Callable[[int, str], Any] | None = None,
    progress: bool = False,
) -> Generation:
    """Generate up to ``max_new_tokens`` tokens after each prompt, with hooks in place.

    Args:
        model: a causal :class:`~interp.HookedTransformer` with a language-model head.
        input: a string, a list of strings, ``model.to_tokens(...)`` output, a tensor of ids ``[pos]`` or
            ``[batch, pos]`` (with ``attention_mask`` if padded), or lists of ids (padded here).
        max_new_tokens: the most tokens to generate per row (>= 1).
        do_sample: sample from the distribution instead of taking the most likely token.
        temperature, top_k, top_p: the sampling distribution (temperature first, then top-k, then top-p).
        seed: row ``r`` samples with its own generator seeded ``seed + r`` (or ``seed[r]``), so a row's
            sample does not depend on the others; ``None`` draws seeds from torch's global RNG.
        frequency_penalty: when sampling, lower each token's score (after the temperature) by this much per
            occurrence in its row so far, prompt included (TransformerLens's ``freq_penalty``).
        stop_at_eos: stop a row at its end-of-sequence token.
        eos_token_id: the id(s) that end a sequence; default the tokenizer's EOS.
        stop_strings: stop a row when its decoded new text contains one of these (matched across token
            boundaries).
        fwd_hooks: ``(names_filter, fn)`` pairs active at every step of this call.
        use_kv_cache: run only the new positions each step (``False``: rerun the whole sequence).
        return_cache: capture ``names_filter`` over the whole generated sequence with one more forward.
        names_filter: what ``return_cache`` captures (``None``: every hook).
        return_logits: keep the next-token logits of every step.
        prepend_bos: for text input, as in ``model.to_tokens``.
        padding_side: the layout of the returned ``tokens``: ``"left"`` (the prompts padded on the left, as
            they are run) or ``"right"`` (each row from column 0, padded after it). Results are the same.
        attention_mask: ``[batch, pos]`` with a tensor ``input`` that holds padding (on either side).
        stream: ``fn(row, text)``, called with each row's new text as soon as it is final (text that might
            be the start of a stop string is held back until it is known not to be).
        progress: show a progress bar over steps.

    Returns:
        A :class:`Generation`.

    Raises:
        ValueError: bad arguments, found before anything runs: ``max_new_tokens < 1``, a prompt that with
            ``max_new_tokens`` exceeds the context, ``top_p`` outside (0, 1], a temperature <= 0 when
            sampling, sampling settings without ``do_sample``, an empty stop string, a steering vector of
            the wrong width or for another model. An exception raised during generation (by a hook, or
            ``KeyboardInterrupt``) propagates with what was generated so far as its ``generation``
            attribute.
    """
    _check_model(model)
    _check_arguments(max_new_tokens, padding_side, return_cache, names_filter, use_kv_cache)
    tokenizer = model.tokenizer
    stops = check_stop_strings(stop_strings, tokenizer)
    eos = _eos_ids(model, stop_at_eos, eos_token_id)
    prompt = make_prompt(model, input, attention_mask=attention_mask, prepend_bos=prepend_bos)
    _check_context(model, prompt, max_new_tokens)
    chooser = TokenChooser(
        do_sample=do_sample,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        seed=seed,
        batch=prompt.batch,
        frequency_penalty=frequency_penalty,
    )
    cache_names = model.resolve(names_filter) if return_cache else None
    loop = Loop(model, prompt, max_new_tokens, chooser, eos, stops, stream, use_kv_cache, return_logits)
    with torch.no_grad(), model.hooks(fwd_hooks):
        points = active_points(model)
        _check_hooks(model, points)
        try:
            loop.run(points, progress)
            captured = loop.capture(points, cache_names, padding_side) if cache_names is not None else None
        except BaseException as err:
            _attach(err, loop.result(padding_side, error=True))
            raise
        finally:
            set_step(points, None)
    return loop.result(padding_side, cache=captured)


def _check_model(model: Any) -> None:
    cfg = model.cfg
    if not cfg.causal or cfg.lm_head != "linear":
        raise ValueError(
            f"generation needs a causal language model with an LM head; this one has causal={cfg.causal}, "
            f"lm_head={cfg.lm_head!r}"
        )


def _check_arguments(
    max_new_tokens: Any, padding_side: str, return_cache: bool, names_filter: Any, use_kv_cache: bool
) -> None:
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens={max_new_tokens!r}; give a whole number of tokens >= 1")
    if padding_side not in ("left", "right"):
        raise ValueError(f"padding_side={padding_side!r}; expected 'left' or 'right'")
    if names_filter is not None and not return_cache:
        raise ValueError("names_filter says what return_cache=True captures; pass return_cache=True too")
    if not isinstance(use_kv_cache, bool):
        raise TypeError(f"use_kv_cache must be True or False, got {use_kv_cache!r}")


def _eos_ids(model: Any, stop_at_eos: bool, eos_token_id: int | Sequence[int] | None) -> set[int]:
    if eos_token_id is not None and not stop_at_eos:
        raise ValueError("eos_token_id says where to stop, but stop_at_eos=False; drop one of them")
    if not stop_at_eos:
        return set()
    if eos_token_id is None:
        eos = getattr(model.tokenizer, "eos_id", None) if model.tokenizer is not None else None
        return set() if eos is None else {eos}
    ids = [eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id)
    bad = [i for i in ids if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < model.cfg.d_vocab]
    if bad or not ids:
        raise ValueError(
            f"eos_token_id={eos_token_id!r}; give token ids in [0, {model.cfg.d_vocab}) (the vocabulary)"
        )
    return set(ids)


def _check_context(model: Any, prompt: Prompt, max_new_tokens: int) -> None:
    n_ctx = model.cfg.n_ctx
    longest = int(prompt.lengths.max())
    if prompt.width > n_ctx:
        raise ValueError(
            f"the prompt is {longest} tokens long, longer than the model's context n_ctx={n_ctx}; shorten it"
        )
    if prompt.width == n_ctx:
        raise ValueError(
            f"the prompt of {longest} tokens fills the model's context n_ctx={n_ctx}: no room to generate; "
            "shorten it"
        )
    if prompt.width + max_new_tokens > n_ctx:
        raise ValueError(
            f"a prompt of {longest} tokens plus max_new_tokens={max_new_tokens} is longer than the model's "
            f"context n_ctx={n_ctx}; use max_new_tokens <= {n_ctx - prompt.width} or a shorter prompt"
        )


def _check_hooks(model: Any, points: list) -> None:
    """Let hooks that can check themselves against the model (steering vectors) do so before any work."""
    for point in points:
        for fn in point.fwd_fns:
            check = getattr(fn, "check_model", None)
            if callable(check):
                check(model, point.name)


def _attach(err: BaseException, partial: Generation) -> None:
    """Give an exception raised mid-generation what was generated before it."""
    try:
        err.generation = partial  # type: ignore[attr-defined]
    except AttributeError:  # an exception type that refuses new attributes
        return
    if hasattr(err, "add_note"):
        steps = max((len(t) for t in partial.new_tokens), default=0)
        err.add_note(
            f"generation stopped after {steps} new token(s); they are in this exception's .generation"
        )
