"""One trainer for every kind: the same step gives what the per-kind steps gave, the old name trains the same,
and a run that ends worse than the mean says so with what to try.

``golden/training_per_kind.safetensors`` holds what ``interp.sae.train`` (an SAE step) and
``interp.sae.train_transcoders`` (a transcoder step) trained, as two steps, on the data built here (commit
2b27093, one thread as the tests run).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from interp.sae.training import TrainingWarning, train, train_transcoders

GOLDEN = Path(__file__).parent / "golden" / "training_per_kind.safetensors"
ARCHITECTURES = ("topk", "batchtopk", "standard", "jumprelu")


def _data():
    g = torch.Generator().manual_seed(0)
    return torch.randn(400, 2, 8, generator=g), torch.randn(400, 2, 8, generator=g)


def _settings(architecture: str) -> dict:
    k = 2 if architecture in ("topk", "batchtopk") else None
    return dict(architecture=architecture, k=k, batch_size=40, tokens=800, progress=False, seed=1)


@pytest.mark.parametrize("kind", ["transcoder", "skip-transcoder", "clt"])
def test_transcoders_train_bit_for_bit_as_the_transcoder_step_did(kind):
    golden, (x, y) = load_file(str(GOLDEN)), _data()
    for architecture in ARCHITECTURES:
        with pytest.warns(TrainingWarning):  # 20 steps on noise: worse than the mean, and said
            tc = train((x, y), kind=kind, d_sae=8, **_settings(architecture))
        for name, value in tc.state_dict().items():
            assert torch.equal(value, golden[f"{kind}.{architecture}.{name}"]), (architecture, name)


def test_an_sae_trains_as_the_sae_step_did_to_float_rounding():
    """The SAE is the one-layer case of the same step: the same sums in another order (batched products over
    one layer), so its weights are the SAE step's to float32 rounding after 20 steps."""
    golden, (x, _) = load_file(str(GOLDEN)), _data()
    for architecture in ARCHITECTURES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TrainingWarning)  # some end worse than the mean, some not
            sae = train(x[:, 0], d_sae=8, **_settings(architecture))
        for name, value in sae.state_dict().items():
            want = golden[f"sae.{architecture}.{name}"]
            torch.testing.assert_close(value, want, rtol=1e-5, atol=1e-6, msg=f"{architecture} {name}")


def test_the_old_transcoder_name_warns_and_trains_the_same():
    x, y = _data()
    with pytest.warns(TrainingWarning):
        want = train((x, y), kind="clt", d_sae=8, **_settings("standard"))
    with pytest.warns(DeprecationWarning, match="train_transcoders is interp.sae.train now"):
        got = train_transcoders((x, y), kind="clt", d_transcoder=8, **_settings("standard"))
    for name, value in want.state_dict().items():
        assert torch.equal(value, got.state_dict()[name]), name


def test_a_run_worse_than_the_mean_says_so_and_what_to_try():
    # Rows far from the origin, b_dec started at zero and five steps: the reconstruction misses the mean.
    x = torch.randn(400, 8, generator=torch.Generator().manual_seed(0)) + 5
    with pytest.warns(TrainingWarning) as caught:
        sae = train(x, d_sae=8, k=2, batch_size=40, tokens=200, b_dec_init="zeros", progress=False)
    (warning,) = [w for w in caught if w.category is TrainingWarning]
    fvu = sae.metadata["training"]["history"][-1]["fvu"]
    assert fvu >= 1
    assert str(warning.message) == (
        f"the dictionary's fraction of variance unexplained is {fvu:.3f} at the end of training, worse than "
        "predicting the mean of the rows (1.0): it took 5 steps of 40 rows: train on more tokens (tokens=, "
        "--tokens) or in smaller batches (batch_size=, --train-batch-size), so that it takes a few thousand steps"
    )
    # A run that learns (planted atoms, enough steps) ends below 1 and warns of nothing.
    g = torch.Generator().manual_seed(2)
    atoms = torch.nn.functional.normalize(torch.randn(16, 8, generator=g), dim=-1)
    codes = (torch.rand(4000, 16, generator=g) < 0.15) * torch.rand(4000, 16, generator=g)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TrainingWarning)
        good = train(codes @ atoms, d_sae=32, k=3, batch_size=100, tokens=40000, lr=3e-3, progress=False)
    assert good.metadata["training"]["history"][-1]["fvu"] < 0.5


def test_every_kind_trains_on_the_same_rows_of_a_store(tmp_path):
    """``min_position`` leaves each item's first tokens out for transcoders as for SAEs (it was recorded, and
    ignored, for transcoders)."""
    from interp.sae.training import TrainSettings
    from interp.sae.training.kinds import job_for, transcoder_hooks
    from interp.store import cache_activations
    from tests.sae.models import tiny_model

    model = tiny_model()
    ids = torch.randint(0, 40, (3, 7), generator=torch.Generator().manual_seed(0))
    hooks = transcoder_hooks([0, 1], "ln2.hook_normalized", "hook_mlp_out")
    store = cache_activations(model, [ids], hooks, tmp_path / "store", progress=False)
    assert len(store) == 21
    settings = TrainSettings(d_sae=8, k=2, min_position=2)
    _, tc_rows, _ = job_for("clt", settings, store)
    _, sae_rows, _ = job_for("sae", settings, store, hook_name=hooks[0])
    assert tc_rows.n_rows == sae_rows.n_rows == 3 * (7 - 2)
    torch.testing.assert_close(tc_rows.read(0)[:, :16], sae_rows.read(0), rtol=0, atol=0)
