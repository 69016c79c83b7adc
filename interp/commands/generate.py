"""``interp generate MODEL PROMPT``: generate text, streamed to stdout as it is made, optionally steered.

A steering vector comes from a file: one written by :meth:`interp.analysis.SteeringVector.save` (it knows
its hook and model; ``--layer`` moves it to the same hook of another layer) or a plain tensor saved with
``torch.save`` (added to ``blocks.LAYER.hook_resid_pre``; ``--layer`` is then required). The file is read and
checked (readable, finite) before the model loads; the flags that only mean something with ``--steer`` or
``--sample`` are refused without it rather than ignored. A reader that closes the pipe (``| head``) ends
the command quietly.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any

from interp.arguments import add_command, add_device_arguments

SAMPLING_FLAGS = {"temperature": "--temperature", "top_k": "--top-k", "top_p": "--top-p", "seed": "--seed"}
STEERING_FLAGS = {"layer": "--layer", "scale": "--scale", "steer_positions": "--steer-positions"}


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``interp generate`` to the subcommands."""
    p = add_command(
        sub,
        "generate",
        summary="generate text, streamed as it is made, optionally steered",
        description=(
            "Continue a prompt with a model, printing each piece of text as it is made. Greedy by default;\n"
            "--sample draws tokens instead. --steer adds a steering vector at every step."
        ),
        example='interp generate smollm2-135m "The capital of France is" --max-new-tokens 20',
    )
    add_generate_arguments(p)
    p.set_defaults(fn=run)


def add_generate_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``interp generate``."""
    p.add_argument("model", help="packaged name, HF folder or .gguf file")
    p.add_argument("prompt", help="the text to continue")
    p.add_argument("--max-new-tokens", type=int, default=64, help="tokens to generate at most")
    p.add_argument("--sample", action="store_true", help="sample instead of taking the most likely token")
    p.add_argument(
        "--temperature",
        type=float,
        default=None,
        help="with --sample: divide the logits by this (default: 1.0)",
    )
    p.add_argument(
        "--top-k", type=int, default=None, help="with --sample: keep the k likeliest (default: all)"
    )
    p.add_argument(
        "--top-p", type=float, default=None, help="with --sample: nucleus probability mass (default: 1, all)"
    )
    p.add_argument("--seed", type=int, default=None, help="with --sample: the random seed (default: random)")
    p.add_argument(
        "--stop", action="append", default=None, help="stop at this text, repeatable (default: none)"
    )
    p.add_argument(
        "--steer", default=None, help="a steering vector file, .safetensors or a tensor .pt (default: none)"
    )
    p.add_argument(
        "--layer",
        type=int,
        default=None,
        help="with --steer: the layer to steer at (default: the vector's own)",
    )
    p.add_argument(
        "--scale", type=float, default=None, help="with --steer: multiple of the vector to add (default: 1.0)"
    )
    p.add_argument(
        "--steer-positions",
        choices=("all", "new"),
        default=None,
        help="with --steer: steer every token or only the generated ones (default: all)",
    )
    add_device_arguments(p, quiet=False)


def run(args: argparse.Namespace) -> int:
    """Check the command, load the model, stream the text."""
    vector = preflight(args)
    from interp.load import load
    from interp.preflight import check_placement

    model = load(args.model, device=args.device, dtype=args.dtype, **check_placement(args))
    hooks = [] if vector is None else [_steering_hook(model, vector, args)]

    def show(row: int, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    try:
        model.generate(
            args.prompt,
            args.max_new_tokens,
            do_sample=args.sample,
            stop_strings=args.stop,
            fwd_hooks=hooks,
            stream=show,
            **_sampling(args),
        )
        sys.stdout.write("\n")
        sys.stdout.flush()
    except BrokenPipeError:  # the reader has all it wanted (``| head``): stop quietly, as cat does
        _detach_stdout()
    return 0


def _detach_stdout() -> None:
    """Point stdout at the null device, so that the interpreter's own flush at exit finds no closed pipe."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file descriptor (replaced in-process): nothing to flush
        pass


def preflight(args: argparse.Namespace) -> Any:
    """Everything that can be checked before the model loads; returns the steering vector read, or ``None``."""
    from interp.generation.sampling import check_sampling
    from interp.generation.stopping import check_stop_strings
    from interp.preflight import check_command, check_placement

    if args.max_new_tokens < 1:
        raise ValueError(f"--max-new-tokens {args.max_new_tokens}: give at least 1")
    sampling = _sampling(args)
    if not args.sample and sampling:
        flags = [SAMPLING_FLAGS[k] for k in sampling]
        verb = "apply" if len(flags) > 1 else "applies"
        raise ValueError(
            f"{', '.join(flags)} only {verb} when sampling: add --sample (greedy decoding takes the likeliest)"
        )
    check_sampling(args.sample, sampling.get("temperature", 1.0), args.top_k, args.top_p, args.seed)
    check_stop_strings(args.stop, tokenizer=True)  # the model's tokenizer is checked once it loads
    check_placement(args)  # the placement flags, before the model is looked for
    check_command(device=args.device, dtype=args.dtype, model=args.model)
    if args.steer is None:
        given = [flag for key, flag in STEERING_FLAGS.items() if getattr(args, key) is not None]
        if given:
            verb = "say" if len(given) > 1 else "says"
            raise ValueError(f"{', '.join(given)} {verb} how to steer; give the vector with --steer FILE")
        return None
    return _read_vector(args)


def _sampling(args: argparse.Namespace) -> dict[str, Any]:
    return {k: getattr(args, k) for k in SAMPLING_FLAGS if getattr(args, k) is not None}


def _read_vector(args: argparse.Namespace) -> Any:
    """The vector in ``--steer``, read and checked (a readable file, finite values, a finite scale)."""
    import torch

    from interp.analysis import SteeringVector, steer

    path = Path(args.steer)
    if not path.is_file():
        raise FileNotFoundError(f"--steer {args.steer}: no such file")
    if path.suffix in (".pt", ".pth"):
        if args.layer is None:
            raise ValueError(f"{args.steer!r} is a plain tensor: say where to add it with --layer L")
        try:
            vector = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:  # pickle, zip and torch errors alike: the file is not a saved tensor
            reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise ValueError(f"--steer {args.steer}: not a tensor saved with torch.save ({reason})") from None
        if not isinstance(vector, torch.Tensor) or not vector.is_floating_point():
            raise ValueError(f"{args.steer!r} holds {type(vector).__name__}, not a float tensor")
    else:
        vector = SteeringVector.load(path)
    steer(vector, _scale(args), _positions(args))  # refuses a NaN scale or vector now, not after the load
    return vector


def _scale(args: argparse.Namespace) -> float:
    return 1.0 if args.scale is None else args.scale


def _positions(args: argparse.Namespace) -> str:
    return args.steer_positions or "all"


def _steering_hook(model: Any, vector: Any, args: argparse.Namespace) -> tuple:
    import torch

    from interp.analysis import steer

    hook = steer(vector, _scale(args), _positions(args))
    if isinstance(vector, torch.Tensor):
        name = f"blocks.{args.layer}.hook_resid_pre"
    else:
        vector.check(model)
        name = vector.hook_name
        if args.layer is not None:
            if not re.match(r"^blocks\.\d+\.", name):
                raise ValueError(f"--layer moves a vector between blocks, but this one is at {name!r}")
            name = re.sub(r"^blocks\.\d+\.", f"blocks.{args.layer}.", name)
    hook.check_model(model, name)
    return name, hook
