"""Choosing the next token: greedy, or sampling with temperature, a frequency penalty, top-k and top-p, one
generator per row.

Each row draws from its own ``torch.Generator``, seeded with ``seed + row`` (or ``seed[row]``), and consumes
exactly one uniform number per step. A row's sample therefore depends only on its own logits and its own seed:
a prompt sampled alone with seed ``s`` gives the same text as the same prompt in row ``r`` of a batch sampled
with seed ``s - r``, whatever the other rows hold. The generators live on the CPU and the draw is an inverse
CDF over the filtered distribution, so the choice does not depend on the device's random number stream either.

The frequency penalty is TransformerLens's: after the temperature, each token's score is lowered by the penalty
times the number of times the token occurs in the row so far (prompt included), so a token said often becomes
less likely; Neuronpedia's steering endpoints pass it through as ``freq_penalty``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def check_sampling(
    do_sample: bool,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
    seed: int | Sequence[int] | None,
    frequency_penalty: float = 0.0,
) -> None:
    """Raise ``ValueError`` for sampling settings that cannot be used, before anything runs."""
    if not do_sample:
        given = [
            f"{name}={value!r}"
            for name, value, default in (
                ("temperature", temperature, 1.0),
                ("top_k", top_k, None),
                ("top_p", top_p, None),
                ("seed", seed, None),
                ("frequency_penalty", frequency_penalty, 0.0),
            )
            if value != default
        ]
        if given:
            raise ValueError(
                f"{', '.join(given)} only apply when sampling; pass do_sample=True (greedy decoding "
                "always takes the most likely token)"
            )
        return
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0:
        raise ValueError(f"temperature={temperature!r}; sampling needs a temperature > 0 (1.0: unchanged)")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k={top_k!r}; give a whole number of tokens >= 1, or None to keep all")
    if top_p is not None and (
        isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1
    ):
        raise ValueError(f"top_p={top_p!r} is outside (0, 1]; e.g. 0.9 keeps the most likely 90% of mass")
    if (
        isinstance(frequency_penalty, bool)
        or not isinstance(frequency_penalty, (int, float))
        or not 0 <= frequency_penalty < float("inf")
    ):
        raise ValueError(
            f"frequency_penalty={frequency_penalty!r}; give a finite number >= 0 (0: no penalty, 1: each "
            "earlier occurrence lowers a token's score by 1)"
        )


def row_seeds(seed: int | Sequence[int] | None, batch: int) -> list[int]:
    """The seed of each row: ``seed + row`` for an int, the given list, or fresh seeds from torch's RNG."""
    if seed is None:
        return torch.randint(0, 2**62, (batch,)).tolist()  # governed by torch.manual_seed
    if isinstance(seed, bool):
        raise TypeError(f"seed must be an int or a list of ints, got {seed!r}")
    if isinstance(seed, int):
        return [seed + row for row in range(batch)]
    seeds = list(seed)
    if len(seeds) != batch or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise ValueError(f"seed is a list of {len(seeds)} values; give one int per row ({batch}), or one int")
    return seeds


class TokenChooser:
    """Picks one token per row from next-token logits ``[batch, d_vocab]``.

    Args:
        do_sample: sample (``True``) or take the argmax (``False``).
        temperature: logits are divided by it before sampling.
        top_k: keep only the ``top_k`` most likely tokens.
        top_p: keep the smallest set of most likely tokens whose probability reaches ``top_p``.
        seed: an int (row ``r`` uses ``seed + r``), one int per row, or ``None``.
        batch: rows.
        frequency_penalty: subtracted from a token's score (after the temperature) per occurrence in the row.
    """

    def __init__(
        self,
        *,
        do_sample: bool,
        temperature: float,
        top_k: int | None,
        top_p: float | None,
        seed: int | Sequence[int] | None,
        batch: int,
        frequency_penalty: float = 0.0,
    ) -> None:
        check_sampling(do_sample, temperature, top_k, top_p, seed, frequency_penalty)
        self.do_sample = do_sample
        self.frequency_penalty = float(frequency_penalty)
        self.temperature = float(temperature)
        self.top_k = top_k
        self.top_p = top_p
        self.generators = (
            [torch.Generator().manual_seed(s) for s in row_seeds(seed, batch)] if do_sample else []
        )

    def __call__(
        self, logits: torch.Tensor, tokens: torch.Tensor | None = None, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The chosen token of each row, LongTensor ``[batch]`` on the logits' device; ``tokens`` and ``mask``
        (``[batch, pos]``) are each row so far, which the frequency penalty counts."""
        if not self.do_sample:
            return logits.argmax(dim=-1)
        probs = self.probabilities(logits, tokens, mask).double()  # [batch, d_vocab]
        uniforms = torch.cat([torch.rand(1, generator=g, dtype=torch.float64) for g in self.generators])
        cdf = probs.cumsum(dim=-1)
        target = (uniforms.to(cdf.device) * cdf[:, -1])[:, None]  # [batch, 1]
        # The first token whose cumulative mass exceeds the draw; tokens of zero mass are never chosen.
        chosen = torch.searchsorted(cdf, target, right=True)[:, 0]
        return chosen.clamp(max=probs.shape[-1] - 1)

    def probabilities(
        self, logits: torch.Tensor, tokens: torch.Tensor | None = None, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The distribution sampled from ``[batch, d_vocab]``: temperature, the frequency penalty over
        ``tokens`` (where ``mask`` is set), then top-k, then top-p."""
        scores = logits.float() / self.temperature
        if self.frequency_penalty:
            if tokens is None:
                raise ValueError("a frequency penalty counts the tokens so far; pass them with the logits")
            weights = torch.ones_like(tokens, dtype=torch.float32) if mask is None else mask.float()
            counts = torch.zeros_like(scores).scatter_add_(-1, tokens, weights)  # [batch, d_vocab]
            scores = scores - self.frequency_penalty * counts
        if self.top_k is not None and self.top_k < scores.shape[-1]:
            kth = scores.topk(self.top_k, dim=-1).values[:, -1:]  # [batch, 1]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        probs = scores.softmax(dim=-1)
        if self.top_p is not None and self.top_p < 1:
            sorted_probs, order = probs.sort(dim=-1, descending=True)
            before = sorted_probs.cumsum(dim=-1) - sorted_probs  # mass of the more likely tokens
            drop_sorted = before >= self.top_p  # the most likely token is always kept (before = 0)
            drop = drop_sorted.scatter(-1, order, drop_sorted)
            probs = probs.masked_fill(drop, 0.0)
            probs = probs / probs.sum(dim=-1, keepdim=True)
        return probs
