"""EAP and EAP-IG against their formulas computed independently, a planted path, and bad input."""

import pytest
import torch

from interp import HookedTransformer, TransformerConfig
from interp.circuits import (
    Graph,
    GraphStructureError,
    Pairs,
    eap,
    eap_ig,
    edge_attribution,
    evaluate,
    logit_difference,
    merge_scores,
    top_n,
)
from tests.circuits.models import tiny, tiny_pairs


def _source_outputs(model, tokens):
    """Every source's output ``[n, pos, d_model]`` by name, from a plain cached run."""
    cfg = model.cfg
    names = ["blocks.0.hook_resid_pre", "blocks.*.attn.hook_result", "blocks.*.hook_mlp_out"]
    _, cache = model.run_with_cache(tokens, names_filter=names)
    out = {"input": cache["blocks.0.hook_resid_pre"]}
    for layer in range(cfg.n_layers):
        for h in range(cfg.n_heads):
            out[f"L{layer}.H{h}"] = cache[f"blocks.{layer}.attn.hook_result"][:, :, h]
        out[f"L{layer}.MLP"] = cache[f"blocks.{layer}.hook_mlp_out"]
    return out


def _input_gradients(model, pairs, start, end, alpha):
    """d(sum of the metric)/d(input) for every node input, at the point ``start + alpha (end - start)`` of the
    stream entering block 0, through zero perturbations added at each input (autograd.grad, no hooks of the
    code under test)."""
    cfg = model.cfg
    eps = {}

    def perturb(x, hook):
        e = torch.zeros_like(x, requires_grad=True)
        eps[hook.name] = e
        return x + e

    def place(x, hook):
        return start + alpha * (end - start)

    names = [
        f"blocks.{layer}.hook_{n}"
        for layer in range(cfg.n_layers)
        for n in ("q_input", "k_input", "v_input", "mlp_in")
    ]
    names.append(f"blocks.{cfg.n_layers - 1}.hook_resid_post")
    with model.split_inputs():
        logits = model.run_with_hooks(
            pairs.clean, fwd_hooks=[("blocks.0.hook_resid_pre", place), (names, perturb)]
        )
    grads = dict(
        zip(eps, torch.autograd.grad(logit_difference(logits, pairs).sum(), list(eps.values())), strict=True)
    )
    out = {"logits": grads[names[-1]]}
    for layer in range(cfg.n_layers):
        for h in range(cfg.n_heads):
            out[f"L{layer}.H{h}.q"] = grads[f"blocks.{layer}.hook_q_input"][:, :, h]
        for g in range(cfg.n_kv_heads):
            out[f"L{layer}.KV{g}.k"] = grads[f"blocks.{layer}.hook_k_input"][:, :, g]
            out[f"L{layer}.KV{g}.v"] = grads[f"blocks.{layer}.hook_v_input"][:, :, g]
        out[f"L{layer}.MLP"] = grads[f"blocks.{layer}.hook_mlp_in"]
    return out


def independent_scores(model, pairs, steps):
    graph = Graph.from_model(model)
    clean, corrupt = _source_outputs(model, pairs.clean), _source_outputs(model, pairs.corrupt)
    grads = [
        _input_gradients(model, pairs, corrupt["input"], clean["input"], k / steps)
        for k in range(1, steps + 1)
    ]
    scores = torch.zeros(graph.allowed.shape)
    for source, target in graph.edges():
        mean_grad = sum(g[target] for g in grads) / steps
        value = ((clean[source] - corrupt[source]) * mean_grad).sum() / len(pairs)
        scores[graph.edge_index((source, target))] = value
    return scores


@pytest.mark.parametrize("name", ["gpt2", "llama-gqa", "neox"])
def test_eap_is_gradient_times_difference(name):
    model = tiny(name)
    pairs = tiny_pairs(model, n=3)
    got = eap(model, pairs, logit_difference, batch_size=2)
    want = independent_scores(model, pairs, steps=1)
    torch.testing.assert_close(got.scores, want, atol=1e-5, rtol=1e-4)
    assert want.abs().max() > 1e-2 and int((want.abs() > 1e-6).sum()) > 20  # many edges, not a few
    assert got.steps == 1 and got.n_pairs == 3 and got.method == "eap"


