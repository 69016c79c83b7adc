"""The generation loop: one forward pass per step, the token buffer, which rows are done, and their text.

The buffer holds every column a generation can reach (the left-padded prompt and ``max_new_tokens`` more), so a
step writes one column in place. With the KV cache a step runs only its newest column; without it, every column
so far. A finished row's new columns are padding, masked out, so the batch keeps its shape.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from hooks import ActivationCache
from interp.generation.prompts import Prompt, to_right_padding
from interp.generation.result import Generation
from interp.generation.sampling import TokenChooser
from interp.generation.state import GenerationStep, set_step
from interp.generation.stopping import RowText, Streamer, find_stop
from interp.model.kv_cache import KVCache

CONTEXT_TOKENS = 4  # prompt tokens decoded with the first new ones, so a leading space survives decoding


class Loop:
    """The state of one generation: the growing token buffer, which rows are done, and their text."""

    def __init__(
        self,
        model: Any,
        prompt: Prompt,
        max_new_tokens: int,
        chooser: TokenChooser,
        eos: set[int],
        stops: tuple[str, ...],
        stream: Callable[[int, str], Any] | None,
        use_kv_cache: bool,
        return_logits: bool,
    ) -> None:
        self.model, self.prompt, self.chooser = model, prompt, chooser
        self.max_new_tokens, self.eos, self.stops = max_new_tokens, eos, stops
        batch, width = prompt.ids.shape
        total = width + max_new_tokens
        pad = model.tokenizer.pad_id if model.tokenizer is not None else 0
        self.pad = pad
        self.tokens = torch.full((batch, total), pad, dtype=torch.long, device=prompt.ids.device)
        self.tokens[:, :width] = prompt.ids
        self.mask = torch.zeros((batch, total), dtype=torch.bool, device=prompt.ids.device)
        self.mask[:, :width] = prompt.mask
        self.finished = torch.zeros(batch, dtype=torch.bool, device=prompt.ids.device)
        self.reasons: list[str | None] = [None] * batch
        self.ids: list[list[int]] = [[] for _ in range(batch)]
        self.stop_at: list[int | None] = [None] * batch
        self.steps = 0
        self.kv_cache = KVCache(model.cfg.n_layers, capacity=total) if use_kv_cache else None
        self.capacity = total
        self.switch = frequency_switch(model.cfg)
        self.logits: list[torch.Tensor] | None = [] if return_logits else None
        self.texts = None
        if model.tokenizer is not None:
            # Special tokens are shown as generated (the EOS that ends a row is never added to its text).
            decode = functools.partial(model.tokenizer.backend.decode, skip_special_tokens=False)
            prompt_ids = prompt.ids.tolist()
            self.texts = [
                RowText(decode, prompt_ids[b][width - min(CONTEXT_TOKENS, int(n)) :])
                for b, n in enumerate(prompt.lengths.tolist())
            ]
        self.streamer = Streamer(stream, stops) if stream is not None else None

    def run(self, points: list, progress: bool) -> None:
        from tqdm.auto import tqdm

        width = self.prompt.width
        bar = tqdm(total=self.max_new_tokens, disable=not progress, desc="generate", leave=False)
        try:
            for step in range(self.max_new_tokens):
                start = 0 if self.kv_cache is None or step == 0 else width + step - 1
                end = width + step
                if start and end == self.switch:  # rotary frequencies change here: rerun everything
                    self.kv_cache, start = KVCache(self.model.cfg.n_layers, capacity=self.capacity), 0
                if points:
                    set_step(points, self._state(step, start, self.mask[:, :end], cached=start > 0))
                logits = self.model(
                    self.tokens[:, start:end], self.mask[:, start:end], kv_cache=self.kv_cache
                )
                last = logits[:, -1]  # [batch, d_vocab]: left padding puts every row's newest token last
                if self.logits is not None:
                    self.logits.append(last.float().clone())
                choice = self.chooser(last, self.tokens[:, :end], self.mask[:, :end])
                chosen = torch.where(self.finished, self.pad, choice)
                self.tokens[:, end] = chosen
                self.mask[:, end] = ~self.finished
                self.steps = step + 1
                self._update(chosen.tolist(), last_step=step + 1 == self.max_new_tokens)
                bar.update(1)
                if all(reason is not None for reason in self.reasons):  # known here: no wait for the device
                    break
        finally:
            bar.close()

    def _state(self, step: int, start: int, mask: torch.Tensor, *, cached: bool) -> GenerationStep:
        """What hooks see of pass ``step``, which runs the columns of ``mask`` [batch, end] from ``start``."""
        return GenerationStep(
            step=step,
            start=start,
            mask=mask[:, start:],
            prompt_lengths=self.prompt.lengths,
            cached=cached,
            _full_mask=mask,
        )

    def _update(self, chosen: list[int], *, last_step: bool) -> None:
        """Record each running row's new token and stop the rows that are done."""
        for row, token in enumerate(chosen):
            if self.reasons[row] is not None:
                continue
            if token in self.eos:
                self._finish(row, "eos")
                continue
            self.ids[row].append(token)
            if self.texts is not None:
                text = self.texts[row]
                piece = text.add(token)
                at = find_stop(text.text, len(text.text) - len(piece), self.stops) if self.stops else None
                if at is not None:
                    self.stop_at[row] = at
                    self._finish(row, "stop_string")
                    continue
                if self.streamer is not None:
                    self.streamer.update(row, text.text)
            if last_step:
                self._finish(row, "max_new_tokens")

    def _finish(self, row: int, reason: str) -> None:
        self.reasons[row] = reason
        self.finished[row] = True
        if self.texts is not None:
            text = self.texts[row]
            if reason != "stop_string":
                text.flush()
            if self.streamer is not None:
                end = self.stop_at[row] if self.stop_at[row] is not None else len(text.text)
                self.streamer.update(row, text.text, end=end)

    def capture(self, points: list, names: list[str], padding_side: str) -> ActivationCache:
        """One more forward over everything generated, hooks in place, capturing ``names``."""
        end = self.prompt.width + self.steps
        tokens, mask = self.tokens[:, :end], self.mask[:, :end]
        if padding_side == "right":
            tokens, mask = to_right_padding(tokens, mask)
        if points:
            set_step(points, self._state(self.steps, 0, mask, cached=False))
        _, cache = self.model.run_with_cache(tokens, mask, names_filter=names)
        return cache

    def result(
        self, padding_side: str, *, cache: ActivationCache | None = None, error: bool = False
    ) -> Generation:
        end = self.prompt.width + self.steps
        tokens, mask = self.tokens[:, :end], self.mask[:, :end]
        if padding_side == "right":
            tokens, mask = to_right_padding(tokens, mask)
        reasons = [r if r is not None else ("error" if error else "max_new_tokens") for r in self.reasons]
        if error and self.texts is not None:  # a row cut short keeps even an incomplete last character
            for row, reason in enumerate(self.reasons):
                if reason is None:
                    self.texts[row].flush()
        new_tokens, texts = [], None if self.texts is None else []
        for row, ids in enumerate(self.ids):
            at = self.stop_at[row]
            if self.texts is None:
                new_tokens.append(list(ids))
                continue
            text = self.texts[row]
            if at is None:
                new_tokens.append(list(ids))
                texts.append(text.text)
            else:  # the tokens wholly before the one in which the stop string begins
                new_tokens.append(ids[: next(i for i, e in enumerate(text.ends) if e > at)])
                texts.append(text.text[:at])
        logits = torch.stack(self.logits, dim=1) if self.logits else None  # [batch, step, d_vocab]
        return Generation(
            tokens=tokens.clone(),
            mask=mask.long(),
            prompt_lengths=self.prompt.lengths.tolist(),
            new_tokens=new_tokens,
            text=texts,
            stop_reasons=reasons,
            logits=logits,
            cache=cache,
        )


def frequency_switch(cfg: Any) -> int | None:
    """The sequence length at which cached keys go stale, or ``None``.

    LongRoPE (Phi-3) rotates with its short factors up to the original context and with its long ones past it,
    for the whole sequence. Keys cached before the sequence outgrew the original context were rotated with the
    short factors, so the step whose sequence first holds ``original_n_ctx + 1`` columns reruns everything into
    a fresh cache, as the reference implementation does; every other kind of rotary keeps its keys valid.
    """
    scaling = cfg.rotary_scaling
    if scaling is None or scaling.kind != "longrope" or scaling.original_n_ctx is None:
        return None
    return scaling.original_n_ctx + 1
