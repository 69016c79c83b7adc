"""Run in circuit-tracer's own environment (``tests/reference_envs.py``): read Gemma Scope 2 per-layer files with
circuit-tracer's loader and write what its transcoders compute on given inputs.

    python circuit_tracer_reader.py INPUTS OUT FOLDER [FOLDER...]

Each ``FOLDER`` holds ``layer_{i}.safetensors``; ``INPUTS`` is a safetensors file with ``x [n_layers, n_pos,
d_model]``; ``OUT`` receives, for the ``f``-th folder and layer ``i``, the encoder's pre-activations
``{f}/pre_{i}``, activations ``{f}/acts_{i}`` and the reconstruction with the skip term ``{f}/recons_{i}``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from circuit_tracer.transcoder.single_layer_transcoder import TranscoderSet, load_gemma_scope_2_transcoder
from safetensors.torch import load_file, save_file


def main(inputs: str, out: str, *folders: str) -> None:
    x = load_file(inputs)["x"]
    result = {}
    for f, folder in enumerate(folders):
        result.update({f"{f}/{key}": value for key, value in read(folder, x).items()})
    save_file({k: v.float().contiguous() for k, v in result.items()}, out)


def read(folder: str, x: torch.Tensor) -> dict[str, torch.Tensor]:
    n_layers = x.shape[0]
    layers = {
        i: load_gemma_scope_2_transcoder(
            str(Path(folder) / f"layer_{i}.safetensors"), i, device=torch.device("cpu")
        )
        for i in range(n_layers)
    }
    ts = TranscoderSet(layers, "hook_resid_mid", "hook_mlp_out")
    result = {}
    with torch.no_grad():
        for i in range(n_layers):
            result[f"pre_{i}"] = ts.encode_layer(x[i], i, apply_activation_function=False)
            result[f"acts_{i}"] = ts.encode_layer(x[i], i)
            result[f"recons_{i}"] = ts[i].decode(result[f"acts_{i}"], x[i])
    return result


if __name__ == "__main__":
    main(*sys.argv[1:])
