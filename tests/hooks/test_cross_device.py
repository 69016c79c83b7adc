"""A hook's replacement may be computed on any device: it is moved to where the activation lives."""

from __future__ import annotations

import pytest
import torch

from hooks import HookEditError, HookPoint


def _point(fn) -> HookPoint:
    point = HookPoint()
    point.name = "blocks.0.hook_resid_post"
    point.fwd_fns.append(fn)
    return point


def test_a_replacement_on_another_device_is_moved_to_the_activations():
    # The meta device stands in for a second device on a machine with only a CPU.
    activation = torch.empty(2, 3, device="meta")
    replacement = torch.ones(2, 3)
    out = _point(lambda x, hook: replacement)(activation)
    assert out.device == torch.device("meta") and out.shape == (2, 3)


def test_a_replacement_on_the_same_device_is_returned_as_it_is():
    replacement = torch.ones(2, 3)
    assert _point(lambda x, hook: replacement)(torch.zeros(2, 3)) is replacement


def test_shape_and_dtype_are_still_checked_across_devices():
    activation = torch.empty(2, 3, device="meta")
    with pytest.raises(
        HookEditError, match=r"'blocks\.0\.hook_resid_post' returned a tensor with shape \(3, 2\)"
    ):
        _point(lambda x, hook: torch.ones(3, 2))(activation)
    with pytest.raises(HookEditError, match="dtype torch.float64"):
        _point(lambda x, hook: torch.ones(2, 3, dtype=torch.float64))(activation)
