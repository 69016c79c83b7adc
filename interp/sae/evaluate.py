"""``interp.sae.evaluate``: how well a sparse dictionary reconstructs a model's activations, and what splicing it
costs the model's predictions. One function for every dictionary (SAEs, transcoder sets, cross-layer
transcoders), written over :class:`~interp.dictionary.SparseDictionary`.

Per layer ``L`` of a dictionary, over the real (unpadded) tokens given, with the features reading the clean
model's input at ``input_hook(L)`` and the output compared with the clean model's activation at
``output_hook(L)`` (each layer measured on its own; a cross-layer transcoder's output at ``L`` sums every layer
up to ``L``, each reading its clean input):

- ``l0``: features active per token, a feature being active where its activation is not zero (see below);
  ``dead_fraction``: features never active on these tokens; ``dense_fraction``: features active on more than
  ``dense_threshold`` of the tokens;
- ``fvu``: ``SSE / SST``, the fraction of variance unexplained, with ``SST`` the squared deviations from the
  target's mean over these tokens (``explained_variance = 1 - fvu``); ``mse``: the mean squared error per
  element; ``cosine``: the mean cosine of output and target.

For the dictionary spliced in whole (every layer at once, no error term, so each layer reads what the layers
replaced before it wrote; an SAE alone), the same in each of its rows:

- ``ce_clean``, ``ce_spliced``, ``ce_zero``, ``ce_mean``: next-token cross-entropy (nats) of the model, with the
  dictionary spliced in, with every activation it writes zeroed, and with each replaced by its mean over these
  tokens; ``ce_recovered_zero`` and ``ce_recovered_mean``: ``(CE_ablated - CE_spliced) / (CE_ablated -
  CE_clean)``;
- ``kl``: the mean ``KL(p_clean || p_spliced)`` of the next-token distributions (nats).

Models without a language-model head get NaN for the CE and KL columns. ``skip_first=n`` leaves each sequence's
first ``n`` real tokens alone: they are left out of the reconstruction metrics and keep their own activation in
the spliced and ablated runs (for dictionaries trained without them, such as the first token's outlier
"attention sink" stream).

Why "not zero" is active: a feature writes ``activation * decoder row``, so it takes part in the output exactly
where its activation is not zero, whatever its sign. ReLU, and the SAE formats' JumpReLU and TopK (which pass
the values they keep through a ReLU), never give a negative activation, so there ``!= 0`` and ``> 0`` count
the same. circuit-tracer's JumpReLU with a negative threshold keeps a pre-activation between the threshold and
0, and its TopK keeps the k largest even when some are negative (:mod:`interp.sae.activation`): those features
write (with the opposite sign) and count as active; ``> 0`` would call a token with k negative TopK
activations silent.

The names earlier versions used are kept as columns with the same values: ``ce_sae`` and ``ce_replacement``
(``ce_spliced``), ``ce_recovered`` (``ce_recovered_zero``), ``d_sae`` and ``d_transcoder`` (``n_features``) and,
for SAEs, ``architecture``.
"""

from __future__ import annotations

import warnings
from typing import Any

import pandas as pd
import torch

from interp.dictionary import SparseDictionary, check_fits, written_layers
from interp.sae.evaluation_batches import ce_and_logprobs, lm_batches
from interp.sae.splice import dictionaries, spliced

_CE = ("clean", "spliced", "zero", "mean")


class _Tally:
    """Running sums of one layer's reconstruction over the batches."""

    def __init__(self, d_out: int, n_features: int) -> None:
        self.n, self.sse, self.sum_y2, self.cos, self.l0 = 0, 0.0, 0.0, 0.0, 0.0
        self.sum_y = torch.zeros(d_out, dtype=torch.float64)
        self.fired = torch.zeros(n_features, dtype=torch.int64)

    def add(self, acts: torch.Tensor, out: torch.Tensor, target: torch.Tensor) -> None:
        """``acts [n, n_features]``, ``out`` and ``target`` ``[n, d_out]`` of ``n`` tokens."""
        out, target = out.double(), target.double()
        self.n += target.shape[0]
        self.sse += float((out - target).pow(2).sum())
        self.sum_y += target.sum(0).cpu()
        self.sum_y2 += float(target.pow(2).sum())
        self.cos += float(torch.nn.functional.cosine_similarity(out, target, dim=-1).sum())
        active = acts != 0  # see the module docstring
        self.l0 += float(active.sum())
        self.fired += active.sum(0).cpu()

    def mean(self) -> torch.Tensor:
        """The target's mean over the tokens seen (float64)."""
        return self.sum_y / max(self.n, 1)

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
            "cosine": self.cos / n,
            "dead_fraction": float((self.fired == 0).double().mean()),
            "dense_fraction": float((freq > dense_threshold).double().mean()),
        }


