"""API edges: each wrong argument gets a message naming the argument and what it accepts."""

from __future__ import annotations

import pytest
import torch

from tests.store.models import tiny_model


@pytest.fixture(scope="module")
def model():
    return tiny_model()


def test_an_empty_batch(model):
    for shape in [(0, 5), (2, 0)]:
        with pytest.raises(
            ValueError, match=r"tokens must be \[batch, pos\] with batch >= 1 and pos >= 1, got shape"
        ):
            model(torch.zeros(shape, dtype=torch.long))
    with pytest.raises(ValueError, match=r"got shape \(0, 5\)"):
        model.run_with_cache(torch.zeros(0, 5, dtype=torch.long), names_filter="hook_embed")


@pytest.mark.parametrize("bad", [3, 2.5, b"hook_embed", {"hook_embed": 1}])
def test_a_names_filter_that_is_not_one(model, bad):
    ids = torch.tensor([[3, 4]])
    with pytest.raises(
        TypeError, match=r"names_filter=.* is not a names filter; pass None \(every hook\), a name"
    ):
        model.run_with_cache(ids, names_filter=bad)


def test_a_names_filter_list_with_a_non_string(model):
    with pytest.raises(
        TypeError, match=r"names_filter holds 3 \(int\); its entries must be hook names or globs"
    ):
        model.run_with_cache(torch.tensor([[3, 4]]), names_filter=["hook_embed", 3])


def fn(x, hook):
    return None


@pytest.mark.parametrize(
    ("fwd_hooks", "detail"),
    [
        (["hook_embed"], r"entry 0 is 'hook_embed'"),
        ([("hook_embed", fn, 1)], r"entry 0 is \('hook_embed', <function"),
        (("hook_embed", fn), r"got a single pair: wrap it in a list, \[\('hook_embed', fn\)\]"),
        ("hook_embed", r"got str 'hook_embed'"),
        (fn, r"got function"),
    ],
)
def test_fwd_hooks_that_are_not_pairs(model, fwd_hooks, detail):
    with pytest.raises(TypeError, match=r"fwd_hooks takes a list of \(names_filter, fn\) pairs.*" + detail):
        model.run_with_hooks(torch.tensor([[3, 4]]), fwd_hooks=fwd_hooks)
    assert all(not p.fwd_fns for p in model.hook_dict.values())


def test_bwd_hooks_are_named_as_such(model):
    with pytest.raises(TypeError, match=r"bwd_hooks takes a list of \(names_filter, fn\) pairs"):
        model.run_with_hooks(torch.tensor([[3, 4]]), bwd_hooks=["hook_embed"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"the cat", r"text is bytes \(b'the cat'\); pass a str, such as text.decode\('utf-8'\)"),
        (bytearray(b"the"), r"text is bytearray"),
        (None, r"text is None \(NoneType\); pass a str or a list of str"),
        (7, r"text is 7 \(int\); pass a str or a list of str"),
        (torch.tensor([3, 4]), r"text is a Tensor; to_tokens takes text .*pass token ids to the model"),
        (["the cat", b"a dog"], r"text 1 of the batch is bytes \(b'a dog'\); every text must be a str"),
    ],
)
def test_to_tokens_names_what_it_accepts(model, text, message):
    with pytest.raises(TypeError, match=message):
        model.to_tokens(text)


def test_to_tokens_still_takes_a_generator_of_texts(model):
    ids, mask = model.to_tokens(t for t in ["the cat", "a dog sat"])
    assert ids.shape == (2, 3) and mask.sum().item() == 5
    listed_ids, listed_mask = model.to_tokens(["the cat", "a dog sat"])
    assert torch.equal(ids, listed_ids) and torch.equal(mask, listed_mask)
