"""llama.cpp's own GGUF converter, for the tests that read files it wrote.

The converter (``convert_hf_to_gguf.py`` with its ``conversion/`` package and its own ``gguf-py``) ships inside
the llama-cpp-python source distribution. :func:`converter_dir` fetches the pinned release once with pip
(checked against its sha256), keeps only those three parts in a cache folder, and returns it; later runs find
it there and need no network. Test processes that ask at once fetch it once, under a file lock, into a temporary
folder renamed into place when complete (:func:`interp.atomic.built_once`). ``scripts/run_tests.sh`` runs this
module first (``python -m tests.load.llama_cpp``) so that the suite itself runs offline; under CI a fetch that
fails fails the run rather than skipping.

Where: ``$INTERP_TEST_CACHE``, else ``$XDG_CACHE_HOME/interp-tests``, else ``~/.cache/interp-tests``. A copy of
the sdist already on disk can be named with ``INTERP_LLAMA_CPP_SDIST`` instead of fetching it.

:func:`convert` runs the converter in a subprocess, with ``PYTHONPATH`` set to its own ``gguf-py``, over several
model folders in one process (its imports take most of the time).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from interp.atomic import built_once

VERSION = "0.3.36"
SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
_ROOT = f"llama_cpp_python-{VERSION}/vendor/llama.cpp/"
_KEEP = ("convert_hf_to_gguf.py", "LICENSE", "conversion/", "gguf-py/gguf/")
_DRIVER = Path(__file__).with_name("llama_cpp_driver.py")


class Unavailable(RuntimeError):
    """The converter could not be fetched (no network, no pip)."""


def cache_root() -> Path:
    if os.environ.get("INTERP_TEST_CACHE"):
        return Path(os.environ["INTERP_TEST_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "interp-tests"


def converter_dir() -> Path:
    """The folder holding ``convert_hf_to_gguf.py``, ``conversion/`` and ``gguf-py/``; fetched if missing.

    Raises:
        Unavailable: it is not cached and cannot be fetched.
    """
    target = cache_root() / f"llama-cpp-python-{VERSION}"
    record = f"llama-cpp-python {VERSION} sha256 {SHA256}\n"
    return built_once(target, _fetch, record=record)  # one fetch, however many test processes ask at once


def _fetch(into: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _extract(_sdist(Path(tmp)), into)


def convert(pairs: list[tuple[Path, Path]], timeout: float = 900) -> None:
    """Write ``gguf`` from each ``folder`` of ``pairs`` with llama.cpp's converter (float32 tensors).

    Raises:
        RuntimeError: the converter failed; the message ends with its output.
    """
    root = converter_dir()
    args = [str(p) for pair in pairs for p in pair]
    env = {k: v for k, v in os.environ.items() if k != "NO_LOCAL_GGUF"}  # its own gguf-py, not ours
    env["PYTHONPATH"] = str(root / "gguf-py")
    result = subprocess.run(
        [sys.executable, str(_DRIVER), str(root), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if result.returncode != 0:
        raise RuntimeError(f"llama.cpp's converter failed ({result.returncode}):\n{result.stderr[-4000:]}")


def _sdist(tmp: Path) -> Path:
    given = os.environ.get("INTERP_LLAMA_CPP_SDIST")
    if given:
        path = Path(given).expanduser()
        if not path.is_file() or _sha256(path) != SHA256:
            raise Unavailable(f"INTERP_LLAMA_CPP_SDIST={given} is not llama-cpp-python {VERSION}'s sdist")
        return path
    requirements = tmp / "requirements.txt"
    requirements.write_text(f"llama-cpp-python=={VERSION} --hash=sha256:{SHA256}\n")
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
    command += ["--require-hashes", "-r", str(requirements), "-d", str(tmp)]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise Unavailable(f"could not run pip to fetch llama-cpp-python {VERSION}: {err}") from err
    found = sorted(tmp.glob("llama_cpp_python-*.tar.gz"))
    if result.returncode != 0 or not found:
        raise Unavailable(f"pip could not fetch llama-cpp-python {VERSION}: {result.stderr.strip()[-600:]}")
    return found[0]


def _extract(sdist: Path, into: Path) -> None:
    """Only the converter's files, as plain files, never outside ``into``."""
    with tarfile.open(sdist, "r:gz") as archive:
        for member in archive.getmembers():
            if not member.isfile() or not member.name.startswith(_ROOT):
                continue
            relative = member.name[len(_ROOT) :]
            parts = Path(relative).parts
            if ".." in parts or not relative.startswith(_KEEP) or "__pycache__" in parts:
                continue
            if relative.startswith("gguf-py/") and len(parts) > 3:  # gguf-py/gguf/scripts: not needed
                continue
            destination = into / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            source = archive.extractfile(member)
            assert source is not None
            destination.write_bytes(source.read())
    if not (into / "convert_hf_to_gguf.py").is_file():
        raise Unavailable(f"{sdist} has no {_ROOT}convert_hf_to_gguf.py")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def required() -> bool:
    """Under CI (``CI`` set and not ``false``/``0``) the converter must be there: its tests fail, not skip."""
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


if __name__ == "__main__":
    try:
        print(converter_dir())
    except Unavailable as err:
        what = "failing the run (CI is set)" if required() else "its GGUF tests will be skipped"
        print(f"llama.cpp's converter is not available, {what}: {err}", file=sys.stderr)
        sys.exit(1 if required() else 0)
