"""``interp generate MODEL PROMPT``: generate text, streamed to stdout as it is made, optionally steered.

A steering vector comes from a file: one written by :meth:`interp.analysis.SteeringVector.save` (it knows
its hook and model; ``--layer`` moves it to the same hook of another layer) or a plain tensor saved with
``torch.save`` (added to ``blocks.LAYER.hook_resid_pre``; ``--layer`` is then required).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import torch

from interp.arguments import add_placement_arguments


def add_generate_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``interp generate``."""
    p.add_argument("model", help="packaged name, HF folder or .gguf file")
    p.add_argument("prompt")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--sample", action="store_true", help="sample instead of taking the most likely token")
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--stop", action="append", default=None, help="stop at this text (repeatable)")
    p.add_argument("--steer", default=None, help="a steering vector file (.safetensors, or a tensor .pt)")
    p.add_argument("--layer", type=int, default=None, help="the layer to steer at")
    p.add_argument("--scale", type=float, default=1.0, help="multiple of the steering vector to add")
    p.add_argument(
        "--steer-positions", choices=("all", "new"), default="all", help="steer every token or only new ones"
    )
    p.add_argument("--device", default=None)
    add_placement_arguments(p)
    p.add_argument("--dtype", default=None)


def generate_main(args: argparse.Namespace) -> int:
    """Run ``interp generate``; returns the exit status."""
    from interp.load import load
    from interp.preflight import check_placement

    sampling = {"temperature": args.temperature, "top_k": args.top_k, "top_p": args.top_p, "seed": args.seed}
    sampling = {k: v for k, v in sampling.items() if v is not None}
    _preflight(args, sampling)
    model = load(args.model, device=args.device, dtype=args.dtype, **check_placement(args))
    hooks = [] if args.steer is None else [_steering_hook(model, args)]

    def show(row: int, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    model.generate(
        args.prompt,
        args.max_new_tokens,
        do_sample=args.sample,
        stop_strings=args.stop,
        fwd_hooks=hooks,
        stream=show,
        **sampling,
    )
    sys.stdout.write("\n")
    return 0


def _preflight(args: argparse.Namespace, sampling: dict) -> None:
    """Everything that can be checked before the model loads."""
    from interp.generation.sampling import check_sampling
    from interp.generation.stopping import check_stop_strings

    if args.max_new_tokens < 1:
        raise ValueError(f"--max-new-tokens {args.max_new_tokens}: give at least 1")
    check_sampling(
        args.sample, sampling.get("temperature", 1.0), sampling.get("top_k"), sampling.get("top_p"), args.seed
    )
    check_stop_strings(args.stop, tokenizer=True)  # the model's tokenizer is checked once it loads
    if args.steer is None and args.layer is not None:
        raise ValueError("--layer says where to steer; give the vector with --steer FILE")
    if args.steer is not None and not Path(args.steer).is_file():
        raise FileNotFoundError(f"no steering vector file {args.steer!r}")


def _steering_hook(model, args: argparse.Namespace) -> tuple:
    from interp.analysis import SteeringVector, steer

    path = Path(args.steer)
    if path.suffix in (".pt", ".pth"):
        if args.layer is None:
            raise ValueError(f"{args.steer!r} is a plain tensor: say where to add it with --layer L")
        vector = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(vector, torch.Tensor) or not vector.is_floating_point():
            raise ValueError(f"{args.steer!r} holds {type(vector).__name__}, not a float tensor")
        hook = steer(vector, args.scale, args.steer_positions)
        name = f"blocks.{args.layer}.hook_resid_pre"
        hook.check_model(model, name)
        return name, hook
    vec = SteeringVector.load(path, model)
    name = vec.hook_name
    if args.layer is not None:
        if not re.match(r"^blocks\.\d+\.", name):
            raise ValueError(f"--layer moves a vector between blocks, but this one is at {name!r}")
        name = re.sub(r"^blocks\.\d+\.", f"blocks.{args.layer}.", name)
    hook = steer(vec, args.scale, args.steer_positions)
    hook.check_model(model, name)
    return name, hook
