"""The bounded tables keep exactly the smallest keys offered, with their payloads, however the offers are
batched; the histograms' counts equal those of a histogram made once at the end."""

from __future__ import annotations

import pytest
import torch

from interp.sae.dashboards.histogram import LINEAR_BINS, LOG_BINS, PER_OCTAVE, Histograms
from interp.sae.dashboards.reservoir import INT64_MAX, Reservoir, sample_key, top_key


@pytest.mark.parametrize("seed", range(4))
def test_keeps_the_smallest_keys_however_batched(seed):
    g = torch.Generator().manual_seed(seed)
    n, size, m = 7, 5, 400
    group = torch.randint(0, n, (m,), generator=g)
    key = sample_key(torch.arange(m), torch.zeros(m, dtype=torch.long), group, seed)
    value = torch.rand(m, generator=g)
    table = Reservoir(n, size, {"value": ((), torch.float32), "pair": ((2,), torch.long)})
    cuts = sorted(torch.randint(0, m, (6,), generator=g).tolist())
    for lo, hi in zip([0, *cuts], [*cuts, m], strict=True):
        idx = torch.arange(lo, hi)

        def payload(sel, idx=idx):
            return {"value": value[idx][sel], "pair": torch.stack([idx[sel], idx[sel] * 2], dim=1)}

        table.offer(group[idx], key[idx], payload)
    kept = table.sorted(torch.arange(n))
    for row in range(n):
        mine = (group == row).nonzero().squeeze(1)
        best = mine[key[mine].argsort()][:size]
        filled = kept["filled"][row]
        assert filled.sum() == len(best) and filled[: len(best)].all()
        assert kept["keys"][row][: len(best)].tolist() == key[best].tolist()
        assert kept["value"][row][: len(best)].tolist() == value[best].tolist()
        assert kept["pair"][row][: len(best), 1].tolist() == (2 * best).tolist()
        assert (kept["keys"][row][len(best) :] == INT64_MAX).all()


def test_top_key_orders_by_value_descending_then_by_the_hash():
    values = torch.tensor([0.5, 2.0, -1.0, 0.5, 1e-8, 3.0])
    hashes = torch.tensor([7, 1, 3, 2, 5, 9]) << 40 | torch.tensor([7, 1, 3, 2, 5, 9])
    order = top_key(values, hashes).argsort().tolist()
    assert order == [5, 1, 3, 0, 4, 2]  # 3.0, 2.0, then 0.5 twice by hash (2 before 7), 1e-8, -1.0


def test_histograms_merge_exactly_as_the_top_grows():
    g = torch.Generator().manual_seed(0)
    values = torch.cat([torch.rand(300, generator=g) * 0.01, torch.rand(300, generator=g) * 40])
    feature = torch.randint(0, 3, (600,), generator=g)
    hist = Histograms(3)
    for lo in range(0, 600, 50):  # small values first: the top grows many octaves during the stream
        hist.add(feature[lo : lo + 50], values[lo : lo + 50])
    for f in range(3):
        v = values[feature == f]
        e = int(torch.frexp(v.max())[1])
        linear = torch.bincount((v * LINEAR_BINS / 2.0**e).floor().long(), minlength=LINEAR_BINS)
        depth = (PER_OCTAVE * torch.log2(2.0**e / v.double())).floor().long().clamp(max=LOG_BINS - 1)
        assert int(hist.top[f]) == e
        assert hist.linear[f].tolist() == linear.tolist()
        assert hist.log[f].tolist() == torch.bincount(depth, minlength=LOG_BINS).tolist()
