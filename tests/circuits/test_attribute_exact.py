"""An attribution graph is exact on the frozen model, on every family interp loads, with no reference library.

Written from the definition, sharing nothing with ``interp.circuits.features`` but the model and transcoders:
a clean run caches every pattern, norm divisor and transcoder output; a second run of one batch row per source
node holds those at their cached values (the transcoder output plus the skip write's change, where there is a
skip connection) and adds that source's vector where it writes (a feature's activation times its decoder rows,
an error vector, a token embedding). Every target's pre-activation and de-meaned logit then moves by exactly
its adjacency entry.
"""

from __future__ import annotations

import pytest
import torch

from interp.circuits import attribute
from tests.circuits.transcoders import family_model, input_site, tiny_transcoders

FAMILIES = [
    "gpt2",
    "llama3-rope",
    "gemma",
    "gemma2",
    "gemma3",
    "qwen3",
    "pythia",
    "phi3",
    "olmo2",
    "mistral-sliding",
    "gpt-oss",  # attention sinks: each pattern row sums to less than 1, held at its value like any other
]
N_POS = 7


def _cache(model, tc, tokens):
    frozen = [n for n in model.hook_names() if n.endswith(("hook_pattern", "hook_scale"))]
    ins = [tc.input_hook(layer) for layer in tc.layers]
    outs = [tc.output_hook(layer) for layer in tc.layers]
    _, cache = model.run_with_cache(
        tokens[None], names_filter=[*frozen, *ins, *outs, "hook_embed", "unembed.hook_in"]
    )
    return frozen, cache


def _pushed_run(model, tc, tokens, frozen, cache, pushes, record=None, names=()):
    """Row 0 unchanged; row ``i + 1`` adds ``pushes[i] = (hook, position, vector)``. Returns the transcoder
    inputs per layer and the unembedding's input, ``[rows, pos, d_model]``; the hooks ``names`` are kept in
    ``record``."""
    rows = len(pushes) + 1
    deltas: dict[str, torch.Tensor] = {}
    for i, (name, pos, vec) in enumerate(pushes):
        d = deltas.setdefault(name, torch.zeros(rows, len(tokens), model.cfg.d_model))
        d[i + 1, pos] += vec
    seen: dict[str, torch.Tensor] = {}
    in_layer = {tc.input_hook(layer): layer for layer in tc.layers}
    out_layer = {tc.output_hook(layer): layer for layer in tc.layers}

    def hook(x, hook):
        name = hook.name
        if name in frozen:
            return cache[name].expand_as(x).clone()
        if name in in_layer:
            seen[name] = x
            return None
        if name in out_layer:
            layer = out_layer[name]
            x = cache[name].expand_as(x).clone()
            live, clean = (
                tc.skip(seen[tc.input_hook(layer)], layer),
                tc.skip(cache[tc.input_hook(layer)], layer),
            )
            if live is not None:
                x = x + (live - clean).to(x.dtype)
        if name == "unembed.hook_in" or name in names:
            seen[name] = x
            return None
        return x + deltas[name].to(x.dtype) if name in deltas else x

    hooked = [*frozen, *in_layer, *out_layer, "hook_embed", "unembed.hook_in", *names]
    with torch.no_grad():
        model.run_with_hooks(tokens[None].expand(rows, -1), fwd_hooks=[(n, hook) for n in hooked])
    if record is not None:
        record.update({n: seen[n] for n in names})
    return {layer: seen[name] for name, layer in in_layer.items()}, seen["unembed.hook_in"]


def _source_pushes(graph, model, tc, cache):
    """One push per source node of ``graph`` (features, errors, tokens), in the adjacency's column order."""
    pushes = []
    for (layer, pos, feat), act in zip(graph.features.tolist(), graph.activations.tolist(), strict=True):
        for j, out in enumerate(tc.output_layers(layer)):
            pushes.append((tc.output_hook(out), pos, act * tc.decoder(layer)[feat, j].float()))
    groups = [len(tc.output_layers(layer)) for layer, _, _ in graph.features.tolist()]
    inputs = {layer: cache[tc.input_hook(layer)][0] for layer in tc.layers}
    recon = tc.reconstruct(inputs)
    for layer in range(model.cfg.n_layers):
        error = cache[tc.output_hook(layer)][0].float() - recon[layer].float()
        for pos in range(graph.n_pos):
            pushes.append((tc.output_hook(layer), pos, error[pos] if pos else torch.zeros_like(error[pos])))
            groups.append(1)
    for pos in range(graph.n_pos):
        pushes.append(("hook_embed", pos, cache["hook_embed"][0, pos].float()))
        groups.append(1)
    return pushes, groups


@pytest.mark.parametrize("kind", ["per-layer", "skip", "clt"])
@pytest.mark.parametrize("family", FAMILIES)
def test_adjacency_is_the_frozen_effect(family, kind):
    model = family_model(family)
    tc = tiny_transcoders(model.cfg, kind=kind, seed=3, input_site=input_site(model))
    tokens = torch.randint(2, model.cfg.d_vocab, (N_POS,), generator=torch.Generator().manual_seed(5))
    tokens[0] = 0
    graph = attribute(model, tc, tokens, max_logits=3, logit_probability=0.99, batch_size=16, progress=False)
    frozen, cache = _cache(model, tc, tokens)

    # the active features, from the definition: non-zero activations after the first position
    expected = []
    for layer in tc.layers:
        acts = tc.encode(cache[tc.input_hook(layer)][0], layer)[1]
        acts[0] = 0
        expected += [[layer, p, f] for p, f in acts.nonzero().tolist()]
    assert graph.features.tolist() == expected and len(expected) > 10

    pushes, groups = _source_pushes(graph, model, tc, cache)
    inputs, unembed_in = _pushed_run(model, tc, tokens, frozen, cache, pushes)
    # each source's effect: the sum over the rows of its pushes (a CLT feature writes several layers)
    bounds = torch.tensor([0, *groups]).cumsum(0)
    w_u = model.unembed.weight.float()
    logit_dirs = w_u[:, graph.logit_tokens] - w_u.mean(1, keepdim=True)  # [d_model, n_logits]
    reads = []
    for layer, pos, feat in graph.features.tolist():
        reads.append(tc.encode(inputs[layer][:, pos], layer)[0][:, feat])  # [rows]
    for i in range(graph.n_logits):
        reads.append(unembed_in[:, -1].float() @ logit_dirs[:, i])
    moved = torch.stack(reads) - torch.stack(reads)[:, :1]  # [targets, rows]
    effect = torch.stack(
        [moved[:, 1 + a : 1 + b].sum(1) for a, b in zip(bounds[:-1], bounds[1:], strict=True)], 1
    )

    n_sources = graph.n_features + (graph.n_layers + 1) * graph.n_pos
    target_rows = [*range(graph.n_features), *range(len(graph.nodes) - graph.n_logits, len(graph.nodes))]
    got = graph.adjacency[target_rows][:, :n_sources]
    scale = got.abs().max()
    assert scale > 0
    torch.testing.assert_close(got, effect, atol=2e-5 * float(scale), rtol=1e-4)
    # logit targets: the likeliest tokens, with their probabilities
    probs = torch.softmax(model(tokens[None])[0, -1].float(), -1)
    torch.testing.assert_close(graph.logit_probabilities, probs[graph.logit_tokens])
    assert graph.logit_tokens.tolist() == probs.argsort(descending=True)[: graph.n_logits].tolist()
