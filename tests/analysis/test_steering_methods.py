"""Steering by the component along a direction (Neuronpedia's ORTHOGONAL_DECOMP and PROJECTION_CAP), against
the formulas written out per activation, at every position, at some, and in generation."""

from __future__ import annotations

import pytest
import torch

from interp.analysis.steering_methods import cap, project
from tests.generation_models import tiny_lm

HOOK = "blocks.1.hook_resid_pre"


@pytest.fixture(scope="module")
def model():
    return tiny_lm()


def _naive(x, v, edit, scale):
    """Each activation vector edited alone: ``(I - P) h + s P h`` or ``h - max(0, h.u - s) u``."""
    u = v.flatten() / v.flatten().norm()
    out = x.clone()
    for b in range(x.shape[0]):
        for p in range(x.shape[1]):
            h = x[b, p].flatten()
            along = h @ u
            new = h - along * u + scale * along * u if edit == "project" else h - max(0.0, along - scale) * u
            out[b, p] = new.view(x.shape[2:])
    return out


@pytest.mark.parametrize("edit", ["project", "cap"])
@pytest.mark.parametrize("hook", [HOOK, "blocks.0.attn.hook_z"])
def test_the_edit_is_the_formula_at_each_position(model, edit, hook):
    _, cache = model.run_with_cache("The cat sat on the mat", names_filter=hook)
    x = cache[hook]
    v = torch.randn(x.shape[2:], generator=torch.Generator().manual_seed(1))
    scale = 0.5 if edit == "project" else float((x.flatten(2) @ (v.flatten() / v.norm())).median())
    make = project if edit == "project" else cap
    seen = {}

    def keep(t, hook):
        seen["x"] = t.detach()

    model.run_with_hooks("The cat sat on the mat", fwd_hooks=[(hook, make(v, scale)), (hook, keep)])
    torch.testing.assert_close(seen["x"], _naive(x, v, edit, scale), rtol=1e-5, atol=1e-5)
    if edit == "cap":  # some positions were above the cap and now sit at it; the rest are untouched
        along = seen["x"].flatten(2) @ (v.flatten() / v.norm())
        assert float(along.max()) == pytest.approx(scale, abs=1e-4)
        assert not torch.equal(seen["x"], x)

    model.run_with_hooks(
        "The cat sat on the mat", fwd_hooks=[(hook, make(v, scale, positions=[1, 3])), (hook, keep)]
    )
    expected = x.clone()
    expected[:, [1, 3]] = _naive(x, v, edit, scale)[:, [1, 3]]
    torch.testing.assert_close(seen["x"], expected, rtol=1e-5, atol=1e-5)


def test_projecting_with_scale_one_changes_nothing_and_zero_removes_the_direction(model):
    _, cache = model.run_with_cache("The cat sat", names_filter=HOOK)
    v = torch.randn(model.cfg.d_model, generator=torch.Generator().manual_seed(2))
    seen = {}
    model.run_with_hooks(
        "The cat sat", fwd_hooks=[(HOOK, project(v, 1.0)), (HOOK, lambda t, hook: seen.update(x=t))]
    )
    torch.testing.assert_close(seen["x"], cache[HOOK], rtol=1e-6, atol=1e-6)
    model.run_with_hooks(
        "The cat sat", fwd_hooks=[(HOOK, project(v, 0.0)), (HOOK, lambda t, hook: seen.update(x=t))]
    )
    assert float((seen["x"] @ (v / v.norm())).abs().max()) < 1e-5


def test_in_generation_the_edit_acts_at_each_step(model):
    v = torch.randn(model.cfg.d_model, generator=torch.Generator().manual_seed(3))
    plain = model.generate("The cat", 6, fwd_hooks=[(HOOK, project(v, -4.0))])
    rerun = model.generate("The cat", 6, fwd_hooks=[(HOOK, project(v, -4.0))], use_kv_cache=False)
    assert plain.new_tokens == rerun.new_tokens  # each step's positions edited once, cached or rerun
    assert plain.new_tokens != model.generate("The cat", 6).new_tokens


def test_a_zero_vector_has_no_direction():
    with pytest.raises(ValueError, match="all zeros"):
        project(torch.zeros(4), 2.0)
    with pytest.raises(ValueError, match="all zeros"):
        cap(torch.zeros(4), 2.0)
