"""A tiny model with a tokenizer, dictionaries of each kind for it, texts, and the dashboards computed naively.

The naive computation runs each item alone through the model (no batching, no padding), encodes every token,
and lists every active (item, position, activation) of every feature; the tests derive from it what each part
of a dashboard must hold, independently of the streaming pass.
"""

from __future__ import annotations

from pathlib import Path

import torch

import interp
from interp.sae import SAESet
from interp.sae.dashboards import as_dictionary
from interp.sae.dashboards.sources import special_first
from tests.circuits.transcoders import tiny_transcoders
from tests.sae.models import random_sae

LLAMA = Path(__file__).resolve().parents[2] / "circuits" / "golden" / "llama"


def model():
    return interp.load(str(LLAMA))


def dictionary(kind: str, m):
    """``per-layer``, ``skip``, ``clt`` (transcoders), ``sae`` (an SAE on ``blocks.1.hook_resid_post``) or
    ``sae-set`` (an SAESet: that SAE and one of 12 features on ``blocks.0.hook_resid_pre``)."""
    if kind == "sae":
        sae = random_sae("blocks.1.hook_resid_post", d_in=m.cfg.d_model, d_sae=20, architecture="standard")
        with torch.no_grad():
            sae.b_enc.sub_(0.8)  # sparser: a feature fires on some tokens, not all
        return sae
    if kind == "sae-set":
        first = random_sae("blocks.0.hook_resid_pre", d_in=m.cfg.d_model, d_sae=12, architecture="standard")
        with torch.no_grad():
            first.b_enc.sub_(0.8)
        return SAESet([first, dictionary("sae", m)])
    return tiny_transcoders(m.cfg, d_transcoder=16, kind=kind, seed=7)


def texts(n: int = 40, seed: int = 0) -> list[str]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, 18, (n,), generator=g).tolist()
    return [" ".join(f"w{int(t)}" for t in torch.randint(3, 64, (k,), generator=g)) for k in lengths]


@torch.no_grad()
def naive(m, module, items: list[str], skip_first: int = 1):
    """``(ids, acts, active)``: each item's ids ``[len]``; ``acts[layer][item]`` ``[len, n_features]``; ``active[(layer,
    feature)]`` the list of ``(value, item, position)`` where it fires, positions from ``skip_first``."""
    view = as_dictionary(module)
    ids = []
    for text in items:
        row, mask = special_first(m.tokenizer, [text])
        ids.append(row[0][mask[0].bool()])
    acts = {layer: [] for layer in view.layers}
    for row in ids:
        hooks = [view.input_hook(layer) for layer in view.layers]
        _, cache = m.run_with_cache(row[None], names_filter=hooks)
        for layer in view.layers:
            acts[layer].append(view.encode(cache[view.input_hook(layer)][0], layer)[1].float())
    active = {}
    for layer in view.layers:
        for f in range(view.n_features(layer)):
            active[(layer, f)] = [
                (float(a[p, f]), i, p)
                for i, a in enumerate(acts[layer])
                for p in range(skip_first, len(a))
                if a[p, f] > 0
            ]
    return ids, acts, active
