"""Training a Lorsa with the one trainer: on tiny random Llama, Gemma 2 and Qwen3 checkpoints (the family's
positions, its heads as the start of the QK circuits), from a store, resumed bit for bit, refusing what cannot
run."""

from __future__ import annotations

import pytest
import torch

import interp
from interp.sae import evaluate, train
from interp.sae.lorsa import Lorsa
from interp.sae.lorsa.sequences import SequenceSource
from interp.sae.lorsa.train_job import LorsaJob
from interp.sae.training.data import Stream
from interp.sae.training.settings import TrainSettings
from tests.load.families import build

LAYER = 1
HOOKS = (f"blocks.{LAYER}.ln1.hook_normalized", f"blocks.{LAYER}.hook_attn_out")


def _family(name: str, **fields):
    return interp.from_hf(build(name, 64, widen=False, **fields)).eval()


def _activations(model, n: int, context: int = 12, seed: int = 0):
    ids = torch.randint(0, 64, (n, context), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        _, cache = model.run_with_cache(ids, names_filter=list(HOOKS))
    return ids, cache[HOOKS[0]], cache[HOOKS[1]]


@pytest.mark.parametrize("family", ["llama", "gemma2", "qwen3"])
def test_lorsa_trains_on_a_family_and_reconstructs_its_attention_held_out(family):
    model = _family(family)
    ids, x, y = _activations(model, 160)
    lorsa = train(
        (x[:128], y[:128]),
        kind="lorsa",
        model=model,
        layers=[LAYER],
        d_sae=8 * model.cfg.n_heads,
        k=6,
        batch_size=192,
        tokens=128 * 12 * 25,
        lr=3e-3,
        progress=False,
    )
    assert isinstance(lorsa, Lorsa) and lorsa.layers == [LAYER]
    cfg = lorsa.layer(LAYER).cfg
    assert (cfg.rotary_base, cfg.attn_scale) == (
        model.cfg.rotary_base,
        model.cfg.attn_scale or model.cfg.d_head**0.5,
    )
    assert cfg.qk_norm == ("rmsnorm" if family == "qwen3" else "none")
    row = evaluate(model, lorsa, ids[128:]).iloc[0]
    history = lorsa.metadata["training"]["history"]
    print(
        f"{family}: train FVU {history[0]['fvu']:.3f} -> {history[-1]['fvu']:.3f}, held-out FVU {row.fvu:.3f}, "
        f"CE recovered {row.ce_recovered_zero:.3f}, agreement {row.agreement:.3f}, dead {row.dead_fraction:.3f}"
    )
    # the held-out attention output is explained far better than by its mean, and training improved it
    assert row.fvu < 0.6 and history[-1]["fvu"] < 0.6 * history[0]["fvu"]
    assert row.l0 == pytest.approx(6.0)


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_each_qk_head_starts_as_the_models_head(family):
    """qk_init='attention': before any step, QK head j attends as the model's head j // 2 (two per head)."""
    model = _family(family)
    ids, x, y = _activations(model, 8)
    with torch.no_grad():
        _, cache = model.run_with_cache(ids, names_filter=f"blocks.{LAYER}.attn.hook_pattern")
    settings = TrainSettings(d_sae=4 * model.cfg.n_heads, k=4)
    rows = SequenceSource((x, y), HOOKS)
    job = LorsaJob(
        settings,
        rows,
        model,
        LAYER,
        ("ln1.hook_normalized", "hook_attn_out"),
        {"n_qk_heads": 2 * model.cfg.n_heads},
    )
    step, scale, _ = job.start(rows.tensor)
    with torch.no_grad():
        ours = step.module.pattern(
            x * scale[0]
        )  # [batch, qk_head, query, key], on the scaled input it trains on
    theirs = cache[f"blocks.{LAYER}.attn.hook_pattern"].repeat_interleave(2, dim=1)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=2e-6)


def test_a_resumed_lorsa_run_equals_an_uninterrupted_one_bit_for_bit(tmp_path):
    model = _family("llama")
    _, x, y = _activations(model, 64)
    kw = dict(kind="lorsa", model=model, layers=[LAYER], d_sae=16, k=3, batch_size=96, tokens=64 * 12 * 3)
    kw.update(seed=0, progress=False)
    whole = train((x, y), checkpoint_dir=tmp_path / "whole", checkpoint_every=5, **kw)

    class Interrupt(Exception):
        pass

    original = Stream.batches

    def failing(self, batch_size, start_step=0):
        for i, batch in enumerate(original(self, batch_size, start_step)):
            if start_step + i == 12:
                raise Interrupt
            yield batch

    Stream.batches = failing
    try:
        with pytest.raises(Interrupt):
            train((x, y), checkpoint_dir=tmp_path / "resumed", checkpoint_every=5, **kw)
    finally:
        Stream.batches = original
    resumed = train((x, y), checkpoint_dir=tmp_path / "resumed", checkpoint_every=5, **kw)
    for name, p in whole.state_dict().items():
        assert torch.equal(p, resumed.state_dict()[name]), name
    assert resumed.metadata["training"]["history"] == whole.metadata["training"]["history"]
    with pytest.raises(ValueError, match="belongs to another run"):
        train((x, y), checkpoint_dir=tmp_path / "resumed", **{**kw, "n_qk_heads": 8})


def test_a_lorsa_trains_from_an_activation_store(tmp_path):
    model = _family("llama")
    ids, x, y = _activations(model, 40)
    store = interp.store.cache_activations(
        model, [(ids, torch.ones_like(ids))], list(HOOKS), tmp_path / "acts"
    )
    kw = dict(kind="lorsa", model=model, layers=[LAYER], d_sae=16, k=3, batch_size=120, tokens=40 * 12 * 2)
    kw.update(progress=False, seed=3)
    from_store = train(store, **kw)
    from_tensors = train((x, y), **kw)
    for name, p in from_store.state_dict().items():
        torch.testing.assert_close(p, from_tensors.state_dict()[name], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (dict(model=None), "pass model="),
        (dict(layers=[0, 1]), "trains one layer"),
        (dict(batch_size=100), "batch_size=100 tokens is not a whole number of sequences of context=12"),
        (dict(d_sae=10, n_qk_heads=4), "d_sae=10 heads cannot be shared evenly by n_qk_heads=4"),
        (dict(d_qk_head=8, qk_init="attention"), "qk_init='attention' copies the model's heads"),
        (dict(context=20), "context=20, but the sequences hold 12 positions"),
        (dict(kind="transcoder"), "n_qk_heads are for kind='lorsa'"),
    ],
)
def test_a_lorsa_run_that_cannot_run_is_refused_before_training(change, message):
    model = _family("llama")
    _, x, y = _activations(model, 4)
    kw = dict(
        kind="lorsa", model=model, layers=[LAYER], d_sae=16, k=3, batch_size=96, n_qk_heads=4, progress=False
    )
    kw.update(change)
    with pytest.raises(ValueError, match=message):
        train((x, y), **kw)