class _Losses:
    """Next-token losses of the clean model, the spliced one and the two ablations, summed over predictions."""

    def __init__(self) -> None:
        self.ce = dict.fromkeys(_CE, 0.0)
        self.kl, self.n = 0.0, 0

    def columns(self, lm: bool) -> dict[str, float]:
        nan, m = float("nan"), max(self.n, 1)
        ce = {k: (v / m if lm else nan) for k, v in self.ce.items()}
        row = {f"ce_{k}": v for k, v in ce.items()}
        for ablation in ("zero", "mean"):
            gap = ce[ablation] - ce["clean"]
            row[f"ce_recovered_{ablation}"] = (ce[ablation] - ce["spliced"]) / gap if lm and gap != 0 else nan
        row["kl"] = self.kl / m if lm else nan
        return row


@torch.no_grad()
def evaluate(
    model: Any,
    dictionary: Any,
    tokens: Any,
    attention_mask: torch.Tensor | None = None,
    *,
    batch_size: int = 8,
    dense_threshold: float = 0.1,
    skip_first: int = 0,
) -> pd.DataFrame:
    """Reconstruction and downstream metrics of a dictionary on ``tokens`` (see the module docstring).

    Args:
        model: the model the dictionary belongs to.
        dictionary: an SAE, an :class:`~interp.sae.SAESet`, a transcoder set, a cross-layer transcoder, or a list
            of these, each evaluated alone (a list of SAEs: each SAE on its own).
        tokens: ``[batch, pos]`` ids, a :class:`~interp.tokens.Tokens` batch, or texts.
        attention_mask: ``[batch, pos]`` for ids (1 real, 0 padding).
        batch_size: sequences per forward pass.
        dense_threshold: the activation frequency above which a feature counts as dense.
        skip_first: real tokens at the start of each sequence that the dictionary does not touch.

    Returns:
        One row per layer of each dictionary, in the order given: ``layer``, ``hook`` (the output hook),
        ``activation``, ``n_features`` and the metrics.
    """
    listed = dictionaries(dictionary)
    for d in listed:
        check_fits(model, d)
    lm = bool(getattr(model.cfg, "causal", False)) and getattr(model.cfg, "lm_head", "none") != "none"
    batches = list(lm_batches(model, tokens, attention_mask, batch_size))
    rows = []
    for d in listed:
        tallies, losses = _evaluate(model, d, batches, skip_first, lm)
        whole = losses.columns(lm)
        for layer in d.layers:
            rows.append(_row(d, layer, tallies[layer].row(dense_threshold), whole))
    return pd.DataFrame(rows)


