"""A complete-replacement graph (Lorsa in place of attention, transcoders in place of the MLPs) is exact on the
frozen model, written from the definition and sharing nothing with ``interp.circuits.features`` but the model
and the dictionaries.

A clean run caches every pattern and norm divisor, each transcoder's output and each Lorsa layer's attention
output; a second run of one batch row per source node holds those at their cached values and adds the source's
write where it writes (a transcoder feature's activation times its decoder row, a Lorsa head's activation times
``W_O[h]`` at its query, an error vector, a token embedding). Every transcoder feature's pre-activation, every
Lorsa head's pre-activation ``z[q, h] = sum_k P[q, k] (x[k] . W_V[h] + b_V[h])`` through the clean pattern, and
every de-meaned logit then moves by exactly its adjacency entry.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from interp.circuits.features.lorsa_qk import lorsa_score
from interp.circuits.features.replacement import attribute_replacement, replacement_run
from interp.model.positional import apply_rotary
from tests.circuits.transcoders import family_model, input_site, tiny_transcoders
from tests.sae.lorsa.factories import random_lorsa

N_POS = 7


def _setup(family: str, layers: list[int] | None, **settings):
    """A tiny model of ``family``, transcoders at every layer, a random Lorsa at ``layers`` (default: every
    layer) and a prompt whose first token is special."""
    model = family_model(family)
    tc = tiny_transcoders(model.cfg, seed=3, input_site=input_site(model))
    layers = list(range(model.cfg.n_layers)) if layers is None else layers
    lorsa = random_lorsa(layers, d_model=model.cfg.d_model, n_heads=12, n_qk_heads=3, k=3, seed=1, **settings)
    tokens = torch.randint(2, model.cfg.d_vocab, (N_POS,), generator=torch.Generator().manual_seed(5))
    tokens[0] = 0
    return model, tc, lorsa, tokens


def _graph(family: str, layers: list[int] | None):
    model, tc, lorsa, tokens = _setup(family, layers)
    graph = attribute_replacement(
        model, tc, lorsa, tokens, max_logits=3, logit_probability=0.99, batch_size=16
    )
    return model, tc, lorsa, tokens, graph


def _pushed_run(model, tc, lorsa, tokens, pushes):
    """The clean cache, and a run whose row 0 is the frozen clean run and row ``i + 1`` adds ``pushes[i] =
    (hook, position, vector)``: ``(clean cache, inputs by hook [rows, pos, d_model])``."""
    frozen = [n for n in model.hook_names() if n.endswith(("hook_pattern", "hook_scale"))]
    reads = {tc.input_hook(layer) for layer in tc.layers} | {
        lorsa.input_hook(layer) for layer in lorsa.layers
    }
    held = {tc.output_hook(layer) for layer in tc.layers} | {
        lorsa.output_hook(layer) for layer in lorsa.layers
    }
    names = [*frozen, *reads, *held, "hook_embed", "unembed.hook_in"]
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens[None], names_filter=names)
    rows = len(pushes) + 1
    deltas: dict[str, torch.Tensor] = {}
    for i, (name, pos, vec) in enumerate(pushes):
        d = deltas.setdefault(name, torch.zeros(rows, len(tokens), model.cfg.d_model))
        d[i + 1, pos] += vec
    seen = {}

    def hook(x, hook):
        if hook.name in frozen or hook.name in held:
            x = cache[hook.name].expand_as(x).clone()
        if hook.name in reads or hook.name == "unembed.hook_in":
            seen[hook.name] = x
        return x + deltas[hook.name].to(x.dtype) if hook.name in deltas else x

    with torch.no_grad():
        model.run_with_hooks(tokens[None].expand(rows, -1), fwd_hooks=[(n, hook) for n in names])
    return cache, seen


def _pushes(graph, tc, lorsa, cache, n_layers):
    """One push per source node, in the adjacency's column order (the first position's errors zero)."""
    pushes = []
    for (layer, pos, feat), act in zip(graph.features.tolist(), graph.activations.tolist(), strict=True):
        pushes.append((tc.output_hook(layer), pos, act * tc.decoder(layer)[feat, 0].float()))
    for (layer, pos, head), act in zip(
        graph.lorsa_features.tolist(), graph.lorsa_activations.tolist(), strict=True
    ):
        pushes.append((lorsa.output_hook(layer), pos, act * lorsa.layer(layer).W_O[head].detach()))

    def errors(dictionary, layers, x):
        recon = {}
        for layer in layers:
            acts = dictionary.encode(x(layer), layer)[1].clone()
            acts[..., 0, :] = 0
            recon[layer] = dictionary.decode({layer: acts}, layer).reshape(N_POS, -1)
        for layer in layers:
            error = cache[dictionary.output_hook(layer)][0].float() - recon[layer].float()
            error[0] = 0
            pushes.extend((dictionary.output_hook(layer), p, error[p]) for p in range(N_POS))

    with torch.no_grad():
        errors(tc, range(n_layers), lambda layer: cache[tc.input_hook(layer)][0])
        errors(lorsa, lorsa.layers, lambda layer: cache[lorsa.input_hook(layer)])
    pushes.extend(("hook_embed", p, cache["hook_embed"][0, p].float()) for p in range(N_POS))
    return pushes


@pytest.mark.parametrize(
    ("family", "layers"),
    [("llama3-rope", None), ("gemma2", None), ("qwen3", None), ("llama3-rope", [1])],
)
def test_every_entry_is_the_frozen_effect_of_its_source(family, layers):
    model, tc, lorsa, tokens, graph = _graph(family, layers)
    pushes = _pushes(graph, tc, lorsa, _pushed_run(model, tc, lorsa, tokens, [])[0], model.cfg.n_layers)
    cache, seen = _pushed_run(model, tc, lorsa, tokens, pushes)

    # the active heads, from the definition: non-zero activations after the first position
    expected = []
    for layer in lorsa.layers:
        acts = lorsa.encode(cache[lorsa.input_hook(layer)], layer)[1][0]
        expected += [[layer, p, h] for p, h in acts.nonzero().tolist() if p > 0]
    assert graph.lorsa_features.tolist() == expected and len(expected) > 10

    reads = []
    for layer, pos, feat in graph.features.tolist():
        reads.append(tc.encode(seen[tc.input_hook(layer)][:, pos], layer)[0][:, feat])
    with torch.no_grad():
        for layer, pos, head in graph.lorsa_features.tolist():
            module = lorsa.layer(layer)
            pattern = lorsa.pattern(cache[lorsa.input_hook(layer)], layer)[0]  # [qk_head, query, key]
            p = pattern[head // module.cfg.group_size, pos]  # [key]
            v = seen[lorsa.input_hook(layer)] @ module.W_V[head] + module.b_V[head]  # [rows, key]
            reads.append(v @ p)
            clean = lorsa.encode(cache[lorsa.input_hook(layer)], layer)[0][0, pos, head]
            torch.testing.assert_close(reads[-1][0], clean)  # the definition of z is the Lorsa's own
    w_u = model.unembed.weight.float()
    logit_dirs = w_u[:, graph.logit_tokens] - w_u.mean(1, keepdim=True)
    for i in range(len(graph.logit_tokens)):
        reads.append(seen["unembed.hook_in"][:, -1].float() @ logit_dirs[:, i])
    moved = (torch.stack(reads) - torch.stack(reads)[:, :1])[:, 1:]  # [targets, sources]

    n_targets = graph.n_features + graph.n_lorsa
    rows = [*range(n_targets), *range(graph.logit_offset, len(graph.adjacency))]
    got = graph.adjacency[rows][:, : graph.logit_offset]
    scale = got.abs().max()
    assert scale > 0 and moved.shape == got.shape
    torch.testing.assert_close(got, moved.float(), atol=2e-5 * float(scale), rtol=1e-4)
    # edges between positions at a Lorsa layer run through its heads: a head reads earlier positions
    lorsa_block = graph.adjacency[graph.n_features : n_targets]
    token_columns = lorsa_block[:, graph.token_offset : graph.logit_offset]
    earlier = graph.lorsa_features[:, 1][:, None] > torch.arange(graph.n_pos)[None]
    assert bool((token_columns[earlier] != 0).any())
    later = graph.lorsa_features[:, 1][:, None] < torch.arange(graph.n_pos)[None]
    assert bool((token_columns[later] == 0).all())


def test_bad_lorsa_is_refused_in_one_line():
    model = family_model("llama3-rope")
    tc = tiny_transcoders(model.cfg, seed=3, input_site=input_site(model))
    tokens = torch.arange(5)
    with pytest.raises(TypeError, match="lorsa must be an interp.sae.lorsa.Lorsa, got TranscoderSet"):
        attribute_replacement(model, tc, tc, tokens)
    lorsa = random_lorsa([0], d_model=model.cfg.d_model, n_heads=4, k=2, output_site="hook_mlp_out")
    with pytest.raises(ValueError, match="both write 'blocks.0.hook_mlp_out'"):
        attribute_replacement(model, tc, lorsa, tokens)


@pytest.mark.parametrize(("family", "qk_norm"), [("llama3-rope", "none"), ("qwen3", "rmsnorm")])
def test_a_lorsa_score_splits_into_node_terms_that_sum_to_it_and_move_with_their_node(family, qk_norm):
    model, tc, lorsa, tokens = _setup(family, None, qk_norm=qk_norm, rotary_dim=2)
    frozen = replacement_run(model, tc, lorsa, tokens)
    layer, query, head = frozen.heads.features[-1].tolist()  # a head active at the last position
    score = lorsa_score(frozen, lorsa, layer, query, head, batch_size=5)
    module, g = lorsa.layer(layer), head // lorsa.layer(layer).cfg.group_size
    assert score.qk_head == g and score.key_parts.shape[0] == query + 1

    nodes = SimpleNamespace(
        features=frozen.sources.features,
        activations=frozen.sources.activations,
        lorsa_features=frozen.heads.features,
        lorsa_activations=frozen.heads.activations,
    )
    cache = _pushed_run(model, tc, lorsa, tokens, [])[0]
    pushes = _pushes(nodes, tc, lorsa, cache, model.cfg.n_layers)
    assert len(pushes) == frozen.n_sources
    _, seen = _pushed_run(model, tc, lorsa, tokens, pushes)
    with torch.no_grad():
        x = cache[lorsa.input_hook(layer)]
        q, k = lorsa.queries_keys(x, layer)  # [1, pos, qk_head, e]
        own = (k[0, : query + 1, g] @ q[0, query, g]) / module.cfg.attn_scale
        # every term summed is the Lorsa's own score, at each key
        sums = torch.stack([score.matrix(key).sum() for key in range(query + 1)])
        torch.testing.assert_close(sums.float(), own, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(score.scores.float(), own, atol=1e-4, rtol=1e-4)
        # each node's part is its write's frozen effect, through the held norm divisor and the rotation
        rows = seen[lorsa.input_hook(layer)].double()

        def moved(position, w, b, gain):
            pre = rows[:, position] @ w.double() + b.double()
            if gain is not None:
                pre = pre / (pre[0].pow(2).mean() + module.cfg.eps).sqrt() * gain.double()
            cos, sin = module.rotary(torch.tensor([[position]]), torch.float64)
            out = apply_rotary(pre, cos[0, 0, 0], sin[0, 0, 0])
            return out[1:] - out[0]

        q_gain = None if module.q_norm is None else module.q_norm[g]
        k_gain = None if module.k_norm is None else module.k_norm[g]
        want = moved(query, module.W_Q[g], module.b_Q[g], q_gain)
        scale = float(want.abs().max())
        torch.testing.assert_close(score.query_parts[:-1], want, atol=2e-5 * scale, rtol=1e-4)
        for key in range(query + 1):
            want = moved(key, module.W_K[g], module.b_K[g], k_gain)
            torch.testing.assert_close(score.key_parts[key, :-1], want, atol=2e-5 * scale, rtol=1e-4)
    with pytest.raises(ValueError, match="query 0 is outside positions 1..6"):
        lorsa_score(frozen, lorsa, layer, 0, head)
