"""What a feature does, as a report section: its top contexts, its histogram, the logits it moves.

:func:`feature_stats` is the dashboards' pass (:func:`interp.sae.dashboards.collect`) over a data set for the
features asked about: their top activating tokens with the context around them, their activation histograms and
densities, in memory fixed by the features and the examples kept. :func:`logit_effects` reads the direct effect
of a feature's decoder row on the logits (through the final norm and ``W_U``, as the dashboards read it).
:func:`add_feature_section` turns both into a report section through the one report writer: the contexts as an
HTML block with the activating token marked, every token string escaped, and at most ``max_features``
features of ``k`` contexts each.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import pandas as pd
import torch

from interp.sae.module import SAE

MAX_TOKEN_CHARS = 40


@dataclass
class FeatureStats:
    """Top contexts, histograms and densities of some features over a data set.

    Attributes:
        features: the features, as asked.
        contexts: one row per top context: ``feature, rank, activation, item, position, token, left, right``.
        records: feature -> its dashboard record (:class:`interp.sae.dashboards.FeatureFile` as a dict:
            histogram, quantiles).
        n_tokens: tokens read.
    """

    features: list[int]
    contexts: pd.DataFrame
    records: dict[int, dict[str, Any]] = field(repr=False)
    n_tokens: int

    def density(self, feature: int) -> float:
        """The fraction of tokens where ``feature`` fired."""
        return self.records[feature]["activation_frequency"]


@torch.no_grad()
def feature_stats(
    model: Any,
    sae: SAE,
    tokens: Any,
    features: Sequence[int],
    *,
    attention_mask: torch.Tensor | None = None,
    k: int = 8,
    window: int = 8,
    batch_size: int = 8,
) -> FeatureStats:
    """Top ``k`` activating tokens (with ``window`` tokens of context each side), histograms and densities of
    ``features``, over ``tokens`` (ids ``[batch, pos]``, a Tokens batch, or texts, tokenized as the model does;
    every token counts)."""
    from interp.sae.dashboards import Data, Settings, as_dictionary, collect
    from interp.sae.evaluation_batches import lm_batches

    features = [int(f) for f in features]
    bad = [f for f in features if not 0 <= f < sae.d_sae]
    if bad:
        raise IndexError(f"feature {bad[0]} is out of range for an SAE of d_sae={sae.d_sae}")
    layer = as_dictionary(sae).layers[0]
    batches = [(ids.cpu(), mask.cpu()) for ids, mask in lm_batches(model, tokens, attention_mask, batch_size)]
    settings = Settings(top=k, before=window, after=window)
    collected = collect(
        model,
        sae,
        Data(texts=batches, skip_first=0),
        settings=settings,
        features=[(layer, f) for f in features],
    )
    records = {r.feature: r.to_dict() for r in collected.records(model)}
    rows = []
    for f in features:
        groups = records[f]["examples_quantiles"]
        for rank, e in enumerate(groups[0]["examples"] if groups else []):
            at = e["train_token_ind"]
            rows.append(
                {
                    "feature": f,
                    "rank": rank,
                    "activation": e["activation"],
                    "item": e["item"],
                    "position": e["position"],
                    "token": e["tokens"][at],
                    "left": "".join(e["tokens"][:at]),
                    "right": "".join(e["tokens"][at + 1 :]),
                }
            )
    columns = ["feature", "rank", "activation", "item", "position", "token", "left", "right"]
    return FeatureStats(features, pd.DataFrame(rows, columns=columns), records, collected.collector.n_tokens)


@torch.no_grad()
def logit_effects(model: Any, sae: SAE, features: Sequence[int], k: int = 10) -> pd.DataFrame:
    """The ``k`` tokens each feature's decoder row promotes and suppresses most, directly: the row through the
    final norm (taken as linear) and ``W_U`` (:func:`interp.sae.dashboards.logits.direct_logits`).

    Returns:
        Rows ``feature, direction ("promoted" | "suppressed"), rank, token, logit``.
    """
    from interp.sae.dashboards import as_dictionary
    from interp.sae.dashboards.logits import direct_logits, logit_rows

    saes = as_dictionary(sae)
    rows = logit_rows(saes, saes.layers[0], torch.as_tensor(list(features), dtype=torch.long))
    if rows is None:
        raise ValueError(
            f"the SAE at {sae.cfg.hook_name!r} writes no vector of the residual stream with a fixed decoder row "
            "(hook_z, or an input normalised per token), so its features have no direct logit effect"
        )
    effects = direct_logits(model, rows)
    tokenizer = getattr(model, "tokenizer", None)
    out = []
    for f, effect in zip(features, effects, strict=True):
        for direction, top in (("promoted", effect.topk(k)), ("suppressed", (-effect).topk(k))):
            sign = 1.0 if direction == "promoted" else -1.0
            ids = top.indices.tolist()
            strings = tokenizer.to_str_tokens(ids) if tokenizer is not None else [f"<{i}>" for i in ids]
            for rank, (value, token) in enumerate(zip(top.values.tolist(), strings, strict=True)):
                out.append(
                    {
                        "feature": int(f),
                        "direction": direction,
                        "rank": rank,
                        "token": token,
                        "logit": sign * value,
                    }
                )
    return pd.DataFrame(out, columns=["feature", "direction", "rank", "token", "logit"])


def histogram_figure(stats: FeatureStats, feature: int):
    """A histogram of ``feature``'s non-zero activations (a matplotlib Figure), from its dashboard's counts."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.2, 2.4))
    ax = fig.subplots()
    record = stats.records[feature]
    counts = record["histogram"]
    if counts:
        width = record["histogram_range"][1] / len(counts)
        ax.bar([width * (i + 0.5) for i in range(len(counts))], counts, width=width, color="#d48806")
    else:
        ax.text(0.5, 0.5, "never active", ha="center")
    ax.set_title(
        f"feature {feature}: active on {stats.density(feature):.2%} of {stats.n_tokens} tokens", fontsize=9
    )
    ax.set_xlabel("activation", fontsize=8)
    ax.set_ylabel("tokens", fontsize=8)
    ax.tick_params(labelsize=7)
    fig.tight_layout()
    return fig


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def feature_html(
    stats: FeatureStats, effects: pd.DataFrame | None = None, *, max_features: int = 24, max_contexts: int = 8
) -> str:
    """The HTML fragment of a feature section: per feature its top contexts (activating token marked, shaded by
    activation) and its top logits. Every string is escaped; sizes are bounded by the two limits."""
    blocks = []
    for f in stats.features[:max_features]:
        rows = stats.contexts[stats.contexts["feature"] == f].head(max_contexts)
        top = float(rows["activation"].max()) if len(rows) else 0.0
        lines = []
        for r in rows.itertuples():
            alpha = 0.25 + 0.65 * (r.activation / top if top > 0 else 0)
            lines.append(
                f'<div class="ctx"><span class="act">{r.activation:.3g}</span>'
                f"{html.escape(_clip(r.left, 200))}"
                f'<mark style="--a:{alpha:.2f}">{html.escape(_clip(r.token, MAX_TOKEN_CHARS))}</mark>'
                f"{html.escape(_clip(r.right, 200))}</div>"
            )
        logits = ""
        if effects is not None and len(effects):
            parts = []
            for direction in ("promoted", "suppressed"):
                sel = effects[(effects["feature"] == f) & (effects["direction"] == direction)]
                items = "".join(
                    f"<li><code>{html.escape(_clip(t, MAX_TOKEN_CHARS))}</code> {v:+.3g}</li>"
                    for t, v in zip(sel["token"], sel["logit"], strict=True)
                )
                parts.append(f"<div><b>{direction}</b><ol>{items}</ol></div>")
            logits = f'<div class="logits">{"".join(parts)}</div>'
        density = f"active on {stats.density(f):.3%} of {stats.n_tokens:,} tokens"
        body = "".join(lines) or '<div class="ctx">never active on these tokens</div>'
        blocks.append(
            f'<div class="sae-feature"><h3>feature {f}</h3><div class="stats">{html.escape(density)}</div>'
            f"{body}{logits}</div>"
        )
    more = len(stats.features) - max_features
    tail = f'<p class="note">{more} more features are in the tables.</p>' if more > 0 else ""
    return f'<div class="sae-features">{"".join(blocks)}</div>{tail}'


def feature_css() -> str:
    return resources.files("interp.sae").joinpath("features.css").read_text(encoding="utf-8")


def add_feature_section(
    report: Any,
    name: str,
    title: str,
    stats: FeatureStats,
    effects: pd.DataFrame | None = None,
    *,
    intro: str | None = None,
    max_features: int = 12,
    max_contexts: int = 8,
    histograms: int = 6,
) -> None:
    """Add a section of feature cards, their histograms and the full tables to an :class:`interp.report.Report`."""
    report.add_section(title, intro)
    fragment = feature_html(stats, effects, max_features=max_features, max_contexts=max_contexts)
    report.add_html(name, fragment, trusted=True, css=feature_css())
    for f in stats.features[:histograms]:
        report.add_figure(f"{name}_hist_{f}", histogram_figure(stats, f))
    report.add_table(f"{name}_contexts", stats.contexts, caption="Top activating contexts", max_rows=40)
    if effects is not None:
        report.add_table(
            f"{name}_logits", effects, caption="Direct logit effects, W_dec[f] @ W_U", max_rows=40
        )
