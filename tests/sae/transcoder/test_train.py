"""Training transcoders: each kind recovers a planted dictionary, and a resumed run equals an uninterrupted one.

The planted data: per layer, sparse non-negative codes (about 3 of 32 atoms per row) write the input through
one dictionary and the output through another, so a transcoder must learn to read the codes from the input
and write them with the output dictionary. A CLT's codes at layer ``s`` also write to every later output; a
skip transcoder's output adds a dense part that only a linear map of the input explains.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from interp.sae import CrossLayerTranscoder, TranscoderSet, train, train_transcoders
from interp.sae.training.data import Stream
from interp.store import cache_activations
from tests.sae.models import tiny_model

D, ATOMS, ROWS = 16, 32, 12000
FAST = dict(d_sae=128, k=3, lr=1e-2, batch_size=256, tokens=120000, progress=False)


def _unit(g, *shape):
    a = torch.randn(*shape, generator=g)
    return a / a.norm(dim=-1, keepdim=True)


def planted(n_layers: int, kind: str, seed: int = 1):
    """``(inputs, outputs, output_dictionary)``; inputs and outputs ``[rows, n_layers, D]``."""
    g = torch.Generator().manual_seed(seed)
    codes = (torch.rand(ROWS, n_layers, ATOMS, generator=g) < 3 / ATOMS) * (
        torch.rand(ROWS, n_layers, ATOMS, generator=g) * 2 + 0.5
    )
    x = torch.einsum("rna,nad->rnd", codes, _unit(g, n_layers, ATOMS, D))
    if kind == "clt":
        out = [_unit(g, ATOMS, n_layers - s, D) for s in range(n_layers)]
        y = torch.zeros(ROWS, n_layers, D)
        for s in range(n_layers):
            y[:, s:] += torch.einsum("ra,aod->rod", codes[:, s], out[s])
        return x, y, out
    out = _unit(g, n_layers, ATOMS, D)
    y = torch.einsum("rna,nad->rnd", codes, out)
    if kind == "skip-transcoder":
        # Half the input's dimensions carry dense noise that reaches the output only through a linear map.
        x[..., D // 2 :] = torch.randn(ROWS, n_layers, D // 2, generator=g)
        x[..., : D // 2] = torch.einsum("rna,nad->rnd", codes, _unit(g, n_layers, ATOMS, D // 2))
        skip = torch.randn(n_layers, D, D // 2, generator=g) * 0.3
        y = y + torch.einsum("rni,noi->rno", x[..., D // 2 :], skip)
        return x, y, (out, skip)
    return x, y, out


def _best_cosines(rows: torch.Tensor, atoms: torch.Tensor) -> torch.Tensor:
    return (F.normalize(rows.flatten(1), dim=-1) @ F.normalize(atoms.flatten(1), dim=-1).T).max(0).values


@torch.no_grad()
def _fvu(tc, x, y) -> list[float]:
    out = tc.reconstruct({layer: x[:, i] for i, layer in enumerate(tc.layers)})
    return [
        float((out[L] - y[:, i]).pow(2).sum() / (y[:, i] - y[:, i].mean(0)).pow(2).sum())
        for i, L in enumerate(tc.layers)
    ]


def test_a_transcoder_set_recovers_the_planted_output_dictionary():
    x, y, atoms = planted(1, "transcoder")
    tc = train((x, y), kind="transcoder", **FAST)
    assert isinstance(tc, TranscoderSet) and tc.layers == [0] and not tc.has_skip
    best = _best_cosines(tc.W_dec[0], atoms[0])
    assert (best > 0.9).float().mean() >= 0.9, best.sort().values[:8]
    assert _fvu(tc, x, y)[0] < 0.3  # in the data's units: the scales are folded in
    history = tc.metadata["training"]["history"]
    assert history[-1]["fvu"] < history[0]["fvu"] and history[-1]["l0"] == 3.0


@pytest.mark.slow
def test_a_skip_transcoder_learns_the_planted_skip_and_dictionary():
    x, y, (atoms, skip) = planted(2, "skip-transcoder")
    tc = train((x, y), kind="skip-transcoder", **FAST)
    plain = train((x, y), kind="transcoder", **FAST)
    assert tc.has_skip
    for i in range(2):
        dense = tc.W_skip[i][:, D // 2 :]
        assert (dense - skip[i]).norm() / skip[i].norm() < 0.2
        # Only partly identifiable: a linear map of the codes' input part can stand in for some of the output
        # dictionary, so the skip and the features may share that part.
        assert _best_cosines(tc.W_dec[i], atoms[i]).mean() > 0.7
    assert max(_fvu(tc, x, y)) < min(_fvu(plain, x, y)) - 0.1


@pytest.mark.slow
def test_a_clt_recovers_the_planted_cross_layer_dictionary():
    x, y, atoms = planted(2, "clt")
    clt = train((x, y), kind="clt", **FAST)
    assert isinstance(clt, CrossLayerTranscoder) and clt.n_layers == 2
    for s in range(2):
        best = _best_cosines(clt.W_dec[s], atoms[s])
        assert (best > 0.9).float().mean() >= 0.8, (s, best.sort().values[:8])
    assert max(_fvu(clt, x, y)) < 0.35


@pytest.mark.parametrize(
    ("kind", "architecture"),
    [("transcoder", "jumprelu"), ("clt", "batchtopk"), ("skip-transcoder", "standard")],
)
def test_a_resumed_run_equals_an_uninterrupted_one_bit_for_bit(tmp_path, monkeypatch, kind, architecture):
    x, y, _ = planted(2, "clt" if kind == "clt" else "transcoder")
    kw = dict(kind=kind, architecture=architecture, d_sae=24, batch_size=100, tokens=3000, progress=False)
    kw.update(k=3 if architecture == "batchtopk" else None, checkpoint_every=7)
    data = (x[:2000], y[:2000])
    whole = train(data, checkpoint_dir=tmp_path / "whole", **kw)

    class Interrupt(Exception):
        pass

    original = Stream.batches

    def failing(self, batch_size, start_step=0):  # stop after step 16 (two checkpoints written)
        for i, batch in enumerate(original(self, batch_size, start_step)):
            if start_step + i == 16:
                raise Interrupt
            yield batch

    monkeypatch.setattr(Stream, "batches", failing)
    with pytest.raises(Interrupt):
        train(data, checkpoint_dir=tmp_path / "resumed", **kw)
    monkeypatch.setattr(Stream, "batches", original)
    resumed = train(data, checkpoint_dir=tmp_path / "resumed", **kw)
    for name, p in whole.state_dict().items():
        assert torch.equal(p, resumed.state_dict()[name]), name
    assert resumed.metadata["training"]["history"] == whole.metadata["training"]["history"]
    with pytest.raises(ValueError, match="belongs to another run"):
        train(data, checkpoint_dir=tmp_path / "resumed", **{**kw, "kind": "transcoder", "seed": 1})


def test_training_on_a_store_lacking_the_output_hook_is_refused(tmp_path):
    model = tiny_model()
    ids = torch.randint(0, 40, (2, 6), generator=torch.Generator().manual_seed(0))
    hooks = ["blocks.0.ln2.hook_normalized", "blocks.1.ln2.hook_normalized"]
    store = cache_activations(model, [ids], hooks, tmp_path / "s", progress=False)
    with pytest.raises(
        ValueError, match="the store lacks 'blocks.0.hook_mlp_out', the output hook of layer 0"
    ):
        train(store, kind="transcoder", d_sae=8, k=2)
    with pytest.raises(ValueError, match="kind='gelu'; expected one of"):
        train(store, kind="gelu", d_sae=8, k=2)
    with pytest.raises(ValueError, match="hook_name='blocks.0.ln2.hook_normalized' is for an SAE"):
        train(store, kind="clt", hook_name=hooks[0], d_sae=8, k=2)
    with pytest.raises(
        ValueError, match="kind='sae'; expected one of"
    ):  # the old name trains transcoders alone
        train_transcoders(store, kind="sae", d_transcoder=8, k=2)
