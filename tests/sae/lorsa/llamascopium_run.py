"""Run in llamascopium's own environment (``tests/reference_envs.py``): make dictionaries with llamascopium, save
them with its ``save_pretrained``, read them back with its ``from_pretrained`` and write what they compute.

    python llamascopium_run.py SPEC OUT

``SPEC`` is a JSON list of cases, each ``{"name", "folder", "config", "seed", "shape", "norms",
"stored_qk_heads"}``: ``config`` is a llamascopium config (``sae_type`` ``lorsa``, ``sae`` or ``clt``), the
parameters are drawn from ``seed``, ``norms`` (or ``null``) are the dataset's average norms per hook, and
``shape`` is the input's (``[batch, pos]`` for a Lorsa, ``[tokens]`` for an SAE, ``[tokens, n_layers]`` for a
CLT). With ``stored_qk_heads`` the folder is saved with that many QK heads and its config then asks for more
(llamascopium repeats them on loading). ``OUT`` receives ``{name}/x`` and, for ``{dtype}`` float32 and float64
(the same weights read in each), ``{name}/{dtype}/acts``, ``pre``, ``out`` (the output in the model's units:
the input times its scale factor, forward, divided by the output's), and for a Lorsa ``pattern`` and
``acts_fused`` (its fused-kernel path).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import torch
from llamascopium.models.sparse_dictionary import (
    SAE_TYPE_TO_CONFIG_CLASS,
    SparseDictionary,
    SparseDictionaryConfig,
)
from safetensors.torch import save_file


def main(spec: str, out: str) -> None:
    result = {}
    for case in json.loads(Path(spec).read_text()):
        result.update(run(case))
    save_file({k: v.contiguous() for k, v in result.items()}, out)


def run(case: dict) -> dict[str, torch.Tensor]:
    name, folder = case["name"], Path(case["folder"])
    config = dict(case["config"])
    stored = case.get("stored_qk_heads")
    if stored:
        config["n_qk_heads"] = stored
    cfg = SAE_TYPE_TO_CONFIG_CLASS[config["sae_type"]].model_validate(config)
    model = SparseDictionary.from_config(cfg)
    gen = torch.Generator().manual_seed(case["seed"])
    with torch.no_grad():
        for pname, p in model.named_parameters():
            p.copy_(_draw(pname, tuple(p.shape), cfg.d_model, gen))
    if case.get("norms"):
        model.set_dataset_average_activation_norm(case["norms"])
    model.save_pretrained(str(folder))
    cfg.save_hyperparameters(str(folder))
    if stored:
        written = json.loads((folder / "config.json").read_text())
        written["n_qk_heads"] = case["config"]["n_qk_heads"]
        (folder / "config.json").write_text(json.dumps(written))
    x = torch.randn(*case["shape"], *_inner(cfg), generator=gen)
    result = {f"{name}/x": x}
    for dtype in (torch.float32, torch.float64):
        loaded = SparseDictionary.from_pretrained(str(folder), dtype=dtype)
        tag = str(dtype).removeprefix("torch.")
        result |= {f"{name}/{tag}/{k}": v for k, v in forward(loaded, x.to(dtype)).items()}
    return result


def _inner(cfg: SparseDictionaryConfig) -> tuple[int, ...]:
    return (cfg.n_layers, cfg.d_model) if cfg.sae_type == "clt" else (cfg.d_model,)


def _draw(name: str, shape: tuple[int, ...], d_model: int, gen: torch.Generator) -> torch.Tensor:
    """Parameters of a trained dictionary's sizes: unit-scale reads, gains near one, thresholds of the order of
    the pre-activations, biases small but not zero."""
    noise = torch.randn(*shape, generator=gen)
    if name in ("ln_q.w", "ln_k.w"):
        return 1.0 + 0.2 * noise
    if name.endswith("log_jumprelu_threshold"):
        return math.log(0.5) + 0.3 * noise
    if name.startswith("b_") or ".b_" in name or name.startswith("b_D"):
        return 0.1 * noise
    return noise / math.sqrt(d_model)


@torch.no_grad()
def forward(model: SparseDictionary, x: torch.Tensor) -> dict[str, torch.Tensor]:
    cfg = model.cfg
    if cfg.sae_type == "lorsa":
        if cfg.positional_embedding_type == "rotary":  # the file's tables are of the dtype they were saved in
            sin, cos = model._calculate_sin_cos_rotary(
                cfg.rotary_dim, cfg.n_ctx, base=cfg.rotary_base, dtype=x.dtype, device="cpu"
            )
            model.rotary_sin, model.rotary_cos = sin, cos
        f_in = model.compute_norm_factor(x, cfg.hook_point_in)
        f_out = model.compute_norm_factor(x, cfg.hook_point_out)
        acts, pre, pattern = model.encode(
            x * f_in, return_hidden_pre=True, return_attention_pattern=True
        )  # the explicit path
        fused = model.encode(x * f_in)  # scaled_dot_product_attention
        return {
            "acts": acts,
            "pre": pre,
            "pattern": pattern,
            "acts_fused": fused,
            "out": model.decode(acts) / f_out,
        }
    if cfg.sae_type == "clt":
        f_in = torch.stack([model.compute_norm_factor(x, h) for h in cfg.hook_points_in])  # [n_layers]
        f_out = torch.stack([model.compute_norm_factor(x, h) for h in cfg.hook_points_out])
        acts, pre = model.encode(x * f_in[:, None], return_hidden_pre=True)  # [tokens, n_layers, d_sae]
        out = model.decode(acts) / f_out[:, None, None]  # [n_layers, tokens, d_model]
        return {"acts": acts, "pre": pre, "out": out}
    f_in = model.compute_norm_factor(x, cfg.hook_point_in)
    f_out = model.compute_norm_factor(x, cfg.hook_point_out)
    acts, pre = model.encode(x * f_in, return_hidden_pre=True)
    return {"acts": acts, "pre": pre, "out": model.decode(acts) / f_out}


if __name__ == "__main__":
    main(*sys.argv[1:])
