"""``preflight.check_store``: the one check of an activation store a pass reads every position of (dashboards,
and the contexts an attribution graph shows), first by its folder alone, then with hooks and the model."""

from __future__ import annotations

import pytest
import torch

from interp.preflight import check_store
from interp.store import ActivationStore, cache_activations
from tests.store.models import sentences, tiny_model

HOOK = "blocks.0.hook_resid_post"


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("stores")
    model = tiny_model()
    cache_activations(model, sentences(6), HOOK, root / "all", progress=False)
    cache_activations(model, sentences(6), HOOK, root / "last", positions="last", progress=False)
    return model, root


def test_a_store_of_every_position_passes_and_is_returned_open(stores):
    model, root = stores
    store = check_store(root / "all")
    assert isinstance(store, ActivationStore) and len(store) > 0
    assert check_store(store, hooks=[HOOK], model=model) is store


def test_each_mistake_is_one_line_naming_the_flag_the_store_and_what_would_do(stores, tmp_path):
    model, root = stores
    with pytest.raises(
        FileNotFoundError, match=rf"^--store {tmp_path} is not an activation store \(no meta.json\); "
    ):
        check_store(tmp_path)
    with pytest.raises(
        ValueError, match=r"^--store .*last keeps positions 'last'; the contexts need it, so it needs "
    ):
        check_store(root / "last", need="the contexts need it")
    with pytest.raises(
        ValueError, match=r"^--store .*all has no rows of \['blocks.1.hook_resid_post'\].*--positions all"
    ):
        check_store(root / "all", hooks=["blocks.1.hook_resid_post", HOOK])
    other = tiny_model(seed=1)
    with torch.no_grad():
        other.blocks[0].attn.W_Q.add_(0.01)
    with pytest.raises(
        ValueError, match=r"^acts .*all was written by model .*not by the model given; pass the model"
    ):
        check_store(root / "all", flag="acts", model=other)