def test_eap_ig_is_the_averaged_gradient_times_difference():
    model = tiny("llama-gqa")
    pairs = tiny_pairs(model, n=3, positions=True)
    got = eap_ig(model, pairs, logit_difference, steps=3)
    torch.testing.assert_close(got.scores, independent_scores(model, pairs, steps=3), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(
        eap_ig(model, pairs, logit_difference, steps=1).scores,
        eap(model, pairs, logit_difference).scores,
        atol=0,
        rtol=0,
    )


def test_scores_do_not_depend_on_batching_or_read_positions():
    model = tiny("gpt2")
    pairs = tiny_pairs(model, n=5)
    read = Pairs(
        clean=pairs.clean,
        corrupt=pairs.corrupt,
        positions=torch.full((5,), pairs.n_pos - 1),
        labels=pairs.labels,
    )
    a = eap_ig(model, pairs, logit_difference, steps=2, batch_size=5)
    b = eap_ig(model, read, logit_difference, steps=2, batch_size=2)
    torch.testing.assert_close(a.scores, b.scores, atol=1e-6, rtol=1e-5)
    assert a.clean_metric == pytest.approx(b.clean_metric, abs=1e-6)
    assert a.corrupt_metric == pytest.approx(b.corrupt_metric, abs=1e-6)


def planted_model() -> HookedTransformer:
    """Embeddings of unit norm in dims 0-3; no head writes anything (W_O = 0), MLP 0 neither; MLP 1 reads
    dims 0-3 and writes dims 4-7, which alone the unembedding reads. So the metric flows along input -> L1.MLP
    -> logits and nowhere else (the direct input -> logits edge acts only through the final norm's scale,
    which is the same for clean and corrupted inputs)."""
    cfg = TransformerConfig(n_layers=2, d_model=8, n_heads=2, d_mlp=16, d_vocab=6, n_ctx=8, norm="rmsnorm",
                            positional="rotary", act="gelu", attn_bias=False, mlp_bias=False, seed=0)  # fmt: skip
    model = HookedTransformer(cfg)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim > 1:
                p.copy_(torch.randn(p.shape, generator=g))
        emb = torch.randn(6, 4, generator=g)
        model.embed.W_E.zero_()
        model.embed.W_E[:, :4] = emb / emb.norm(dim=1, keepdim=True)
        for block in model.blocks:
            block.attn.W_O.zero_()
        model.blocks[0].mlp.W_out.zero_()
        model.blocks[1].mlp.W_in[4:] = 0
        model.blocks[1].mlp.W_out[:, :4] = 0
        model.unembed.W_U[:4] = 0
    return model.eval()


def test_a_planted_two_edge_path_is_found_and_is_faithful():
    model = planted_model()
    g = torch.Generator().manual_seed(1)
    clean = torch.randint(0, 6, (8, 5), generator=g)
    corrupt = clean.clone()
    corrupt[:, -1] = (clean[:, -1] + 1 + torch.randint(0, 5, (8,), generator=g)) % 6
    pairs = Pairs(
        clean=clean,
        corrupt=corrupt,
        labels={"answer": torch.zeros(8, dtype=torch.long), "foil": torch.ones(8, dtype=torch.long)},
    )
    scores = eap_ig(model, pairs, logit_difference, steps=5)
    top = scores.frame(top=3)
    planted = {("input", "L1.MLP"), ("L1.MLP", "logits")}
    assert set(zip(top["source"][:2], top["input"][:2], strict=True)) == planted
    assert abs(top["score"][2]) < 0.2 * min(abs(top["score"][0]), abs(top["score"][1]))
    circuit = top_n(scores, 2)
    assert set(circuit.edges) == planted
    result = evaluate(model, circuit, pairs, logit_difference)
    assert abs(result.full - result.corrupt) > 0.1
    assert result.faithfulness[0] == pytest.approx(1.0, abs=1e-5)


def test_bad_input_is_refused_before_any_work():
    model = tiny("gpt2")
    pairs = tiny_pairs(model)
    with pytest.raises(ValueError, match="shape \\[batch\\] = \\[3\\].*a mean over the batch"):
        eap(model, pairs, lambda logits, batch: logit_difference(logits, batch).mean())
    with pytest.raises(ValueError, match="method='acdc'"):
        edge_attribution(model, pairs, logit_difference, method="acdc")
    with pytest.raises(ValueError, match="steps=0"):
        eap_ig(model, pairs, logit_difference, steps=0)
    with pytest.raises(ValueError, match="batch_size=0"):
        eap(model, pairs, logit_difference, batch_size=0)
    with pytest.raises(ValueError, match="Pad both to one length.*or align the pairs"):
        Pairs(clean=pairs.clean, corrupt=torch.cat([pairs.corrupt, pairs.corrupt[:, :1]], 1))
    bert = HookedTransformer(
        TransformerConfig(
            n_layers=1, d_model=8, n_heads=2, d_vocab=10, n_ctx=8, norm_placement="post", causal=False
        )
    )
    with pytest.raises(GraphStructureError, match="post-norm"):
        eap(bert, Pairs(clean=torch.tensor([[1, 2]]), corrupt=torch.tensor([[1, 3]])), logit_difference)


def test_scores_of_disjoint_pairs_merge_into_the_scores_of_all():
    model = tiny("gpt2")
    pairs = tiny_pairs(model, n=5)
    whole = eap_ig(model, pairs, logit_difference, steps=2)
    parts = [
        eap_ig(model, pairs[:2], logit_difference, steps=2),
        eap_ig(model, pairs[2:], logit_difference, steps=2),
    ]
    merged = merge_scores(parts)
    torch.testing.assert_close(merged.scores, whole.scores, atol=1e-6, rtol=1e-5)
    assert merged.n_pairs == 5 and merged.clean_metric == pytest.approx(whole.clean_metric, abs=1e-6)
    with pytest.raises(ValueError, match="cannot merge eap-ig scores \\(steps=2\\).*with eap scores"):
        merge_scores([eap(model, pairs, logit_difference), whole])


def test_scores_of_a_model_deeper_than_one_product_match_the_formula():
    """Five layers: the gradients of layers 0-3 and of layer 4 with the logits are contracted in separate
    products (``LAYERS_PER_PRODUCT``), whose rows beyond each input's sources must come out 0."""
    from interp.circuits.edge_products import LAYERS_PER_PRODUCT

    model = tiny("llama-gqa", n_layers=5)
    assert model.cfg.n_layers > LAYERS_PER_PRODUCT
    pairs = tiny_pairs(model, n=3)
    want = independent_scores(model, pairs, steps=2)
    got = eap_ig(model, pairs, logit_difference, steps=2, batch_size=2)
    torch.testing.assert_close(got.scores, want, atol=1e-5, rtol=1e-4)
    assert bool((got.scores[~got.graph.allowed] == 0).all())
    assert int((want.abs() > 1e-6).sum()) > 100


def _ragged_pairs(model) -> Pairs:
    """Rows that differ from a different position on, read at different positions (right-padded beyond), and
    a row whose inputs do not differ at all."""
    g = torch.Generator().manual_seed(5)
    n, n_pos = 4, 7
    clean = torch.randint(0, model.cfg.d_vocab, (n, n_pos), generator=g)
    corrupt = clean.clone()
    for row, at in ((0, 0), (1, 2), (2, 4)):  # row 3 stays identical
        corrupt[row, at] = (clean[row, at] + 1) % model.cfg.d_vocab
    read = torch.tensor([6, 4, 5, 3])
    mask = (torch.arange(n_pos) <= read[:, None]).long()
    labels = {"answer": torch.tensor([1, 2, 3, 4]), "foil": torch.tensor([5, 6, 7, 8])}
    return Pairs(clean=clean, corrupt=corrupt, attention_mask=mask, positions=read, labels=labels)


def test_scored_positions_run_from_the_first_difference_to_the_read_position():
    from interp.circuits.edge_products import scored_positions

    model = tiny("llama-gqa")
    pairs = _ragged_pairs(model)
    got = scored_positions(pairs, causal=True)
    want = [0 * 7 + p for p in range(0, 7)] + [7 + p for p in range(2, 5)] + [14 + p for p in range(4, 6)]
    assert got.tolist() == want  # row 3 does not differ: none of its positions
    assert scored_positions(pairs, causal=False) is None  # every position can matter in both directions
    every = Pairs(
        clean=pairs.clean, corrupt=(pairs.clean + 1) % model.cfg.d_vocab
    )  # differ from 0, read last
    assert scored_positions(every, causal=True) is None


@pytest.mark.parametrize("method", ["eap", "eap-ig"])
def test_scores_at_the_scored_positions_only_match_the_formula_over_every_position(method):
    """The formula sums over every position; the code contracts only where a difference and a gradient can
    both be nonzero, and must lose nothing."""
    model = tiny("llama-gqa")
    pairs = _ragged_pairs(model)
    steps = 1 if method == "eap" else 3
    got = edge_attribution(model, pairs, logit_difference, method=method, steps=steps, batch_size=3)
    want = independent_scores(model, pairs, steps=steps)
    torch.testing.assert_close(got.scores, want, atol=1e-5, rtol=1e-4)
    assert want.abs().max() > 1e-2


@pytest.mark.parametrize("name", ["gpt2", "llama-gqa"])
def test_a_bfloat16_model_is_scored_with_float32_differences(name):
    """Activations and gradients in bfloat16 go into float32 differences and gradient blocks; the scores are
    the float32 model's to bfloat16 rounding."""
    model = tiny(name)
    pairs = _ragged_pairs(model)
    want = eap_ig(model, pairs, logit_difference, steps=2).scores
    got = eap_ig(model.to(torch.bfloat16), pairs, logit_difference, steps=2).scores
    assert got.dtype == torch.float32
    assert float((got - want).abs().max()) < 0.05 * float(want.abs().max())
