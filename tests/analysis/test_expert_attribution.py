"""Each expert's write and direct logit effect against a computation made here: the MoE input and the final
norm come from ``transformers`` (hooks on the reference's modules), the router's choice and each expert's output
from the weights by hand, in float64."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from interp import HookedTransformer
from interp.analysis import direct_logit_attribution, dla_names
from interp.analysis.checks import MissingHooksError
from interp.analysis.expert_attribution import expert_logit_attribution, expert_names, expert_writes
from tests.analysis.moe_models import naive_moe_writes, pair, tokens
from tests.model.variants import tiny_config


def _reference_inputs(reference, ids: torch.Tensor, layers: list[int]):
    """The reference's MoE input at ``layers`` and its final norm's input, captured by module hooks."""
    seen: dict[str, torch.Tensor] = {}
    modules = {f"moe{l}": reference.model.layers[l].post_attention_layernorm for l in layers}
    handles = [
        m.register_forward_hook(lambda _m, _i, out, k=k: seen.__setitem__(k, out)) for k, m in modules.items()
    ]
    handles.append(
        reference.model.norm.register_forward_hook(lambda _m, inp, _o: seen.__setitem__("final", inp[0]))
    )
    try:
        with torch.no_grad():
            reference(input_ids=ids)
    finally:
        for h in handles:
            h.remove()
    return seen


@pytest.mark.parametrize("name", ["mixtral", "qwen2-moe"])
@torch.no_grad()
def test_writes_and_values_match_a_naive_computation(name):
    reference, model = pair(name)
    ids = tokens(2, 6)
    layers = [l for l, kind in enumerate(model.cfg.mlp_types) if kind == "moe"]
    names = expert_names(model) + [f"blocks.{l}.hook_mlp_out" for l in layers]
    with torch.no_grad():
        _, cache = model.run_with_cache(ids, names_filter=names)
    seen = _reference_inputs(reference, ids, layers)
    final = seen["final"].double()
    scale = (final.pow(2).mean(-1, keepdim=True) + reference.config.rms_norm_eps).sqrt()  # [batch, pos, 1]
    gain = reference.model.norm.weight.double()
    targets = torch.roll(ids, -1, dims=1)  # the next token at each position
    w_u = reference.lm_head.weight.double()[targets]  # [batch, pos, d_model]
    table = expert_logit_attribution(model, cache, targets)
    for layer in layers:
        experts, writes = expert_writes(model, cache, layer)
        torch.testing.assert_close(writes.sum(0), cache[f"blocks.{layer}.hook_mlp_out"], atol=1e-5, rtol=1e-5)
        expected = naive_moe_writes(model, layer, seen[f"moe{layer}"])
        torch.testing.assert_close(writes.double(), expected, atol=2e-5, rtol=1e-5)
        values = torch.einsum("tbpd,bpd->tbp", expected / scale * gain, w_u)  # [term, batch, pos]
        rows = table[table.layer == layer]
        assert len(rows) == 2 * 6 * (model.cfg.experts_per_token + (model.cfg.d_shared_expert is not None))
        for row in rows.itertuples():
            term = experts.index(None if pd.isna(row.expert) else row.expert)
            assert row.value == pytest.approx(float(values[term, row.batch, row.position]), abs=1e-5)
        routed = values[: model.cfg.n_experts].ne(0)
        assert int(routed.sum()) == 2 * 6 * model.cfg.experts_per_token  # only routed tokens carry a value


def test_experts_sum_to_the_layers_direct_attribution():
    """At each position, a layer's experts (and shared expert) add up to its ``L{l}_mlp`` DLA term."""
    _, model = pair("qwen2-moe")
    ids = tokens(2, 6, seed=2)
    with torch.no_grad():
        _, cache = model.run_with_cache(ids, names_filter=sorted(set(expert_names(model) + dla_names(model))))
    for position in range(6):
        dla = direct_logit_attribution(model, cache, (5, 7), position, reduce="none")
        ours = expert_logit_attribution(model, cache, (5, 7))
        ours = ours[ours.position == position].groupby(["layer", "batch"])["value"].sum()
        for layer in (0, 2):
            for b in range(2):
                expected = dla[(dla.component == f"L{layer}_mlp") & (dla.batch == b)].value.item()
                assert ours[layer, b] == pytest.approx(expected, abs=1e-5)


def test_bad_input():
    _, model = pair("qwen2-moe")
    ids = tokens(1, 3)
    with torch.no_grad():
        _, cache = model.run_with_cache(ids, names_filter=expert_names(model))
    idle = next(e for e in range(8) if not bool((cache["blocks.0.mlp.hook_expert_indices"] == e).any()))
    with pytest.raises(ValueError, match=f"expert {idle} of layer 0 received no token in this cache"):
        expert_logit_attribution(model, cache, 5, layers=[0], experts=[idle])
    with pytest.raises(IndexError, match="expert 8 is out of range for layer 0: its experts are 0 to 7"):
        expert_logit_attribution(model, cache, 5, layers=[0], experts=[8])
    with pytest.raises(ValueError, match="layer 1 has a dense MLP"):
        expert_writes(model, cache, 1)
    with pytest.raises(ValueError, match=r"per-token targets must be \[batch, pos\] = \[1, 3\]"):
        expert_logit_attribution(model, cache, torch.zeros(2, 3, dtype=torch.long))
    with torch.no_grad():
        _, partial = model.run_with_cache(ids, names_filter="blocks.0.mlp.hook_expert_*")
    with pytest.raises(MissingHooksError, match="names_filter=expert_names"):
        expert_writes(model, partial, 0)


def test_a_norm_after_the_experts_is_refused():
    """With a norm on the MLP's output (Gemma's sandwich), ``hook_mlp_out`` is the normed sum of the experts'
    writes, so they are not its terms."""
    cfg = tiny_config(n_experts=4, experts_per_token=2, d_expert=16, mlp="gated", norm_placement="sandwich")
    model = HookedTransformer(cfg).eval()
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.tensor([[3, 5, 7]]), names_filter=expert_names(model))
    with pytest.raises(ValueError, match=r"layer 0 norms its MLP's output \(norm_placement='sandwich'\)"):
        expert_writes(model, cache, 0)
