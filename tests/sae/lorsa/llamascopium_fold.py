"""Run in llamascopium's own environment (``tests/reference_envs.py``): for each saved folder, the largest
difference between the function llamascopium trains (inputs scaled by their factor, forward, output divided by
its factor) and what its own folding of the factors computes (``from_pretrained(fold_activation_scale=True)``
on unscaled inputs).

    python llamascopium_fold.py SPEC OUT

``SPEC`` is the JSON list of ``{"name", "folder", "x"}`` (``x``: a safetensors file with the input ``x``);
``OUT`` receives ``{name: [difference, largest output]}`` as JSON.
"""

from __future__ import annotations

import json
import sys

import torch
from llamascopium.models.sparse_dictionary import SparseDictionary
from safetensors.torch import load_file


def trained(model: SparseDictionary, x: torch.Tensor) -> torch.Tensor:
    cfg = model.cfg
    if cfg.sae_type == "clt":
        f_in = torch.stack([model.compute_norm_factor(x, h) for h in cfg.hook_points_in])
        f_out = torch.stack([model.compute_norm_factor(x, h) for h in cfg.hook_points_out])
        return model.decode(model.encode(x * f_in[:, None])) / f_out[:, None, None]
    f_in = model.compute_norm_factor(x, cfg.hook_point_in)
    f_out = model.compute_norm_factor(x, cfg.hook_point_out)
    return model.decode(model.encode(x * f_in)) / f_out


def main(spec: str, out: str) -> None:
    result = {}
    for case in json.loads(open(spec).read()):
        x = load_file(case["x"])["x"]
        with torch.no_grad():
            want = trained(SparseDictionary.from_pretrained(case["folder"]), x)
            folded = SparseDictionary.from_pretrained(case["folder"], fold_activation_scale=True)
            got = folded.decode(folded.encode(x))
        result[case["name"]] = [float((want - got).abs().max()), float(want.abs().max())]
    open(out, "w").write(json.dumps(result))


if __name__ == "__main__":
    main(*sys.argv[1:])
