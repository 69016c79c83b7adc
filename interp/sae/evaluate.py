"""``interp.sae.evaluate``: how well SAEs reconstruct a model's activations, and what splicing them costs.

Per SAE, over the real (unpadded) tokens given:

- ``l0``: latents active per token; ``dead_fraction``: latents never active on these tokens;
  ``dense_fraction``: latents active on more than ``dense_threshold`` of the tokens;
- ``mse``: mean squared error per element; ``explained_variance``: ``1 - SSE / SST`` with ``SST`` the squared
  deviations from the activations' mean; ``cosine``: mean cosine of output and target;
- ``ce_clean``, ``ce_sae``, ``ce_zero``, ``ce_mean``: next-token cross-entropy (nats) of the model, with the SAE
  spliced in (no error term), with the activation zeroed, and with it replaced by its mean over these tokens;
  ``ce_recovered_zero`` and ``ce_recovered_mean``: ``(CE_ablated - CE_sae) / (CE_ablated - CE_clean)``;
- ``kl``: mean ``KL(p_clean || p_sae)`` of the next-token distributions (nats).

A transcoder's target is the activation at its output hook. Models without a language-model head get NaN for
the CE and KL columns. ``skip_first=n`` leaves each sequence's first ``n`` real tokens alone: they are left out
of the reconstruction metrics and keep their own activation in the spliced and ablated runs (for SAEs trained
without them, such as the first token's outlier "attention sink" stream).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import torch

from interp.dictionary import check_fits
from interp.sae.evaluation_batches import ce_and_logprobs, lm_batches
from interp.sae.module import SAE
from interp.sae.sae_set import SAESet


def _keep_early(clean: torch.Tensor, early: torch.Tensor):
    """A hook that puts the clean activation back at the ``early`` positions ``[batch, pos]``."""

    def keep(a: torch.Tensor, hook) -> torch.Tensor | None:
        if not bool(early.any()):
            return None
        m = early.to(a.device).reshape(early.shape + (1,) * (a.ndim - 2))
        return torch.where(m, clean.to(a.device, a.dtype), a)

    return keep


def _then(edit, keep):
    def both(a: torch.Tensor, hook) -> torch.Tensor:
        edited = edit(a)
        out = keep(edited, hook)
        return edited if out is None else out

    return both


class _Tally:
    """Running sums for one SAE."""

    def __init__(self, sae: SAE) -> None:
        d = sae.d_out
        self.n = 0
        self.sse = 0.0
        self.sum_x = torch.zeros(d, dtype=torch.float64)
        self.sum_x2 = 0.0
        self.cos = 0.0
        self.l0 = 0.0
        self.fired = torch.zeros(sae.d_sae, dtype=torch.int64)
        self.ce = {"clean": 0.0, "sae": 0.0, "zero": 0.0, "mean": 0.0}
        self.kl = 0.0
        self.n_pred = 0

    def add(self, acts: torch.Tensor, out: torch.Tensor, target: torch.Tensor) -> None:
        out, target = out.double(), target.double()
        self.n += target.shape[0]
        self.sse += float((out - target).pow(2).sum())
        self.sum_x += target.sum(0).cpu()
        self.sum_x2 += float(target.pow(2).sum())
        self.cos += float(torch.nn.functional.cosine_similarity(out, target, dim=-1).sum())
        active = acts > 0
        self.l0 += float(active.sum())
        self.fired += active.sum(0).cpu()

    def row(self, sae: SAE, dense_threshold: float, lm: bool) -> dict[str, Any]:
        n = max(self.n, 1)
        sst = self.sum_x2 - float(self.sum_x.pow(2).sum()) / n
        freq = self.fired.double() / n
        row = {
            "hook": sae.hook_name_out,
            "architecture": sae.cfg.architecture,
            "d_sae": sae.d_sae,
            "n_tokens": self.n,
            "l0": self.l0 / n,
            "explained_variance": 1.0 - self.sse / sst if sst > 0 else float("nan"),
            "mse": self.sse / (n * sae.d_out),
            "cosine": self.cos / n,
            "dead_fraction": float((self.fired == 0).double().mean()),
            "dense_fraction": float((freq > dense_threshold).double().mean()),
        }
        nan = float("nan")
        m = max(self.n_pred, 1)
        ce = {k: (v / m if lm else nan) for k, v in self.ce.items()}
        row.update({f"ce_{k}": v for k, v in ce.items()})
        for ablation in ("zero", "mean"):
            gap = ce[ablation] - ce["clean"]
            row[f"ce_recovered_{ablation}"] = (ce[ablation] - ce["sae"]) / gap if lm and gap != 0 else nan
        row["kl"] = self.kl / m if lm else nan
        return row


@torch.no_grad()
def evaluate(
    model: Any,
    saes: SAE | Sequence[SAE],
    tokens: Any,
    attention_mask: torch.Tensor | None = None,
    *,
    batch_size: int = 8,
    dense_threshold: float = 0.1,
    skip_first: int = 0,
) -> pd.DataFrame:
    """Reconstruction and downstream metrics of each SAE on ``tokens`` (see the module docstring).

    Args:
        model: the model the SAEs belong to.
        saes: one SAE or several; each is evaluated alone. A transcoder set or CLT is evaluated as the
            replacement of the MLPs it covers.
        tokens: ``[batch, pos]`` ids, a :class:`~interp.tokens.Tokens` batch, or texts.
        attention_mask: ``[batch, pos]`` for ids (1 real, 0 padding).
        batch_size: sequences per forward pass.
        dense_threshold: the activation frequency above which a latent counts as dense.
        skip_first: real tokens at the start of each sequence that the SAE does not touch.

    Returns:
        One row per SAE, in the order given; for a transcoder set or CLT, one row per layer (see
        :func:`interp.sae.evaluate_transcoders`, which this calls).
    """
    from interp.sae.transcoder import Transcoder

    if isinstance(saes, Transcoder):
        from interp.sae.evaluate_transcoders import evaluate_transcoders

        return evaluate_transcoders(
            model, saes, tokens, attention_mask, batch_size=batch_size, dense_threshold=dense_threshold
        )
    saes = [saes] if isinstance(saes, SAE) else list(saes)
    for sae in saes:
        check_fits(model, SAESet(sae))
    lm = bool(getattr(model.cfg, "causal", False)) and getattr(model.cfg, "lm_head", "none") != "none"
    tallies = [_Tally(sae) for sae in saes]
    batches = list(lm_batches(model, tokens, attention_mask, batch_size))
    for ids, mask in batches:
        names = sorted({n for s in saes for n in (s.cfg.hook_name, s.hook_name_out)})
        logits, cache = model.run_with_cache(ids, mask, names_filter=names)
        real = mask.bool()
        pairs = real[:, :-1] & real[:, 1:]
        early = real & (mask.long().cumsum(-1) <= skip_first)  # [batch, pos]: the untouched first tokens
        real = real & ~early
        if lm:
            clean_nll, clean_logp = ce_and_logprobs(logits, ids, pairs)
        for sae, tally in zip(saes, tallies, strict=True):
            x = cache[sae.cfg.hook_name][real].to(sae.device)
            target = cache[sae.hook_name_out][real].to(sae.device)
            acts, out = sae.reconstruct(x, hooked=False)
            tally.add(acts.flatten(0, -2) if acts.ndim > 2 else acts, out.flatten(1), target.flatten(1))
            if not lm:
                continue
            keep = _keep_early(cache[sae.hook_name_out], early)
            with model.saes([sae]):
                spliced = model.run_with_hooks(ids, mask, fwd_hooks=[(sae.hook_name_out, keep)])
            sae_nll, sae_logp = ce_and_logprobs(spliced, ids, pairs)
            zero = model.run_with_hooks(
                ids, mask, fwd_hooks=[(sae.hook_name_out, _then(lambda a: torch.zeros_like(a), keep))]
            )
            tally.ce["clean"] += float(clean_nll.sum())
            tally.ce["sae"] += float(sae_nll.sum())
            tally.ce["zero"] += float(ce_and_logprobs(zero, ids, pairs)[0].sum())
            tally.kl += float((clean_logp.exp() * (clean_logp - sae_logp)).sum())
            tally.n_pred += int(pairs.sum())
    if lm:
        for sae, tally in zip(saes, tallies, strict=True):
            mean = (tally.sum_x / max(tally.n, 1)).to(model.dtype)
            for ids, mask in batches:
                pairs = mask.bool()[:, :-1] & mask.bool()[:, 1:]
                early = mask.bool() & (mask.long().cumsum(-1) <= skip_first)

                def to_mean(a: torch.Tensor, mean=mean) -> torch.Tensor:
                    return mean.to(a.device).reshape(a.shape[2:]).expand_as(a).clone()

                def restore(a: torch.Tensor, hook, early=early, to_mean=to_mean) -> torch.Tensor:
                    m = early.to(a.device).reshape(early.shape + (1,) * (a.ndim - 2))
                    return torch.where(m, a, to_mean(a))

                logits = model.run_with_hooks(ids, mask, fwd_hooks=[(sae.hook_name_out, restore)])
                tally.ce["mean"] += float(ce_and_logprobs(logits, ids, pairs)[0].sum())
    frame = pd.DataFrame([t.row(s, dense_threshold, lm) for s, t in zip(saes, tallies, strict=True)])
    return frame
