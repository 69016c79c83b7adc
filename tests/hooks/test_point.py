"""Whether a hook point is listened to: one answer for every way of attaching something to it, for one point and
for the many points of a mixture-of-experts layer, and still true of a copied model."""

from __future__ import annotations

import copy

import pytest
import torch
from torch.nn.modules import module as torch_module

from hooks import HookedModule, HookPoint, listeners, listening
from interp import HookedTransformer
from tests.model.variants import tiny_config


class _Two(HookedModule):
    def __init__(self) -> None:
        super().__init__()
        self.hook_a = HookPoint()
        self.hook_b = HookPoint()
        self.setup_hooks()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.hook_b(self.hook_a(x) * 2)


def _fn(x, hook):
    hook.seen.append("function")


def _torch_hook(module, *args):
    if isinstance(module, HookPoint):  # a global hook sees every module
        module.seen.append("torch")


# Each way of making a point listen: (name, attach(point) -> handle, detach(handle, point), what a call records).
WAYS = [
    ("add_hook", lambda p: p.add_hook(_fn), lambda h, p: p.remove_hooks(), "function"),
    ("backward function", lambda p: p.add_hook(_fn, dir="bwd"), lambda h, p: p.remove_hooks("bwd"), None),
    ("forward hook", lambda p: p.register_forward_hook(_torch_hook), lambda h, p: h.remove(), "torch"),
    (
        "forward pre-hook",
        lambda p: p.register_forward_pre_hook(_torch_hook),
        lambda h, p: h.remove(),
        "torch",
    ),
    (
        "global forward hook",
        lambda p: torch_module.register_module_forward_hook(_torch_hook),
        lambda h, p: h.remove(),
        "torch",
    ),
]


@pytest.mark.parametrize(("way", "attach", "detach", "records"), WAYS, ids=[w[0] for w in WAYS])
def test_every_way_of_listening_is_seen_and_runs(way, attach, detach, records):
    model = _Two()
    for point in (model.hook_a, model.hook_b):
        point.seen = []
    gathered = listeners([model.hook_a])
    assert not listening(gathered) and model.hook_a.idle
    handle = attach(model.hook_a)
    try:
        assert listening(gathered) and not model.hook_a.idle
        assert listening(listeners([model.hook_b])) == (way == "global forward hook")
        model(torch.ones(3))
        if records is not None:
            assert records in model.hook_a.seen  # the identity path did not skip it
    finally:
        detach(handle, model.hook_a)
    assert not listening(gathered) and model.hook_a.idle
    with model.hooks([("hook_a", _fn)]):
        assert listening(gathered)
    assert not listening(gathered)


def test_a_copied_point_listens_for_itself():
    """The gathered containers are the point's own: a deep copy gathers its copies, not the original's."""
    model = _Two()
    twin = copy.deepcopy(model)
    assert twin.hook_a.idle
    twin.hook_a.add_hook(lambda x, hook: x + 1)
    assert twin.hook_a.active and not twin.hook_a.idle and model.hook_a.idle
    assert torch.equal(twin(torch.ones(2)), torch.full((2,), 4.0))
    assert torch.equal(model(torch.ones(2)), torch.full((2,), 2.0))


@pytest.mark.parametrize("copied", [False, True])
def test_an_experts_point_hooked_makes_the_experts_run_one_by_one(copied):
    cfg = tiny_config(n_experts=4, experts_per_token=2, d_expert=16, mlp="gated")
    model = HookedTransformer(cfg).eval()
    if copied:
        model = copy.deepcopy(model)
    moe = model.blocks[1].mlp
    assert not moe.experts_hooked()
    handle = moe.experts[3].hook_post.register_forward_hook(lambda module, args, out: None)
    assert moe.experts_hooked() and not model.blocks[0].mlp.experts_hooked()
    handle.remove()
    assert not moe.experts_hooked()
    with model.hooks([("blocks.1.mlp.experts.0.hook_out", lambda x, hook: None)]):
        assert moe.experts_hooked()
    handle = torch_module.register_module_forward_pre_hook(lambda module, args: None)
    try:
        assert moe.experts_hooked() and model.blocks[0].mlp.experts_hooked()
    finally:
        handle.remove()
    assert not moe.experts_hooked()