def _evaluate(
    model: Any, d: SparseDictionary, batches: list, skip_first: int, lm: bool
) -> tuple[dict[int, _Tally], _Losses]:
    outputs = written_layers(d)
    hooks = [d.output_hook(out) for out in outputs]
    names = sorted({d.input_hook(layer) for layer in d.layers} | set(hooks))
    tallies = {layer: _Tally(d.d_out, d.n_features(layer)) for layer in d.layers}
    losses = _Losses()
    for ids, mask in batches:
        logits, cache = model.run_with_cache(ids, mask, names_filter=names)
        real = mask.bool()
        pairs = real[:, :-1] & real[:, 1:]
        early = real & (mask.long().cumsum(-1) <= skip_first)  # [batch, pos]: the untouched first tokens
        kept = real & ~early
        inputs = {layer: cache[d.input_hook(layer)][kept].to(d.device) for layer in d.layers}
        outs = d.reconstruct(inputs)
        for layer in d.layers:
            acts = d.encode(inputs[layer], layer)[1]  # [n, n_features]
            target = cache[d.output_hook(layer)][kept].to(
                d.device
            )  # [n, d_out] ([n, head, d_head] for hook_z)
            tallies[layer].add(acts, outs[layer].flatten(1), target.flatten(1))
        if not lm:
            continue
        keep = [(h, _keep_early(cache[h], early)) for h in hooks] if skip_first else []
        with spliced(model, d):
            replaced = model.run_with_hooks(ids, mask, fwd_hooks=keep)
        zero = [(h, _then(torch.zeros_like, _keep_early(cache[h], early))) for h in hooks]
        zeroed = model.run_with_hooks(ids, mask, fwd_hooks=zero)
        clean_nll, clean_logp = ce_and_logprobs(logits, ids, pairs)
        spliced_nll, spliced_logp = ce_and_logprobs(replaced, ids, pairs)
        losses.ce["clean"] += float(clean_nll.sum())
        losses.ce["spliced"] += float(spliced_nll.sum())
        losses.ce["zero"] += float(ce_and_logprobs(zeroed, ids, pairs)[0].sum())
        losses.kl += float((clean_logp.exp() * (clean_logp - spliced_logp)).sum())
        losses.n += int(pairs.sum())
    if lm:  # each written activation replaced by its mean over every batch's tokens: a second pass
        means = {out: tallies[out].mean().to(model.dtype) for out in outputs}
        for ids, mask in batches:
            pairs = mask.bool()[:, :-1] & mask.bool()[:, 1:]
            early = mask.bool() & (mask.long().cumsum(-1) <= skip_first)
            fwd = [(d.output_hook(out), _to_mean(means[out], early)) for out in outputs]
            logits = model.run_with_hooks(ids, mask, fwd_hooks=fwd)
            losses.ce["mean"] += float(ce_and_logprobs(logits, ids, pairs)[0].sum())
    return tallies, losses


def _row(d: SparseDictionary, layer: int, tally: dict[str, float], whole: dict[str, float]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "layer": layer,
        "hook": d.output_hook(layer),
        "activation": d.activation_of(layer) if hasattr(d, "activation_of") else None,
        "n_features": d.n_features(layer),
        **tally,
        **whole,
    }
    # The names earlier versions gave these columns (see the module docstring).
    row.update(
        ce_sae=row["ce_spliced"],
        ce_replacement=row["ce_spliced"],
        ce_recovered=row["ce_recovered_zero"],
        d_sae=row["n_features"],
        d_transcoder=row["n_features"],
    )
    sae = getattr(d, "saes", {}).get(layer)
    if sae is not None:
        row["architecture"] = sae.cfg.architecture
    return row


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


def _to_mean(mean: torch.Tensor, early: torch.Tensor):
    """A hook that replaces the activation by ``mean`` (flattened heads reshaped back) but at ``early``."""

    def replace(a: torch.Tensor, hook) -> torch.Tensor:
        by_mean = mean.to(a.device).reshape(a.shape[2:]).expand_as(a).clone()
        m = early.to(a.device).reshape(early.shape + (1,) * (a.ndim - 2))
        return torch.where(m, a, by_mean)

    return replace


def evaluate_transcoders(
    model: Any,
    tc: Any,
    tokens: Any,
    attention_mask: torch.Tensor | None = None,
    *,
    batch_size: int = 8,
    dense_threshold: float = 0.1,
) -> pd.DataFrame:
    """:func:`evaluate` of ``tc``: the name earlier versions gave the evaluation of transcoders.

    .. deprecated:: use :func:`evaluate`, which evaluates every kind of dictionary.
    """
    warnings.warn(
        "interp.sae.evaluate_transcoders is interp.sae.evaluate now (one evaluation for every dictionary): "
        "call evaluate(model, tc, tokens, ...)",
        DeprecationWarning,
        stacklevel=2,
    )
    return evaluate(model, tc, tokens, attention_mask, batch_size=batch_size, dense_threshold=dense_threshold)
