"""``python -m tests.sae.train_job OUT ARCH``: train an SAE on planted data (under torchrun or not), save it to OUT.

``ARCH`` ``tc-KIND`` trains transcoders of that kind (``transcoder``, ``skip-transcoder``, ``clt``) instead.
"""

from __future__ import annotations

import sys

import torch
from safetensors.torch import save_file

from interp import distributed
from interp.sae.training import train
from tests.sae.test_train import planted

SETTINGS = dict(d_sae=64, k=4, batch_size=100, tokens=2500, seed=0, lr=3e-3, progress=False)


def run(architecture: str):
    if architecture.startswith("tc-"):
        from tests.sae.transcoder.test_train import planted as planted_pairs

        kind = architecture.removeprefix("tc-")
        x, y, _ = planted_pairs(2, kind)
        settings = {k: v for k, v in SETTINGS.items() if k != "d_sae"}
        return train((x[:1000], y[:1000]), kind=kind, d_sae=32, **settings)
    x, _ = planted(1000)
    kw = dict(SETTINGS, architecture=architecture)
    if architecture == "jumprelu":
        kw.pop("k")
    return train(x, **kw)


def main(out: str, architecture: str) -> None:
    torch.set_num_threads(1)
    with distributed.session():
        sae = run(architecture)
        if distributed.rank() == 0:
            save_file({k: v.contiguous() for k, v in sae.state_dict().items()}, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
