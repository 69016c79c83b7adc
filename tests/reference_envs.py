"""Virtual environments of the reference libraries the tests run live, each with its own pins.

Some reference libraries cannot share the project's test environment: circuit-tracer 0.5.0 pins
``transformers<=4.57.3`` while the project tests against a current release. Each one gets a virtual environment
of its own in the tests' cache folder (the one :mod:`tests.load.llama_cpp` uses), built once with pip (CPU torch
first, pinned, so no accelerator build is pulled in) and found there on later runs. Test processes that ask for
one at once build it once, under a file lock, into a temporary folder renamed into place when complete
(:func:`interp.atomic.built_once`). A test runs the library in a subprocess with :func:`python`'s interpreter,
passing data through files.

``scripts/run_tests.sh`` builds them before the suite (``python -m tests.reference_envs``), so that the suite
itself runs offline; under CI a build that fails fails the run rather than skipping, as for llama.cpp.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from interp.atomic import built_once
from tests.load.llama_cpp import cache_root, required

TORCH = "torch==2.13.0"
ENVS: dict[str, tuple[str, ...]] = {
    "circuit-tracer": ("circuit-tracer==0.5.0", "nnsight==0.6.*"),
    # OpenMOSS's Lorsa, CLT and transcoders (formerly lm-saes); it imports TransformerLens 3's components.
    "llamascopium": ("llamascopium==2.0.0b34", "transformer-lens>=3.9,<4"),
    # nnsight as a peer in its own right (benchmarks/nnsight_peer.py): its current release.
    "nnsight": ("nnsight==0.8.*",),
    # What eai-delphi's scorer modules import, without vLLM (which needs a GPU toolchain; see NO_DEPS).
    "delphi": (
        "sentence-transformers>=3",
        "scikit-learn",
        "pandas",
        "plotly",
        "datasets",
        "faiss-cpu",
        "orjson",
        "simple_parsing",
        "jaxtyping",
        "blobfile",
        "aiofiles",
        "httpx",
        "tiktoken",
        "beartype",
        "asyncer",
    ),
}
"""Name -> the requirements installed after torch."""

BENCHMARK_ONLY = frozenset({"nnsight"})
"""Environments no test uses, only a benchmark: built when named (``python -m tests.reference_envs nnsight``),
not before the suite."""

NO_DEPS: dict[str, tuple[str, ...]] = {
    "delphi": ("eai-delphi==0.1.3", "eai-sparsify==1.3.*"),
}
"""Name -> requirements installed last, without their declared dependencies (eai-delphi declares vLLM, which its
scorers never call; the test stands an empty module in for it)."""


class Unavailable(RuntimeError):
    """The environment could not be built (no network, no pip, or a failed install)."""


def env_dir(name: str) -> Path:
    """Where ``name``'s environment lives; the folder name changes with its requirements."""
    return cache_root() / f"venv-{name}-{hashlib.sha256(_pins(name).encode()).hexdigest()[:10]}"


def _pins(name: str) -> str:
    return " ".join((TORCH, *ENVS[name], *NO_DEPS.get(name, ())))


def python(name: str) -> Path:
    """The interpreter of ``name``'s environment, built first if missing.

    Raises:
        KeyError: ``name`` is not in :data:`ENVS`.
        Unavailable: it is not built and cannot be built here.
    """
    if name not in ENVS:
        raise KeyError(f"no reference environment {name!r}; known: {', '.join(sorted(ENVS))}")
    target = built_once(
        env_dir(name), lambda folder: _build(name, folder, env_dir(name)), record=_pins(name) + "\n"
    )
    return target / "bin" / "python"


def _build(name: str, folder: Path, target: Path) -> None:
    """``name``'s environment built in ``folder``, to be renamed to ``target``: the paths of ``folder`` that its
    scripts hold (``bin/activate``, the ``#!`` lines of ``pip`` and other entry points) are made ``target``'s."""
    _run([sys.executable, "-m", "venv", str(folder)], name)
    pip = [str(folder / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run([*pip, TORCH], name)
    _run([*pip, *ENVS[name]], name)
    if name in NO_DEPS:
        _run([*pip, "--no-deps", *NO_DEPS[name]], name)
    for script in (folder / "bin").iterdir():
        if script.is_file() and not script.is_symlink():
            data = script.read_bytes()
            if str(folder).encode() in data:
                script.write_bytes(data.replace(str(folder).encode(), str(target).encode()))


def require(name: str) -> Path:
    """:func:`python` for a test: skips when the environment cannot be had, fails instead under CI."""
    try:
        return python(name)
    except Unavailable as err:
        if required():
            raise
        pytest.skip(f"the {name} reference environment is not available: {err}")


def _run(command: list[str], name: str) -> None:
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise Unavailable(f"building {name}: {err}") from err
    if result.returncode != 0:
        raise Unavailable(f"building {name}: {' '.join(command[-2:])} failed: {result.stderr.strip()[-600:]}")


if __name__ == "__main__":
    failed = False
    for env in sys.argv[1:] or sorted(set(ENVS) - BENCHMARK_ONLY):
        try:
            print(python(env))
        except Unavailable as err:
            what = "failing the run (CI is set)" if required() else "its tests will be skipped"
            print(f"reference environment {env} is not available, {what}: {err}", file=sys.stderr)
            failed = True
    sys.exit(1 if failed and required() else 0)
