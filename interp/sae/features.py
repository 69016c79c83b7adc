"""What a feature does: the contexts where it fires most, how its activations spread, which logits it moves.

:func:`feature_stats` makes one pass over a data set and keeps, for the features asked about, their top
activating tokens with the context around them and every non-zero activation (for a histogram); memory grows
with the features asked about, not with the dictionary. :func:`logit_effects` reads the direct effect of a
feature's decoder row on the logits, ``W_dec[f] @ W_U``. :func:`add_feature_section` turns both into a report
section through the one report writer: the contexts as an HTML block with the activating token marked, every
token string escaped, and at most ``max_features`` features of ``k`` contexts each.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import numpy as np
import pandas as pd
import torch

from interp.sae.module import SAE

MAX_TOKEN_CHARS = 40


@dataclass
class FeatureStats:
    """Top contexts and activation values of some features over a data set."""

    features: list[int]
    contexts: pd.DataFrame
    values: dict[int, np.ndarray] = field(repr=False)
    n_tokens: int

    def density(self, feature: int) -> float:
        return len(self.values[feature]) / max(self.n_tokens, 1)


def _token_strings(model: Any, ids: torch.Tensor) -> list[str]:
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        return [f"<{int(i)}>" for i in ids]
    return list(tokenizer.to_str_tokens(ids))


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
    """Top ``k`` activating tokens (with ``window`` tokens of context each side) and all activations of
    ``features``, over ``tokens`` (ids ``[batch, pos]``, a Tokens batch, or texts)."""
    from interp.sae.evaluation_batches import lm_batches

    features = [int(f) for f in features]
    bad = [f for f in features if not 0 <= f < sae.d_sae]
    if bad:
        raise IndexError(f"feature {bad[0]} is out of range for an SAE of d_sae={sae.d_sae}")
    chosen = torch.tensor(features, dtype=torch.long)
    best: dict[int, list[tuple[float, int, int]]] = {f: [] for f in features}
    values: dict[int, list[np.ndarray]] = {f: [] for f in features}
    rows: list[tuple[torch.Tensor, torch.Tensor]] = []
    n_tokens, item0 = 0, 0
    for ids, mask in lm_batches(model, tokens, attention_mask, batch_size):
        _, cache = model.run_with_cache(ids, mask, names_filter=[sae.cfg.hook_name])
        acts = sae.encode(cache[sae.cfg.hook_name].to(sae.device))[..., chosen.to(sae.device)]  # [b, p, f]
        acts = acts.float().cpu() * mask.cpu()[..., None]
        n_tokens += int(mask.sum())
        for j, f in enumerate(features):
            a = acts[..., j]
            values[f].append(a[a > 0].numpy())
            top = a.flatten().topk(min(k, a.numel()))
            for v, flat in zip(top.values.tolist(), top.indices.tolist(), strict=True):
                if v > 0:
                    best[f].append((v, item0 + flat // a.shape[1], flat % a.shape[1]))
            best[f] = sorted(best[f], key=lambda t: (-t[0], t[1], t[2]))[:k]
        rows.extend((ids[b].cpu(), mask[b].cpu().bool()) for b in range(ids.shape[0]))
        item0 += ids.shape[0]
    records = []
    for f in features:
        for rank, (v, item, column) in enumerate(best[f]):
            ids_row, real = rows[item]
            seq = ids_row[real]  # the real tokens, whichever side the padding was on
            pos = int(real[: column + 1].sum()) - 1  # the token's position among them
            lo, hi = max(0, pos - window), min(len(seq), pos + window + 1)
            strings = _token_strings(model, seq[lo:hi])
            records.append(
                {
                    "feature": f,
                    "rank": rank,
                    "activation": v,
                    "item": item,
                    "position": pos,
                    "token": strings[pos - lo],
                    "left": "".join(strings[: pos - lo]),
                    "right": "".join(strings[pos - lo + 1 :]),
                }
            )
    columns = ["feature", "rank", "activation", "item", "position", "token", "left", "right"]
    frame = pd.DataFrame(records, columns=columns)
    return FeatureStats(
        features, frame, {f: np.concatenate(values[f] or [np.zeros(0)]) for f in features}, n_tokens
    )


@torch.no_grad()
def logit_effects(model: Any, sae: SAE, features: Sequence[int], k: int = 10) -> pd.DataFrame:
    """The ``k`` tokens each feature's decoder row promotes and suppresses most, by ``W_dec[f] @ W_U``.

    Returns:
        Rows ``feature, direction ("promoted" | "suppressed"), rank, token, logit``.
    """
    w_u = model.unembed.weight  # [d_model, d_vocab]
    rows = sae.W_dec[torch.as_tensor(list(features), dtype=torch.long)].to(w_u.device, w_u.dtype)
    effects = rows @ w_u  # [features, d_vocab]
    out = []
    for f, effect in zip(features, effects, strict=True):
        for direction, top in (("promoted", effect.topk(k)), ("suppressed", (-effect).topk(k))):
            sign = 1.0 if direction == "promoted" else -1.0
            strings = _token_strings(model, top.indices.cpu())
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


def histogram_figure(stats: FeatureStats, feature: int, bins: int = 40):
    """A histogram of ``feature``'s non-zero activations (a matplotlib Figure)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.2, 2.4))
    ax = fig.subplots()
    values = stats.values[feature]
    if len(values):
        ax.hist(values, bins=bins, color="#d48806")
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
