"""Rows read back from a store equal a direct ``run_with_cache``, exactly, for any padding and positions."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from interp.store import ActivationStore, StoreMismatchError, cache_activations
from tests.store.models import HOOKS, sentences, tiny_model

TEXTS = sentences(23, seed=1)


def expected_rows(model, texts, batch_size, positions):
    """Per hook, the rows a store should hold, computed batch by batch with run_with_cache."""
    rows: dict[str, list[torch.Tensor]] = {h: [] for h in HOOKS}
    index = []
    for lo in range(0, len(texts), batch_size):
        ids, mask = model.to_tokens(texts[lo : lo + batch_size])
        _, cache = model.run_with_cache(ids, mask, names_filter=HOOKS)
        for b in range(ids.shape[0]):
            real = mask[b].nonzero().flatten()  # columns of real tokens
            wanted = range(len(real)) if positions == "all" else [-1] if positions == "last" else positions
            for p in wanted:
                p = p + len(real) if p < 0 else p
                index.append((lo + b, p))
                for h in HOOKS:
                    rows[h].append(cache[h][b, real[p]])
    return {h: torch.stack(r) for h, r in rows.items()}, index


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("positions", ["all", "last", [0, -1, 1]])
def test_rows_equal_run_with_cache(tmp_path, side, positions):
    model = tiny_model(padding_side=side)
    texts = [t + " cat" for t in TEXTS]  # at least two words, so position 1 exists
    store = cache_activations(
        model, texts, HOOKS, tmp_path / "s", batch_size=5, positions=positions, shard_rows=17, progress=False
    )
    want, index = expected_rows(model, texts, 5, positions)
    assert store.complete and len(store) == len(index)
    for hook in HOOKS:
        assert torch.equal(store.tensor(hook), want[hook]), hook
    frame = store.index
    assert list(zip(frame["item"], frame["position"], strict=True)) == index
    assert frame["row"].tolist() == list(range(len(store)))
    assert frame["token"].tolist() == [texts[i].split()[p] for i, p in index]


def test_pretokenized_batches_with_mixed_padding(tmp_path):
    """Batches given as (ids, mask), one left-padded and one right-padded; no tokenizer needed."""
    model = tiny_model()
    model.tokenizer = None
    ids = torch.tensor([[0, 0, 5, 6, 7], [3, 4, 5, 6, 7]])
    left = (ids, (ids != 0).long())
    right = (torch.tensor([[5, 6, 0], [8, 9, 10]]), torch.tensor([[1, 1, 0], [1, 1, 1]]))
    store = cache_activations(model, [left, right], HOOKS, tmp_path / "s", shard_rows=4, progress=False)
    assert store.index["item"].tolist() == [0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 3, 3, 3]
    assert store.index["position"].tolist() == [0, 1, 2, 0, 1, 2, 3, 4, 0, 1, 0, 1, 2]
    assert store.index["token"].isna().all() and store.index["item_id"].isna().all()
    for hook in HOOKS:
        parts = []
        for batch_ids, mask in (left, right):
            _, cache = model.run_with_cache(batch_ids, mask, names_filter=hook)
            parts.append(cache[hook][mask.bool()])
        assert torch.equal(store.tensor(hook), torch.cat(parts)), hook
    # left padding does not move positions: item 0 reads as the same three tokens without padding
    _, alone = model.run_with_cache(torch.tensor([[5, 6, 7]]), names_filter=HOOKS[1])
    torch.testing.assert_close(store.tensor(HOOKS[1], [0, 1, 2]), alone[HOOKS[1]][0])


def test_reader_views_agree(tmp_path):
    model = tiny_model()
    records = [{"id": f"s{i}", "sentence": t} for i, t in enumerate(TEXTS)]
    store = cache_activations(
        model, records, HOOKS, tmp_path / "s", batch_size=4, shard_rows=16, progress=False
    )
    assert store.index["item_id"].tolist() == [f"s{i}" for i in store.index["item"]]
    again = ActivationStore(tmp_path / "s")
    assert len(again) == len(store) and len(again.shards) == -(-len(store) // 16)
    hook = "blocks.1.attn.hook_z"
    full = again.tensor(hook)  # [rows, head, d_head]
    assert full.shape == (len(store), 2, 8) and again.row_shape(hook) == (2, 8)
    rows = [len(store) - 1, 0, 17, 16, 15, 40]
    assert torch.equal(again.tensor(hook, rows), full[rows])
    assert torch.equal(again.tensor(hook, slice(10, 50)), full[10:50])
    mapped = again.memmap(hook)
    assert mapped.shape == tuple(full.shape) and isinstance(mapped.parts[0], np.memmap)
    assert np.array_equal(np.asarray(mapped), full.numpy())
    assert np.array_equal(mapped[rows], full[rows].numpy())
    assert np.array_equal(mapped[5:40, 1], full[5:40, 1].numpy())
    assert np.array_equal(mapped[-1], full[-1].numpy())
    shards = list(again)
    assert torch.equal(torch.cat([s.tensors[hook] for s in shards]), full)
    assert shards[1].index["row"].tolist() == list(range(16, 32))
    # each shard is an ordinary safetensors file
    plain = load_file(again.shards[0].path)
    assert (
        torch.equal(plain[hook], full[:16])
        and plain["_index.item"].tolist() == again.index["item"][:16].tolist()
    )
    with pytest.raises(KeyError, match="not in this store"):
        again.tensor("blocks.0.hook_resid_pre")
    with pytest.raises(IndexError):
        again.tensor(hook, [len(store)])


def test_storage_dtype(tmp_path):
    model = tiny_model()
    store = cache_activations(model, TEXTS[:6], HOOKS[1], tmp_path / "s", dtype="bfloat16", progress=False)
    _, cache = model.run_with_cache(*model.to_tokens(TEXTS[:6]), names_filter=HOOKS[1])
    mask = model.to_tokens(TEXTS[:6])[1].bool()
    assert torch.equal(store.tensor(HOOKS[1]), cache[HOOKS[1]][mask].bfloat16())
    with pytest.raises(TypeError, match="numpy cannot represent"):
        store.memmap(HOOKS[1])


def test_refuses_what_it_cannot_store(tmp_path):
    model = tiny_model()
    with pytest.raises(ValueError, match="hook_z"):
        cache_activations(model, TEXTS, "blocks.*.attn.hook_pattern", tmp_path / "a", progress=False)
    with pytest.raises(KeyError, match="did you mean"):
        cache_activations(model, TEXTS, "blocks.0.hook_resid_psot", tmp_path / "b", progress=False)
    with pytest.raises(ValueError, match="item 0 has 1 tokens; position 3 is outside it"):
        cache_activations(
            model, ["cat", "the cat sat on"], HOOKS, tmp_path / "c", positions=[3], progress=False
        )
    model.tokenizer = None
    with pytest.raises(ValueError, match="no tokenizer"):
        cache_activations(model, TEXTS, HOOKS, tmp_path / "d", progress=False)
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "notes.txt").write_text("mine")
    with pytest.raises(StoreMismatchError, match="not empty"):
        cache_activations(tiny_model(), TEXTS, HOOKS, tmp_path / "e", progress=False)
