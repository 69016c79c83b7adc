"""Training: a planted sparse dictionary is recovered; same seed, same SAE; a resumed run equals an uninterrupted
one bit for bit; an activation store trains in bounded memory like the tensor it holds."""

from __future__ import annotations

import pytest
import torch

from interp.sae.training import train
from interp.sae.training.data import RowSource, Stream
from interp.sae.training.sparsity import JumpReLU, Step
from interp.store import cache_activations
from tests.sae.models import tiny_model

D, ATOMS = 32, 64


def planted(n: int = 20000, seed: int = 1, offset: float = 0.5) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows that are sparse non-negative sums of 64 unit atoms (about 3 per row), plus a constant offset."""
    g = torch.Generator().manual_seed(seed)
    atoms = torch.randn(ATOMS, D, generator=g)
    atoms /= atoms.norm(dim=-1, keepdim=True)
    active = torch.rand(n, ATOMS, generator=g) < 3 / ATOMS
    coef = torch.rand(n, ATOMS, generator=g) * 2 + 0.5
    return (active * coef) @ atoms + offset, atoms


def recovered(sae, atoms: torch.Tensor) -> torch.Tensor:
    """For each planted atom, the best cosine with a decoder row."""
    rows = torch.nn.functional.normalize(sae.W_dec, dim=-1)
    return (rows @ atoms.T).max(0).values


def test_topk_recovers_most_planted_atoms():
    x, atoms = planted()
    sae = train(x, d_sae=128, k=3, lr=3e-3, batch_size=256, tokens=80000, progress=False)
    best = recovered(sae, atoms)
    assert (best > 0.9).float().mean() >= 0.9, best.sort().values[:10]
    torch.testing.assert_close(sae.W_dec.norm(dim=-1), torch.ones(128), atol=1e-5, rtol=0)
    # The fold keeps the SAE in the data's units: it reconstructs x itself, not a scaled copy.
    fvu = (sae(x) - x).pow(2).sum() / (x - x.mean(0)).pow(2).sum()
    assert fvu < 0.3
    history = sae.cfg.metadata["training"]["history"]
    assert history[-1]["fvu"] < history[0]["fvu"] and history[-1]["l0"] == 3.0


@pytest.mark.slow
def test_batchtopk_relu_and_jumprelu_learn_the_planted_dictionary_partly():
    x, atoms = planted(8000)
    start = recovered(train(x, d_sae=128, k=3, tokens=1, batch_size=1, progress=False), atoms).mean()
    for arch, kw in (
        ("batchtopk", dict(k=3, lr=5e-3)),
        ("standard", dict(l1_coefficient=0.05, lr=3e-3)),
        ("jumprelu", dict(l0_coefficient=0.05, lr=3e-3, jumprelu_init_threshold=0.5)),
    ):
        sae = train(x, d_sae=128, architecture=arch, batch_size=256, tokens=64000, progress=False, **kw)
        assert recovered(sae, atoms).mean() > start + 0.1, arch
        h = sae.cfg.metadata["training"]["history"]
        assert h[-1]["fvu"] < 0.6, (arch, h[-1])
        if arch != "standard":
            assert h[-1]["l0"] < 10, (arch, h[-1])
        if sae.cfg.has_threshold:
            assert (sae.threshold > 0).all()
            assert (sae.encode(x) > 0).sum(-1).float().mean() < 12


def test_same_seed_same_sae_and_another_seed_differs():
    x, _ = planted(3000)
    a = train(x, d_sae=64, k=4, batch_size=128, tokens=2000, seed=3, progress=False)
    b = train(x, d_sae=64, k=4, batch_size=128, tokens=2000, seed=3, progress=False)
    c = train(x, d_sae=64, k=4, batch_size=128, tokens=2000, seed=4, progress=False)
    for name, p in a.state_dict().items():
        assert torch.equal(p, b.state_dict()[name]), name
    assert not torch.equal(a.W_dec, c.W_dec)


@pytest.mark.parametrize("architecture", ["topk", "jumprelu", "batchtopk"])
def test_a_resumed_run_equals_an_uninterrupted_one_bit_for_bit(tmp_path, architecture):
    x, _ = planted(3000)
    kw = dict(d_sae=64, architecture=architecture, k=4, batch_size=100, tokens=3000, seed=0, progress=False)
    if architecture == "jumprelu":
        kw.pop("k")
    whole = train(x, checkpoint_dir=tmp_path / "whole", checkpoint_every=7, **kw)

    class Interrupt(Exception):
        pass

    # Stop the run after step 14 (two checkpoints) by making the stream fail; then resume with the same call.
    original = Stream.batches

    def failing(self, batch_size, start_step=0):
        for i, batch in enumerate(original(self, batch_size, start_step)):
            if start_step + i == 16:
                raise Interrupt
            yield batch

    Stream.batches = failing
    try:
        with pytest.raises(Interrupt):
            train(x, checkpoint_dir=tmp_path / "resumed", checkpoint_every=7, **kw)
    finally:
        Stream.batches = original
    resumed = train(x, checkpoint_dir=tmp_path / "resumed", checkpoint_every=7, **kw)
    for name, p in whole.state_dict().items():
        assert torch.equal(p, resumed.state_dict()[name]), name
    assert resumed.cfg.metadata["training"]["history"] == whole.cfg.metadata["training"]["history"]
    with pytest.raises(ValueError, match="belongs to another run.*seed was 0, now 1"):
        train(x, checkpoint_dir=tmp_path / "resumed", **{**kw, "seed": 1})


def test_an_activation_store_trains_in_bounded_buffers_like_its_tensor(tmp_path):
    model = tiny_model()
    batches = [torch.randint(0, 40, (4, 12), generator=torch.Generator().manual_seed(i)) for i in range(6)]
    store = cache_activations(
        model, batches, "blocks.1.hook_resid_post", tmp_path / "acts", shard_rows=48, progress=False
    )
    assert len(store.shards) == 6
    reads = []
    original = RowSource.read

    def counting(self, chunk):
        reads.append(chunk)
        return original(self, chunk)

    RowSource.read = counting
    try:
        sae = train(store, d_sae=32, k=4, batch_size=32, tokens=600, buffer_rows=96, progress=False)
    finally:
        RowSource.read = original
    assert sae.hook_name == "blocks.1.hook_resid_post" and sae.d_in == 16
    assert len(reads) >= 2 * 6  # two epochs, each shard read once per epoch, two at a time at most
    stream = Stream(RowSource(store), 0, 96)
    assert all(sum(store.shards[c].rows for c in group) <= 96 + 48 for group in stream.buffers(0))
    rows = torch.cat(list(_take(stream.batches(50), 6)))
    again = torch.cat(list(_take(stream.batches(50, start_step=3), 3)))
    torch.testing.assert_close(rows[150:], again, rtol=0, atol=0)
    every = torch.cat(list(_take(stream.batches(48), 6)))
    torch.testing.assert_close(every.sort(0).values, store.tensor("blocks.1.hook_resid_post").sort(0).values)


def _take(iterator, n):
    for _ in range(n):
        yield next(iterator)


def test_jumprelu_straight_through_gradients():
    x = torch.tensor([[0.1, 0.52, 0.9], [0.49, 0.3, 1.2]], requires_grad=True)
    t = torch.tensor([0.5, 0.5, 1.0], requires_grad=True)
    bw = 0.1
    out = JumpReLU.apply(x, t, bw)
    torch.testing.assert_close(out.detach(), x.detach() * (x.detach() > t.detach()))
    out.sum().backward()
    near = ((x.detach() - t.detach()).abs() < bw / 2).float()  # rectangle((x - t) / bw)
    torch.testing.assert_close(t.grad, (-(t.detach() / bw) * near).sum(0))
    torch.testing.assert_close(x.grad, (x.detach() > t.detach()).float())
    t2 = t.detach().clone().requires_grad_(True)
    Step.apply(x.detach(), t2, bw).sum().backward()
    torch.testing.assert_close(t2.grad, (-(1 / bw) * near).sum(0))


def test_bad_training_input_is_refused_before_training():
    x, _ = planted(100)
    with pytest.raises(ValueError, match="k=65 is larger than d_sae=64"):
        train(x, d_sae=64, k=65, progress=False)
    with pytest.raises(ValueError, match="float tensor \\[n, d_in\\]"):
        train(torch.zeros(3, 4, 5), d_sae=8, k=2, progress=False)
    with pytest.raises(ValueError, match="needs k >= 1"):
        train(x, d_sae=8, progress=False)
    with pytest.raises(ValueError, match="no rows"):
        train(torch.zeros(0, 4), d_sae=8, k=2, progress=False)


def test_min_position_leaves_out_each_items_first_tokens(tmp_path):
    model = tiny_model()
    batches = [torch.randint(0, 40, (3, 6), generator=torch.Generator().manual_seed(i)) for i in range(3)]
    store = cache_activations(
        model, batches, "blocks.0.hook_resid_post", tmp_path / "a", shard_rows=10, progress=False
    )
    rows = RowSource(store, min_position=2)
    index = store.index
    wanted = index.index[index["position"] >= 2].to_numpy()
    assert rows.n_rows == len(wanted) == 9 * 4
    got = torch.cat([rows.read(c) for c in range(len(rows.chunks))])
    torch.testing.assert_close(got, store.tensor("blocks.0.hook_resid_post", wanted), rtol=0, atol=0)
