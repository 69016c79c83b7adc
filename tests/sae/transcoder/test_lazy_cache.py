"""A lazy CLT's decoder cache: the rows a spliced forward reads are kept within the cap, a second forward reads
nothing, and the lazy CLT gives the loaded one's numbers bit for bit; decoding through the active rows alone is
the dense product to float32 rounding, measured against float64."""

from __future__ import annotations

import pytest
import torch

from interp.sae.transcoder import CrossLayerTranscoder
from interp.sae.transcoder.decoder_cache import DecoderCache
from tests.sae.models import tiny_model, tokens
from tests.sae.transcoder.factories import random_clt
from tests.tolerance import EPS32, assert_within, float32_rounding

F, N_OUT, D = 10, 2, 4
ROW_BYTES = N_OUT * D * 4


def _counting_reader():
    table = torch.randn(3, F, N_OUT, D, generator=torch.Generator().manual_seed(0))
    calls = []

    def read(layer, features):
        calls.append((layer, None if features is None else features.tolist()))
        return table[layer] if features is None else table[layer][features]

    return table, calls, read


def test_rows_are_read_once_kept_within_the_cap_and_the_oldest_dropped_first():
    table, calls, read = _counting_reader()
    cache = DecoderCache(read, F, max_bytes=5 * ROW_BYTES)
    assert torch.equal(cache.rows(0, torch.tensor([3, 1, 3])), table[0][[3, 1, 3]])
    assert calls == [(0, [3, 1])]  # one read for the layer's missing features, each once, in the order asked
    assert torch.equal(cache.rows(0, torch.tensor([1, 3]), out=1), table[0][[1, 3], 1])
    assert calls == [(0, [3, 1])] and cache.nbytes == 2 * ROW_BYTES
    cache.rows(1, torch.tensor([0, 2]))  # 4 rows kept; last used: (0, 3) and (0, 1) before (1, 0), (1, 2)
    cache.rows(0, torch.tensor([3]))
    cache.rows(2, torch.tensor([5, 6]))  # 6 rows > 5: the least recently used, (0, 1), goes
    assert cache.nbytes == 5 * ROW_BYTES
    calls.clear()
    assert torch.equal(cache.rows(0, torch.tensor([1, 3])), table[0][[1, 3]])
    assert calls == [(0, [1])]  # (0, 1) read again; (0, 3) was kept
    assert cache.nbytes <= 5 * ROW_BYTES
    for layer, feature in [(0, 1), (0, 3), (2, 5), (2, 6)]:  # the four rows used last are all kept
        calls.clear()
        cache.rows(layer, torch.tensor([feature]))
        assert calls == [], (layer, feature)


def test_a_request_larger_than_the_cap_is_answered_and_not_kept():
    table, calls, read = _counting_reader()
    cache = DecoderCache(read, F, max_bytes=3 * ROW_BYTES)
    cache.rows(1, torch.tensor([4]))
    got = cache.rows(1, torch.tensor([0, 4, 9, 2, 7]))
    assert torch.equal(got, table[1][[0, 4, 9, 2, 7]])
    assert calls[-1] == (1, [0, 9, 2, 7]) and cache.nbytes <= 3 * ROW_BYTES
    assert torch.equal(cache.rows(1, None), table[1]) and cache.nbytes <= 3 * ROW_BYTES
    with pytest.raises(ValueError, match="max_bytes=-1; the decoder cache's cap must be >= 0 bytes"):
        DecoderCache(read, F, max_bytes=-1)


def _lazy(clt: CrossLayerTranscoder, reads: list, cache_bytes: int) -> CrossLayerTranscoder:
    def reader(layer, features):
        reads.append(layer)
        w = clt.W_dec[layer].detach()
        return w if features is None else w[features]

    common = dict(activation=clt.activation, k=clt.k, input_site=clt.input_site, output_site=clt.output_site)
    if clt.thresholds is not None:
        common["threshold"] = clt.thresholds.detach()
    return CrossLayerTranscoder(
        clt.W_enc.detach(),
        None,
        clt.b_enc.detach(),
        clt.b_dec.detach(),
        decoder_reader=reader,
        decoder_cache_bytes=cache_bytes,
        **common,
    )


