"""``interp explain``: one sentence's attention, step by step, on a real model.

The explainer page is data plus a template (:mod:`interp.report.explainer_page`). This module runs the model
once with the hooks the page needs and reduces the activations to what its seven steps show, for one chosen
token (the query). The page must stay small for long inputs, so what grows with the sequence is bounded:

- patterns: the full ``[layer, head, query, key]`` array only while it is small (:data:`DENSE_LIMIT`
  entries); otherwise each head keeps its top-k keys per query (k = :data:`TOP_K`, lowered so that all
  heads together stay within :data:`SPARSE_BUDGET` entries), plus every head's full row for the query;
- queries for the chosen token only, and keys and values for the keys it attends to most
  (:data:`KV_TOP` per head; every position for short inputs);
- the rotary view's per-head cosines at most at :data:`COS_POSITIONS` positions;
- floats rounded to 3 significant digits when embedded (about float16 precision).
"""

from __future__ import annotations

from typing import Any

import torch
from tqdm.auto import tqdm

from hooks import ActivationCache
from interp.analysis import logit_lens, source_contributions
from interp.report.explain_why import why_here

TOP_K = 16
"""Keys kept per query and head when the full pattern is too large to embed."""
DENSE_LIMIT = 300_000
"""Largest ``n_layers * n_heads * n_tokens**2`` for which the full pattern is embedded."""
SPARSE_BUDGET = 250_000
"""Most (key, weight) entries of top-k patterns embedded in a page."""
KV_TOP = 8
"""Keys per head whose key and value vectors are embedded for long inputs."""
KV_ALL = 32
"""Inputs up to this many tokens embed keys and values for every position."""
STRIP_DIMS = 32
"""Leading dimensions of embedding (and positional) vectors shown as heat strips."""
LENS_TOP = 5
"""Tokens listed per stream by the logit lens."""
COS_POSITIONS = 64
"""Positions at most for which the rotary view embeds each head's query cosines (evenly spaced)."""


def choose_token(str_tokens: list[str], token: str | None) -> int:
    """The position of the token to follow.

    Args:
        str_tokens: the tokens of the text, as strings.
        token: ``None`` for the last token; else the first token whose text, stripped of whitespace,
            equals ``token`` ignoring case; else, if ``token`` is an integer, that position (negative
            positions count from the end).

    Raises:
        ValueError: no token matches; the message lists the tokens.
    """
    if token is None:
        return len(str_tokens) - 1
    wanted = token.strip().lower()
    for pos, text in enumerate(str_tokens):
        if text.strip().lower() == wanted:
            return pos
    try:
        pos = int(token)
    except ValueError:
        pos = None
    if pos is not None and -len(str_tokens) <= pos < len(str_tokens):
        return pos % len(str_tokens)
    listing = ", ".join(f"{i}:{t!r}" for i, t in enumerate(str_tokens))
    raise ValueError(
        f"no token of the text is {token!r} (compared stripped and ignoring case); "
        f"pass --token with one of these tokens or a position: {listing}"
    )


def choose_head(rows: torch.Tensor, query: int, layer: int | None = None, head: int | None = None) -> tuple:
    """The (layer, head) whose attention from ``query`` to any non-first, non-self key is largest.

    Args:
        rows: the query's attention rows, ``[layer, head, key]``.
        query: the query's position.
        layer: keep this layer fixed (search heads only), if given.
        head: keep this head fixed (search layers only), if given.

    Raises:
        ValueError: ``layer`` or ``head`` is out of range; the message gives the valid range.
    """
    n_layers, n_heads, n_keys = rows.shape
    layer = _check_range("layer", layer, n_layers)
    head = _check_range("head", head, n_heads)
    if layer is not None and head is not None:
        return layer, head
    score = rows.clone().float()
    score[..., 0] = -1.0
    score[..., query] = -1.0
    if layer is not None:
        score[[i for i in range(n_layers) if i != layer]] = -2.0
    if head is not None:
        score[:, [i for i in range(n_heads) if i != head]] = -2.0
    best = int(score.amax(dim=-1).flatten().argmax())  # ties go to the lowest layer, then head
    return best // n_heads, best % n_heads


def _check_range(what: str, value: int | None, size: int) -> int | None:
    if value is None:
        return None
    if not -size <= value < size:
        raise ValueError(f"--{what} {value} is out of range; this model has {what}s 0..{size - 1}")
    return value % size


def hook_names(model: Any) -> list[str]:
    """Every hook the explainer reads from one forward pass of ``model``."""
    cfg = model.cfg
    names = ["hook_embed"] + (["hook_pos_embed"] if cfg.positional in ("learned", "sinusoidal") else [])
    attn = ["hook_q", "hook_k", "hook_v", "hook_attn_scores", "hook_pattern", "hook_z"]
    if cfg.positional == "rotary":
        attn += ["hook_rot_q", "hook_rot_k"]
    for layer in range(cfg.n_layers):
        names += [f"blocks.{layer}.attn.{name}" for name in attn]
        names += [f"blocks.{layer}.hook_{name}" for name in ("resid_pre", "attn_out", "resid_post")]
    return names


