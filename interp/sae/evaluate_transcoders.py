"""How well transcoders replace a model's MLPs: per layer, and for the whole replacement model.

Per layer ``L``, over the real tokens given, with the transcoder reading the clean model's input at
``tc.input_hook(L)`` (each layer measured on its own):

- ``explained_variance`` of the output at ``tc.output_hook(L)`` (``1 - SSE / SST``, ``SST`` the squared
  deviations from its mean; ``fvu`` is ``SSE / SST``), ``mse`` per element;
- ``l0``: features active per token; ``dead_fraction``: features never active on these tokens;
  ``dense_fraction``: features active on more than ``dense_threshold`` of them.

For the whole replacement model (every layer's transcoder spliced in at once, no error term, so each layer
reads what the replaced layers before it wrote), the same in every row:

- ``ce_clean``, ``ce_replacement``, ``ce_zero``: next-token cross-entropy (nats) of the model, of the
  replacement, and with every replaced output zeroed; ``ce_recovered``: ``(CE_zero - CE_replacement) /
  (CE_zero - CE_clean)``; ``kl``: mean ``KL(p_clean || p_replacement)`` (nats).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import torch

from interp.dictionary import check_fits, written_layers
from interp.sae.evaluation_batches import ce_and_logprobs, lm_batches
from interp.sae.transcoder import Transcoder


class _LayerTally:
    def __init__(self, d_model: int, d_transcoder: int) -> None:
        self.n, self.sse, self.sum_y2 = 0, 0.0, 0.0
        self.sum_y = torch.zeros(d_model, dtype=torch.float64)
        self.l0 = 0.0
        self.fired = torch.zeros(d_transcoder, dtype=torch.int64)

    def add(self, acts: torch.Tensor, out: torch.Tensor, target: torch.Tensor) -> None:
        out, target = out.double(), target.double()
        self.n += target.shape[0]
        self.sse += float((out - target).pow(2).sum())
        self.sum_y += target.sum(0).cpu()
        self.sum_y2 += float(target.pow(2).sum())
        active = acts != 0
        self.l0 += float(active.sum())
        self.fired += active.sum(0).cpu()

    def row(self, dense_threshold: float) -> dict[str, float]:
        n = max(self.n, 1)
        sst = self.sum_y2 - float(self.sum_y.pow(2).sum()) / n
        fvu = self.sse / sst if sst > 0 else float("nan")
        freq = self.fired.double() / n
        return {
            "n_tokens": self.n,
            "l0": self.l0 / n,
            "explained_variance": 1.0 - fvu,
            "fvu": fvu,
            "mse": self.sse / (n * self.sum_y.numel()),
            "dead_fraction": float((self.fired == 0).double().mean()),
            "dense_fraction": float((freq > dense_threshold).double().mean()),
        }


@torch.no_grad()
def evaluate_transcoders(
    model: Any,
    tc: Transcoder,
    tokens: Any,
    attention_mask: torch.Tensor | None = None,
    *,
    batch_size: int = 8,
    dense_threshold: float = 0.1,
) -> pd.DataFrame:
    """Per-layer and replacement-model metrics of ``tc`` on ``tokens`` (see the module docstring).

    Args:
        model: the model the transcoders replace the MLPs of.
        tc: a :class:`TranscoderSet` or :class:`CrossLayerTranscoder` (mapped onto the model).
        tokens: ``[batch, pos]`` ids, a :class:`~interp.tokens.Tokens` batch, or texts.
        attention_mask: ``[batch, pos]`` for ids (1 real, 0 padding).
        batch_size: sequences per forward pass.
        dense_threshold: the activation frequency above which a feature counts as dense.

    Returns:
        One row per transcoder layer.
    """
    check_fits(model, tc)
    lm = bool(getattr(model.cfg, "causal", False)) and getattr(model.cfg, "lm_head", "none") != "none"
    tallies = {layer: _LayerTally(tc.d_model, tc.d_transcoder) for layer in tc.layers}
    outputs = written_layers(tc)
    names = [tc.input_hook(layer) for layer in tc.layers] + [tc.output_hook(layer) for layer in outputs]
    ce = {"clean": 0.0, "replacement": 0.0, "zero": 0.0}
    kl, n_pred = 0.0, 0
    device = tc.b_dec.device
    for ids, mask in lm_batches(model, tokens, attention_mask, batch_size):
        logits, cache = model.run_with_cache(ids, mask, names_filter=names)
        real = mask.bool()
        inputs = {layer: cache[tc.input_hook(layer)][real].to(device) for layer in tc.layers}
        outs = tc.reconstruct(inputs)
        for layer in tc.layers:
            acts = tc.encode(inputs[layer], layer)[1]
            tallies[layer].add(acts, outs[layer], cache[tc.output_hook(layer)][real].to(device))
        if not lm:
            continue
        pairs = real[:, :-1] & real[:, 1:]
        clean_nll, clean_logp = ce_and_logprobs(logits, ids, pairs)
        with model.transcoders(tc):
            replaced = model(ids, mask)
        rep_nll, rep_logp = ce_and_logprobs(replaced, ids, pairs)
        zeroed = model.run_with_hooks(
            ids,
            mask,
            fwd_hooks=[(tc.output_hook(layer), lambda a, h: torch.zeros_like(a)) for layer in outputs],
        )
        ce["clean"] += float(clean_nll.sum())
        ce["replacement"] += float(rep_nll.sum())
        ce["zero"] += float(ce_and_logprobs(zeroed, ids, pairs)[0].sum())
        kl += float((clean_logp.exp() * (clean_logp - rep_logp)).sum())
        n_pred += int(pairs.sum())
    nan = float("nan")
    m = max(n_pred, 1)
    whole = {f"ce_{k}": (v / m if lm else nan) for k, v in ce.items()}
    gap = whole["ce_zero"] - whole["ce_clean"]
    whole["ce_recovered"] = (whole["ce_zero"] - whole["ce_replacement"]) / gap if lm and gap != 0 else nan
    whole["kl"] = kl / m if lm else nan
    rows = []
    for layer in tc.layers:
        rows.append(
            {
                "layer": layer,
                "hook": tc.output_hook(layer),
                "activation": tc.activation,
                "d_transcoder": tc.d_transcoder,
                **tallies[layer].row(dense_threshold),
                **whole,
            }
        )
    return pd.DataFrame(rows)