@pytest.mark.parametrize("activation", ["jumprelu", "topk"])
def test_a_spliced_lazy_clt_equals_the_loaded_one_and_reads_nothing_the_second_time(activation):
    model = tiny_model()
    loaded = random_clt(activation=activation, **({"k": 3} if activation == "topk" else {}))
    reads: list = []
    lazy = _lazy(loaded, reads, 2**20)
    ids = tokens()
    with torch.no_grad():
        with model.transcoders(loaded):
            want, want_cache = model.run_with_cache(ids, names_filter="*.hook_sae_*")
        with model.transcoders(lazy):
            first, first_cache = model.run_with_cache(ids, names_filter="*.hook_sae_*")
            n_read = len(reads)
            second = model(ids)
    assert n_read > 0 and len(reads) == n_read  # the second forward read no row from the files
    assert torch.equal(first, want) and torch.equal(second, want)
    for name in want_cache:
        assert torch.equal(first_cache[name], want_cache[name]), name


def test_a_cap_too_small_for_one_layer_still_gives_the_same_numbers():
    model = tiny_model()
    loaded = random_clt(activation="relu")
    reads: list = []
    lazy = _lazy(loaded, reads, 0)
    ids = tokens()
    with torch.no_grad():
        with model.transcoders(loaded):
            want = model(ids)
        with model.transcoders(lazy):
            assert torch.equal(model(ids), want)
            n_read = len(reads)
            assert torch.equal(model(ids), want)
    assert len(reads) == 2 * n_read and lazy.decoder_cache.nbytes == 0  # nothing kept: every forward reads


def test_decoding_the_active_rows_is_the_dense_product_to_float32_rounding():
    clt = random_clt(n_layers=3, d_model=32, d_tc=200, activation="relu")
    g = torch.Generator().manual_seed(4)
    inputs = {s: torch.randn(6, 32, generator=g) for s in range(3)}
    with torch.no_grad():
        acts = {s: clt.encode(x, s)[1] for s, x in inputs.items()}
        assert all(0 < float((a != 0).float().mean()) < 1 for a in acts.values())  # some features are off
        for out in range(3):
            sparse = clt.decode(acts, out)
            dense = sum(acts[s] @ clt.W_dec[s][:, out - s] for s in range(out + 1)) + clt.b_dec[out]
            exact = sum(acts[s].double() @ clt.W_dec[s][:, out - s].double() for s in range(out + 1))
            exact = exact + clt.b_dec[out].double()
            bound = float32_rounding(dense, exact)  # what float32 does to the dense product here
            assert float((sparse.double() - exact).abs().max()) <= 2 * bound


def test_activations_with_a_gradient_get_the_dense_products_gradient():
    clt = random_clt(activation="relu")
    inputs = {s: torch.randn(5, 16, generator=torch.Generator().manual_seed(s)) for s in range(2)}
    acts = {s: clt.encode(x, s)[1].detach().requires_grad_(True) for s, x in inputs.items()}
    clt.decode(acts, 1).sum().backward()
    off = acts[0].detach() == 0
    assert bool(off.any())
    # d out / d acts[0] is the row sum of layer 0's decoder into layer 1, for inactive features too
    rows = clt.W_dec[0][:, 1].detach()  # [d_transcoder, d_model]
    want = rows.sum(-1).expand(5, -1)
    assert_within(acts[0].grad, want, EPS32 * rows.abs().sum(-1).expand(5, -1), "d out / d acts")


def test_activations_edited_in_place_are_decoded_as_they_are_now():
    clt = random_clt(activation="relu")
    g = torch.Generator().manual_seed(6)
    with torch.no_grad():
        acts = {s: clt.encode(torch.randn(5, 16, generator=g), s)[1] for s in (0, 1)}
        off = int((acts[0] == 0).all(0).nonzero()[0, 0])  # a feature active at no position
        clt.decode(acts, 1)
        acts[0][:, off] = 2.0  # the same tensor, a feature turned on: a stale list of active rows misses it
        got = clt.decode(acts, 1)
        dense = acts[0] @ clt.W_dec[0][:, 1] + acts[1] @ clt.W_dec[1][:, 0] + clt.b_dec[1]
        exact = (
            sum(acts[s].double() @ clt.W_dec[s][:, 1 - s].double() for s in (0, 1)) + clt.b_dec[1].double()
        )
        assert float((got.double() - exact).abs().max()) <= 2 * float32_rounding(dense, exact)