@torch.no_grad()
def explain_data(
    model: Any,
    text: str,
    *,
    token: str | None = None,
    layer: int | None = None,
    head: int | None = None,
    progress: bool = False,
    twin: str | None = None,
) -> dict[str, Any]:
    """Everything the explainer page shows, as plain data (tensors become nested lists when serialised).

    Args:
        model: a :class:`~interp.HookedTransformer` with a tokenizer attached.
        text: the text to explain.
        token: the token to follow (see :func:`choose_token`); default: the last one.
        layer: the layer shown first; default: see :func:`choose_head`.
        head: the head shown first; default: see :func:`choose_head`.
        progress: show a progress bar over layers.
        twin: a twin text ("... too wide" for "... too tired"); "why here" then also splits the change of
            the score to the strongest key between the two texts.

    Raises:
        ValueError: the model has no tokenizer, ``layer`` or ``head`` is out of range (both before the forward
            pass), the text is empty or too long, or no token matches.
    """
    if getattr(model, "tokenizer", None) is None:
        raise ValueError("the explainer needs a model with a tokenizer; load one with interp.load(...)")
    cfg = model.cfg
    _check_range("layer", layer, cfg.n_layers)
    _check_range("head", head, cfg.n_heads)
    tokens = model.to_tokens(text)
    str_tokens = model.tokenizer.to_str_tokens(tokens.ids[0].tolist())
    query = choose_token(str_tokens, token)
    _, cache = model.run_with_cache(tokens.ids, tokens.mask, names_filter=hook_names(model))
    rows = torch.stack([_act(cache, f"blocks.{i}.attn.hook_pattern")[:, query] for i in range(cfg.n_layers)])
    layer, head = choose_head(rows, query, layer, head)  # rows: [layer, head, key]
    n = len(str_tokens)
    dense = cfg.n_layers * cfg.n_heads * n * n <= DENSE_LIMIT
    top_k = min(n, TOP_K, max(1, SPARSE_BUDGET // (cfg.n_layers * cfg.n_heads * n)))
    per_layer: dict[str, list] = {key: [] for key in ("pattern", "keys", "scores", "q", "z", "kv_pos")}
    per_layer.update({key: [] for key in ("k", "v", "src_norm", "head_norm", "q_cos", "resid")})
    layers = tqdm(range(cfg.n_layers), desc="explain: layers", disable=not progress, leave=False)
    for i in layers:
        _layer_data(model, cache, i, query, dense=dense, top_k=top_k, out=per_layer)
    return {
        "model": _model_info(model),
        "text": text,
        "tokens": str_tokens,
        "ids": tokens.ids[0].tolist(),
        "query": query,
        "layer": layer,
        "head": head,
        "embed": _strips(_act(cache, "hook_embed")),
        "position": _position(model, cache, per_layer.pop("q_cos")),
        "pattern": _pattern(per_layer, dense, top_k),
        "row": rows,
        "sinks": _sinks(model),
        **per_layer,
        "lens": _lens(model, cache, query),
        "why": why_here(model, text, query, layer, head, rows[layer, head], twin),
    }


def _act(cache: ActivationCache, name: str) -> torch.Tensor:
    """The first (only) row of a cached activation, as float32 on the CPU."""
    return cache[name][0].detach().float().cpu()


def _layer_data(
    model: Any, cache: ActivationCache, i: int, query: int, *, dense: bool, top_k: int, out: dict[str, list]
) -> None:
    """Append layer ``i``'s share of the page's data to the lists in ``out``."""
    cfg = model.cfg

    def act(name: str) -> torch.Tensor:
        return _act(cache, name)

    rotary = cfg.positional == "rotary"
    prefix = f"blocks.{i}.attn."
    pattern = act(prefix + "hook_pattern")  # [head, query, key]
    q = act(prefix + ("hook_rot_q" if rotary else "hook_q"))  # [pos, head, d_head]
    k = act(prefix + ("hook_rot_k" if rotary else "hook_k"))  # [pos, kv_head, d_head]
    v = act(prefix + "hook_v")  # [pos, kv_head, d_head]
    n = pattern.shape[-1]
    if dense:
        out["pattern"].append(pattern)
    else:
        top = pattern.topk(top_k, dim=-1)  # [head, query, k]
        out["pattern"].append(top.values)
        out["keys"].append(top.indices)
    out["scores"].append(act(prefix + "hook_attn_scores")[:, query])  # [head, key]; masked: -inf
    out["q"].append(q[query])  # [head, d_head]
    out["z"].append(act(prefix + "hook_z")[query])  # [head, d_head]
    kv_pos = (
        [
            _kv_positions(pattern[g * cfg.group_size : (g + 1) * cfg.group_size, query], query)
            for g in range(cfg.n_kv_heads)
        ]
        if n > KV_ALL
        else [list(range(n))] * cfg.n_kv_heads
    )
    out["kv_pos"].append(kv_pos)
    out["k"].append([k[pos, g] for g, pos in enumerate(kv_pos)])  # [kv_head][stored, d_head]
    out["v"].append([v[pos, g] for g, pos in enumerate(kv_pos)])
    sources = torch.stack(
        [source_contributions(model, cache, i, h, query)[0].float().cpu() for h in range(cfg.n_heads)]
    )  # [head, key, d_model]
    out["src_norm"].append(sources.norm(dim=-1))
    out["head_norm"].append(sources.sum(dim=1).norm(dim=-1))
    if rotary:
        q_pre = act(prefix + "hook_q")  # [pos, head, d_head]
        cos = (q_pre * q).sum(-1) / (q_pre.norm(dim=-1) * q.norm(dim=-1)).clamp_min(1e-12)
        out["q_cos"].append(cos.T[:, cos_positions(n)])  # [head, shown positions]
    pre, post = act(f"blocks.{i}.hook_resid_pre")[query], act(f"blocks.{i}.hook_resid_post")[query]
    out["resid"].append(
        {
            "pre_norm": pre.norm(),
            "post_norm": post.norm(),
            "cos": torch.nn.functional.cosine_similarity(pre, post, dim=0),
            "attn_norm": act(f"blocks.{i}.hook_attn_out")[query].norm(),
        }
    )


def _kv_positions(rows: torch.Tensor, query: int) -> list[int]:
    """The query and its top keys under any head of a group (``rows``: ``[group, key]``), sorted."""
    top = rows.topk(min(KV_TOP, rows.shape[-1]), dim=-1).indices.flatten().tolist()
    return sorted({query, *top})


def cos_positions(n: int) -> list[int]:
    """Positions whose query cosines the rotary view shows: all, or :data:`COS_POSITIONS` evenly spaced."""
    if n <= COS_POSITIONS:
        return list(range(n))
    return sorted({round(i * (n - 1) / (COS_POSITIONS - 1)) for i in range(COS_POSITIONS)})


def _model_info(model: Any) -> dict[str, Any]:
    cfg = model.cfg
    info = {key: getattr(cfg, key) for key in ("n_layers", "n_heads", "n_kv_heads", "d_head", "d_model")}
    info.update(name=cfg.name or "random-init model", positional=cfg.positional, causal=cfg.causal)
    return info


def _sinks(model: Any) -> torch.Tensor | None:
    """Each head's sink logit ``[layer, head]`` (GPT-OSS), or ``None`` for a model without sinks. A sink joins
    every row's softmax as one more key that writes nothing, so the real keys' weights sum to less than one."""
    if not model.cfg.attn_sinks:
        return None
    return torch.stack([block.attn.sinks.detach().float().cpu() for block in model.blocks])


def _strips(x: torch.Tensor) -> dict[str, Any]:
    """Norms per position and the first :data:`STRIP_DIMS` dimensions of ``x [pos, d_model]``."""
    return {"norm": x.norm(dim=-1), "dims": x[:, :STRIP_DIMS]}


def _position(model: Any, cache: ActivationCache, q_cos: list[torch.Tensor]) -> dict[str, Any]:
    cfg = model.cfg
    if cfg.positional == "rotary":
        inv_freq = model.rotary.inv_freq.detach().float().cpu()
        positions = cos_positions(cache["hook_embed"].shape[1])
        return {"kind": "rotary", "inv_freq": inv_freq, "q_cos": q_cos, "q_cos_pos": positions}
    if cfg.positional in ("learned", "sinusoidal"):
        return {"kind": cfg.positional, **_strips(_act(cache, "hook_pos_embed"))}
    return {"kind": "none"}


def _pattern(per_layer: dict[str, list], dense: bool, top_k: int) -> dict[str, Any]:
    values, keys = per_layer.pop("pattern"), per_layer.pop("keys")
    if dense:
        return {"dense": True, "values": values}
    return {"dense": False, "k": top_k, "values": values, "keys": keys}


def _lens(model: Any, cache: ActivationCache, query: int) -> list[dict[str, Any]] | None:
    """Top tokens that the stream entering each layer (and the final stream) would predict at ``query``."""
    if getattr(model, "unembed", None) is None:
        return None
    _, logits = logit_lens(model, cache, query)  # [stream, batch, d_vocab]
    probs = logits[:, 0].float().softmax(dim=-1)
    top = probs.topk(LENS_TOP, dim=-1)  # [stream, k]
    return [
        {"tokens": model.tokenizer.to_str_tokens(ids.tolist()), "probs": p}
        for ids, p in zip(top.indices.cpu(), top.values.cpu(), strict=True)
    ]
