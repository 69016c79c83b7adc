"""``interp serve MODEL``: one process serving one loaded model and its dictionaries over HTTP, speaking
Neuronpedia's inference API (``/v1/...``) and its graph-server API (``/generate-graph``, ``/steer``), and the
files of the named folders, until Ctrl-C.

Everything that can be checked before the model loads is, each in one line: FastAPI, uvicorn and pydantic
installed, the address (another than loopback needs a secret), the port free, the folders, dictionary paths and
source-set names, the limits, the device and dtype. Then the model loads, and each dictionary is read and checked
against it; the transcoders must replace every MLP, as graphs need.
"""

from __future__ import annotations

import argparse
import errno
import os
import socket
from pathlib import Path

from interp.arguments import add_command, add_device_arguments, non_negative_int, positive_int

EXAMPLE = "interp serve smollm2-135m --transcoders tc/ --folder graphs/"


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``interp serve`` to the subcommands."""
    from interp.serve.limits import Limits, bounds, flag

    p = add_command(
        sub,
        "serve",
        summary="serve a model and its dictionaries over Neuronpedia's inference and graph APIs",
        description=(
            "Load a model and its dictionaries once and serve them over HTTP until Ctrl-C: Neuronpedia's\n"
            "inference API under /v1 (its published client works unchanged), its graph server's\n"
            "/generate-graph and /steer, and the files of the --folder folders, read-only. Listens on\n"
            "127.0.0.1 unless --host says otherwise; another address needs --secret. One computation runs\n"
            "on the model at a time; the others wait in a queue. docs/workbench.md has the details."
        ),
        example=EXAMPLE,
    )
    p.add_argument("model", help="packaged name, Hugging Face folder or .gguf file")
    p.add_argument(
        "--dictionary",
        action="append",
        default=[],
        metavar="PATH",
        help="an SAE, transcoder or CLT folder, served as source set NAME, repeatable (default: none)",
    )
    p.add_argument(
        "--transcoders",
        default=None,
        metavar="DIR",
        help="the transcoders graphs are traced with (default: none)",
    )
    p.add_argument(
        "--folder",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder of graphs, dashboards or reports to serve read-only, repeatable (default: none)",
    )
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    p.add_argument("--port", type=non_negative_int, default=8000, help="the port (0: a free one)")
    p.add_argument(
        "--secret",
        default=None,
        help="what every request must send as x-secret-key; needed off loopback (default: $INTERP_SERVE_SECRET, "
        "else none)",
    )
    p.add_argument("--model-id", default=None, help="the model's name in requests (default: MODEL's name)")
    p.add_argument(
        "--source-set",
        action="append",
        default=[],
        metavar="NAME",
        help="the source-set name, once for all dictionaries or once per --dictionary then --transcoders "
        "(default: each folder's name)",
    )
    defaults = Limits()
    for name, what in bounds().items():
        p.add_argument(
            flag(name), type=positive_int, default=getattr(defaults, name), metavar="N", help=f"most {what}"
        )
    add_device_arguments(p)
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    """Check the command, load the model and dictionaries, and serve until interrupted."""
    from interp.serve import require

    try:
        require()
    except ImportError as err:
        raise ValueError(str(err)) from None
    from interp.preflight import check_command, check_placement
    from interp.serve.folders import Folders
    from interp.serve.guard import SECRET_ENVIRONMENT, check_host
    from interp.serve.limits import Limits
    from interp.serve.sources import set_names

    placement = check_placement(args)
    secret = args.secret if args.secret is not None else os.environ.get(SECRET_ENVIRONMENT)
    check_host(args.host, secret)
    limits = Limits(**{name: getattr(args, name) for name in Limits.__dataclass_fields__})
    check_command(device=args.device, dtype=args.dtype, model=args.model)
    folders = Folders(args.folder)
    paths = [Path(p).expanduser() for p in args.dictionary]
    if args.transcoders is not None:
        paths.append(Path(args.transcoders).expanduser())
    for path, given in zip(
        paths, [*args.dictionary, *([args.transcoders] if args.transcoders else [])], strict=True
    ):
        if not path.exists():
            flag = "--transcoders" if given == args.transcoders and path == paths[-1] else "--dictionary"
            raise FileNotFoundError(f"{flag} {given} does not exist; give a dictionary's folder")
    names = set_names(paths, args.source_set) if paths else []
    if args.source_set and not paths:
        raise ValueError(
            "--source-set names dictionaries, and none is given; add --dictionary or --transcoders"
        )
    _check_port(args.host, args.port)

    from interp.load import load
    from interp.serve import Served, Sources, serve
    from interp.serve.sources import read_dictionary

    model = load(args.model, device=args.device, dtype=args.dtype, **placement)
    dictionaries = [read_dictionary(path, model) for path in paths]
    transcoders = dictionaries[-1] if args.transcoders is not None else None
    if transcoders is not None:
        from interp.circuits.features.inputs import check_fit

        try:
            check_fit(model, transcoders)
        except ValueError as err:
            raise ValueError(f"--transcoders {args.transcoders}: {err}") from None
    served = Served(
        model,
        args.model_id or _model_name(args.model),
        Sources(list(zip(names, dictionaries, strict=True))),
        transcoders=transcoders,
        transcoders_name=str(args.transcoders or ""),
        folders=folders,
        limits=limits,
        secret=secret,
    )
    sources = ", ".join(served.sources.sets) or "none"
    print(
        f"interp serve: {served.model_id} (source sets: {sources}) on http://{args.host}:{args.port}"
        f"{' (secret required)' if secret else ''}; Ctrl-C stops it",
        flush=True,
    )
    try:
        serve(served, args.host, args.port, log_level="warning" if args.quiet else "info")
    except KeyboardInterrupt:  # uvicorn raises the Ctrl-C again once it has shut down cleanly
        pass
    print("interp serve: stopped", flush=True)
    return 0


def _check_port(host: str, port: int) -> None:
    if port > 65535:
        raise ValueError(f"--port {port}; give a port from 0 to 65535")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                raise ValueError(
                    f"port {port} on {host} is in use; give another with --port (0: a free one)"
                ) from None
            raise ValueError(
                f"cannot listen on {host}:{port} ({err.strerror}); check --host and --port"
            ) from None


def _model_name(model: str) -> str:
    path = Path(model)
    if not path.exists():
        return model
    return path.stem if path.suffix == ".gguf" else path.resolve().name
