"""Every hook name TransformerLens 3's ``TransformerBridge`` caches names the same activation on interp, or raises
saying what to use instead.

The golden (``golden/make_golden.py``, TransformerLens 3.9) holds each activation the bridge caches on the random
GPT-2-shaped checkpoint, under the bridge's own names, and those that exist only with split inputs, head results
and the MLP input hook turned on. Here the same checkpoint runs on interp without weight processing, as the
bridge runs it, and each name is looked up through interp's aliases: its activation must equal TransformerLens's,
shape and values. The names interp has no hook point for are listed below; each raises one line naming the hook
to use.
"""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from hooks import UnknownHookError
from tests.compat.models import golden, golden_labels, tl_model

G = golden()
LABELS = golden_labels()
TOKENS = G["tokens"][:, :6]  # the bridge's input (BRIDGE_TOKENS in make_golden.py)
TOL = dict(atol=2e-5, rtol=1e-5)  # as in test_golden.py: float32 through two layers, two implementations

# The normed input of a sublayer after the norm's gain and bias has no hook point in interp; nor have the ids
# and positions (the input itself).
NORMED_INPUTS = [
    f"blocks.{layer}.{name}"
    for layer in range(2)
    for name in (
        "attn.hook_in",
        "attn.q.hook_in",
        "attn.k.hook_in",
        "attn.v.hook_in",
        "ln1.hook_out",
        "mlp.hook_in",
        "mlp.in.hook_in",
        "ln2.hook_out",
    )
]
WITHOUT_HOOK_POINT = sorted([*NORMED_INPUTS, "embed.hook_in", "pos_embed.hook_in"])


@pytest.fixture(scope="module")
def model():
    return tl_model(process=False)


def _lookup(model, name: str) -> str | None:
    try:
        [canonical] = model.resolve(name)
    except UnknownHookError:
        return None
    return canonical


def _assert_same(ours: torch.Tensor, theirs: torch.Tensor, name: str) -> None:
    assert ours.shape == theirs.shape, (name, tuple(ours.shape), tuple(theirs.shape))
    if name.endswith("hook_attn_scores"):
        # masked scores: -inf here, the dtype's lowest value in the bridge (transformers' eager attention)
        masked = torch.ones(ours.shape[-2:], dtype=torch.bool).triu(1)
        assert bool((ours[..., masked] == float("-inf")).all()) and bool((theirs[..., masked] < -1e38).all())
        ours, theirs = ours.masked_fill(masked, 0.0), theirs.masked_fill(masked, 0.0)
    assert_close(ours, theirs, **TOL, msg=name)


def test_the_golden_input_is_the_bridge_input():
    assert torch.equal(G["bridge.embed.hook_in"], TOKENS)


def test_every_name_the_bridge_caches_is_the_same_activation_here(model):
    _, cache = model.run_with_cache(TOKENS)
    names = LABELS["bridge"]
    assert len(names) == 93  # the golden's list, so that a regenerated golden with fewer names is noticed
    found = {name: _lookup(model, name) for name in names}
    assert sorted(name for name, canonical in found.items() if canonical is None) == WITHOUT_HOOK_POINT
    for name, canonical in found.items():
        if canonical is not None:
            _assert_same(cache[canonical], G[f"bridge.{name}"], name)


def test_names_that_need_split_inputs_are_the_same_activation_inside_split_inputs(model):
    names = LABELS["bridge_split"]
    assert len(names) == 16
    with model.split_inputs():
        _, cache = model.run_with_cache(TOKENS)
        for name in names:
            canonical = _lookup(model, name)
            assert canonical is not None, name
            _assert_same(cache[canonical], G[f"bridge_split.{name}"], name)


def test_names_without_a_hook_point_raise_saying_what_to_use(model):
    never_fired = LABELS["bridge_not_fired"]  # in the bridge's hook_dict, but they fire in no mode used here
    for name in [*WITHOUT_HOOK_POINT, *never_fired]:
        with pytest.raises(UnknownHookError):  # never silently not hooked
            model.run_with_hooks(TOKENS, fwd_hooks=[(name, lambda x, hook: None)])
    for name in NORMED_INPUTS:
        layer, norm = name.split(".")[1], "ln1" if ".attn." in name or ".ln1." in name else "ln2"
        with pytest.raises(UnknownHookError, match=rf"use 'blocks\.{layer}\.{norm}\.hook_normalized'"):
            model.run_with_cache(TOKENS, names_filter=[name])
