"""Two torchrun ranks (gloo, DistributedDataParallel) train the SAE one process trains at the same total batch."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from tests.sae.train_job import run
from tests.test_distributed import ranks_output, torchrun

# Two ranks each: runs of several torchrun jobs at once would oversubscribe the cores, so the suite's workers
# (pytest-xdist, --dist loadgroup) run these in one worker, one job at a time.
pytestmark = pytest.mark.xdist_group("torchrun")


@pytest.mark.slow
@pytest.mark.parametrize("architecture", ["topk", "batchtopk", "tc-skip-transcoder", "tc-clt"])
def test_two_ranks_train_the_same_sae_as_one_process(tmp_path, architecture):
    out = tmp_path / "two_ranks.safetensors"
    done, _ = torchrun("-m", "tests.sae.train_job", str(out), architecture)
    assert done.returncode == 0, ranks_output(done)
    two = load_file(out)
    one = run(architecture).state_dict()
    assert set(two) == set(one)
    for name, value in one.items():
        torch.testing.assert_close(two[name], value, atol=2e-4, rtol=2e-4, msg=name)
    decoder = next(name for name in one if name.startswith("W_dec"))
    assert not torch.equal(two[decoder], torch.zeros_like(two[decoder]))
